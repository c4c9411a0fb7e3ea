/* GPU tables (params.recv == ENGRAM_RECV_CUDA): the hooks the engram layer
 * dispatches to on the table's receive location. A build without CUDA links
 * gpu_none.c, which refuses such tables. */
#ifndef ENGRAM_GPU_GPU_TABLE_H
#define ENGRAM_GPU_GPU_TABLE_H

#include "engram/internal.h"

/* Local validation of recv=CUDA params (part of the collective agreement). */
engram_status_t engram_gpu_table_check(const engram_context_t *ctx, const engram_table_params_t *p);
/* Collective. `st` is this rank's status so far (t is NULL when not OK);
 * agreed first. Allocates the shard (CUDA HOST_NUMA or device segment), the
 * GPU receive slots and scales, shares the shards among the local ranks by
 * fd and maps receive region + every local shard back to back. On failure
 * nothing stays allocated and every rank returns an error. */
engram_status_t engram_gpu_table_create(engram_context_t *ctx, engram_table_t *t, engram_status_t st);
/* Local: copies this rank's rows into its shard and the scales to the GPU;
 * returns once the copies are complete. */
engram_status_t engram_gpu_table_write(engram_table_t *t, const void *rows, const uint32_t *scales);
void engram_gpu_table_destroy(engram_table_t *t);
/* engram_test for a fetch of a GPU table. */
engram_status_t engram_gpu_fetch_test(engram_fetch_slot_t *f);

#endif
