/* gpu_path = auto: the reach of a GPU into host memory, measured. A GPU
 * reading random rows of pinned host memory keeps its rate only while the
 * rows lie in a window its translation of host memory covers; beyond it
 * the rate falls to a fraction of PCIe's, whatever the host page size
 * (docs/BENCHMARKS.md, "GPU fetch against table size"). The probe times
 * the gather kernel over random 256-byte rows of a pinned buffer in
 * windows of 64 MiB, 256 MiB, 512 MiB, 1 GiB, ... up to the size asked
 * for; the reach is the largest window whose rate holds
 * ENGRAM_GPU_REACH_SHARE of the 64 MiB window's. Measured once per device
 * and process (a larger size asked later measures again), logged at info. */
#ifndef ENGRAM_GPU_GPU_REACH_H
#define ENGRAM_GPU_GPU_REACH_H

#include <stdint.h>
#include "engram/engram.h" /* ENGRAM_GPU_REACH_SHARE */
#include "hal/status.h"

/* The first window: tables up to it need no probe. */
#define ENGRAM_GPU_REACH_MIN_BYTES ((uint64_t)64 << 20)
/* The largest window probed (a pinned buffer of that size while it runs). */
#define ENGRAM_GPU_REACH_MAX_BYTES ((uint64_t)2 << 30)

typedef struct engram_gpu_reach {
    uint64_t reach_bytes;  /* the largest window that held its rate */
    uint64_t probed_bytes; /* the largest window measured */
    double share_past;     /* rate of the first window that did not hold, over the first's; 0 if all held */
    double gbps_first;     /* GB/s of row bytes in the first window */
} engram_gpu_reach_t;

/* The reach of `device` (the current device) probed up to
 * min(want_bytes, ENGRAM_GPU_REACH_MAX_BYTES). */
engram_status_t engram_gpu_reach_measure(int device, uint64_t want_bytes, engram_gpu_reach_t *out);

#endif
