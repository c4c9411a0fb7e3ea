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
/* Local: copies rows [first, first + n) of this rank's shard from rows;
 * returns once rows may be reused. */
engram_status_t engram_gpu_table_write_rows(engram_table_t *t, uint64_t first, uint64_t n, const void *rows);
/* Local, closing a write: the scales (NULL without them) where fetches
 * read them; returns once every copy of the write is complete. */
engram_status_t engram_gpu_table_write_end(engram_table_t *t, const uint32_t *scales);
void engram_gpu_table_destroy(engram_table_t *t);
/* The path a GPU table's rows take ("uva" or "host_gather"), its pool's
 * threads (0 on uva) and the rows its hot-row cache holds, for
 * engram_table_stats. */
const char *engram_gpu_table_path(const engram_table_t *t, int *gather_threads, uint64_t *cache_rows);
/* Local, after a write's closing barrier (every local shard current):
 * the hot-row cache, if any, reloaded from the shards. */
engram_status_t engram_gpu_table_after_write(engram_table_t *t);
/* The shard's rows in host memory that plain stores write (host_gather
 * tables), or NULL (the UVA layout's shards are written through CUDA). */
char *engram_gpu_table_host_rows(const engram_table_t *t);
/* engram_table_cache_rows past its checks (table_cache.c): rows[n], n >= 0,
 * of a written, idle recv=CUDA table. */
engram_status_t engram_gpu_cache_set(engram_table_t *t, const int64_t *rows, uint64_t n);
/* A captured fetch's last replay's bad indices (count, first row) where
 * its table's local path tallies them per replay (host_gather): true;
 * false where none does (then nothing is set). */
bool engram_gpu_replay_bad(const engram_fetch_slot_t *f, uint64_t *count, uint64_t *first_row);
/* engram_test for a fetch of a GPU table. */
engram_status_t engram_gpu_fetch_test(engram_fetch_slot_t *f);
/* What work queued on a GPU fetch's stream after this call needs to see
 * its rows: the waits still pending (a launcher's, or host_gather's join
 * with ENGRAM_FETCH_ORDER_AT_WAIT), queued now if not yet (the first
 * engram_test, engram_wait, engram_fetch_buffers or
 * engram_fetch_release_ordered queues them; fetch_path.h). A failure to
 * queue them becomes the fetch's status. */
engram_status_t engram_gpu_fetch_order(engram_fetch_slot_t *f);
/* A GPU fetch's slot is free again (released complete, or a retired
 * slot reclaimed): its report entry goes back, and the fetches released
 * in stream order before it in the slot are complete too. */
void engram_gpu_fetch_end(engram_fetch_slot_t *f);
/* Folds the fetches released in stream order that are now complete
 * (their slots free again once their chains are); returns how many are
 * still running. */
uint32_t engram_gpu_released_running(engram_table_t *t);
/* engram_fetch_release_ordered and engram_table_poll_released past their
 * checks (fetch_release_ordered.c): f and t of recv=CUDA tables. */
engram_status_t engram_gpu_release_ordered(engram_fetch_slot_t *f, uint64_t cookie);
engram_status_t engram_gpu_poll_released(engram_table_t *t, engram_fetch_completion_t *out, uint32_t max, int wait,
                                         uint32_t *n, uint32_t *pending);

#endif
