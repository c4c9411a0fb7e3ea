/* gpu_sms = auto: the fetch kernel's SM budget, chosen when a GPU table is
 * created by timing the real gather kernel over this node's mapped shards
 * (random rows of the table's shape, up to CAL_MAX_ROWS of them) at every
 * SM, then at growing budgets 1, 2, 3, 4, 6, 8, 12, 16, 24, ... until one
 * reaches ENGRAM_GPU_SMS_SHARE of the all-SM rate: the fewest SMs that
 * leave the rest of the GPU to compute for (nearly) the whole fetch rate.
 * Bounded in time (a budget not reached within the bound keeps every SM);
 * logged once per table at info. */
#ifndef ENGRAM_GPU_GPU_SMS_H
#define ENGRAM_GPU_GPU_SMS_H

#include "engram/gpu/gpu_state.h"

#define ENGRAM_GPU_SMS_SHARE 0.9

/* Local. Sets g->blocks in [1, sms] timing the kernel over `span` (the
 * uva path's shard of routed peer first_peer, mapped); on a CUDA error
 * returns it, leaving g->blocks = sms. */
engram_status_t engram_gpu_sms_calibrate(engram_table_t *t, engram_gpu_table_t *g, const char *span, int sms);

/* Rows per millisecond of the gather kernel launched with `a` at `blocks`
 * SMs on `stream`: the best of a few timings (start/stop time them). */
cudaError_t engram_gpu_gather_rate(const engram_gpu_gather_args_t *a, int blocks, cudaStream_t stream,
                                   cudaEvent_t start, cudaEvent_t stop, double *rate);

#endif
