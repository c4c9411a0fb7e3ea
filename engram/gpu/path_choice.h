/* gpu_path's choice of a table's local path, from what the table asks and
 * what the probe measured (the rule: engram_gpu_path_report in
 * <engram/engram.h>). CUDA-free and pure, so the CPU tier tests it with
 * made-up measurements; gpu_path.c feeds it the probe's (gpu_reach.h). */
#ifndef ENGRAM_GPU_PATH_CHOICE_H
#define ENGRAM_GPU_PATH_CHOICE_H

#include <stdbool.h>
#include <stdint.h>
#include "engram/engram.h" /* engram_gpu_path_report_t, ENGRAM_GPU_REACH_SHARE, ENGRAM_GPU_AUTO_MARGIN */

/* The first window: rows up to it take uva with no probe. */
#define ENGRAM_GPU_REACH_MIN_BYTES ((uint64_t)64 << 20)
/* The largest window probed (a buffer of that size while it runs). */
#define ENGRAM_GPU_REACH_MAX_BYTES ((uint64_t)2 << 30)

/* What the probe measured on one device: windows ascending, and the reach
 * derived from uva's rates (engram_gpu_probe_reach). */
typedef struct engram_gpu_probe {
    int windows;
    engram_gpu_path_window_t window[ENGRAM_GPU_PATH_WINDOWS_MAX];
    uint64_t reach_bytes;  /* the largest window up to which every window held its rate */
    uint64_t probed_bytes; /* the largest window measured */
    double share_past;     /* uva's rate in the first window that did not hold, over the first's; 0 if all held */
    double gbps_first;     /* uva's rate in the first window */
    int gather_threads;    /* host_gather's pool; 0 when its probe failed */
    double probe_ms;       /* the probe's wall time */
} engram_gpu_probe_t;

/* The reach from p->window[] (uva's rates): every window from the first
 * on holds ENGRAM_GPU_REACH_SHARE of the first's until one does not. */
void engram_gpu_probe_reach(engram_gpu_probe_t *p);

/* What a table asks of its local path. */
typedef struct engram_gpu_path_ask {
    int gpu_path;        /* ENGRAM_GPU_PATH_AUTO / _UVA / _HOST_GATHER (hal/config_keys.h) */
    unsigned lacks;      /* the first capability host_gather lacks for the table (fetch_path.h); 0: none */
    uint64_t node_bytes; /* the node's rows */
} engram_gpu_path_ask_t;

typedef enum engram_gpu_pick {
    ENGRAM_GPU_PICK_UVA,
    ENGRAM_GPU_PICK_HOST_GATHER,
    ENGRAM_GPU_PICK_REFUSED, /* gpu_path=host_gather where it lacks ask->lacks: the caller words the refusal */
} engram_gpu_pick_t;

/* Whether the choice needs the probe's measurements. */
bool engram_gpu_path_needs_probe(const engram_gpu_path_ask_t *ask);

/* The choice, and into r (its size kept) the path, the reason (static
 * text) and, with a probe, its reach, windows and the rates compared.
 * probe: the measurements where engram_gpu_path_needs_probe, else NULL
 * (and ignored). */
engram_gpu_pick_t engram_gpu_path_decide(const engram_gpu_path_ask_t *ask, const engram_gpu_probe_t *probe,
                                         engram_gpu_path_report_t *r);

/* One line saying what r chose for node_bytes and why, with the rates
 * compared where there were some (the info log's and tools' wording). */
void engram_gpu_path_explain(const engram_gpu_path_report_t *r, uint64_t node_bytes, char *buf, size_t len);

#endif
