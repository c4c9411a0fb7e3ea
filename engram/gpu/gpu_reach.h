/* gpu_path = auto: the probe of both local paths on one GPU (the rule it
 * feeds: path_choice.h; engram_gpu_path_report in <engram/engram.h>).
 *
 * uva: a GPU reading random rows of pinned host memory keeps its rate only
 * while the rows lie in a window its translation of host memory covers;
 * beyond it the rate falls to a fraction of PCIe's, whatever the host page
 * size (docs/BENCHMARKS.md, "GPU fetch against table size"); and within it
 * the rate is the GPU's, which on some hosts is well below a copy's. The
 * probe times the gather kernel on every SM over random 256-byte rows of a
 * pinned buffer in windows of 64 MiB, 256 MiB, 512 MiB, 1 GiB, ... up to
 * the size asked for (at most ENGRAM_GPU_REACH_MAX_BYTES); the reach is the
 * largest window up to which every window holds ENGRAM_GPU_REACH_SHARE of
 * the first one's rate.
 *
 * host_gather (gpu_reach_gather.c): the table's own machinery
 * (host_gather.h) -- a pool of the table's threads on its NUMA node, jobs
 * with its chunk size, CUDA's stream operations, two fetches in flight
 * with their joins queued behind both, as back-to-back fetches with
 * ENGRAM_FETCH_ORDER_AT_WAIT run -- over random 256-byte rows of the same
 * windows of a host segment allocated as the table's shard would be; and
 * beside it a contiguous host-to-device copy of as many bytes from its
 * pinned staging, the reference.
 *
 * One buffer at a time: the pinned one, freed, then the host segment, so
 * the probe holds min(size, ENGRAM_GPU_REACH_MAX_BYTES) (at least the
 * first window) of host memory at once, and beside it two fetches' pinned
 * staging and indices and their GPU rows (about 33 MiB of each). Measured
 * once per device and process for the settings that shape host_gather (a
 * larger size asked later measures again, unless uva already fell past
 * its reach), logged at info with its time. */
#ifndef ENGRAM_GPU_GPU_REACH_H
#define ENGRAM_GPU_GPU_REACH_H

#include <stdint.h>
#include "engram/gpu/path_choice.h"
#include "hal/status.h"

/* What the probe is for: the node's rows, and host_gather's settings as
 * the table would take them. */
typedef struct engram_gpu_probe_want {
    uint64_t bytes;       /* windows up to min(bytes, ENGRAM_GPU_REACH_MAX_BYTES) */
    int numa_node;        /* the host segment's node as the shard's is asked (-1: the calling thread's) */
    int huge;             /* ENGRAM_HUGE_* of the host segment (config_view.h) */
    int gather_threads;   /* the pool's threads; ENGRAM_CONFIG_INT_AUTO: as a table's pool on the
                           * segment's node shared by local_ranks */
    int local_ranks;
    uint64_t chunk_bytes; /* the jobs' chunk size */
} engram_gpu_probe_want_t;

/* The probe of `device` (the current device), from the cache where it
 * holds what is asked. An error only where uva's side cannot be measured;
 * host_gather's failure leaves its rates 0 (and gather_threads 0), logged. */
engram_status_t engram_gpu_reach_measure(int device, const engram_gpu_probe_want_t *want, engram_gpu_probe_t *out);

/* host_gather's side: host_gather_gbps and h2d_gbps of p->window[0..windows)
 * (bytes set, the last at most `bytes`), and p->gather_threads. An error
 * leaves the rates measured before it. */
engram_status_t engram_gpu_probe_gather(const engram_gpu_probe_want_t *want, uint64_t bytes, engram_gpu_probe_t *p);

#endif
