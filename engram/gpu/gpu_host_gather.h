/* GPU tables on the host-gather path (gpu_path=host_gather; pool and
 * stream steps in host_gather.h): the shards are host segments (memfd,
 * NUMA-local, 2 MiB pages where the host has them) mapped back to back
 * into every local rank, and each rank's pool gathers its fetches' rows
 * from that span into pinned staging that the copy engine moves onto the
 * GPU receive slot. The fetch kernel never runs: no SM is used. */
#ifndef ENGRAM_GPU_GPU_HOST_GATHER_H
#define ENGRAM_GPU_GPU_HOST_GATHER_H

#include "engram/gpu/gpu_state.h"
#include "engram/gpu/host_gather.h"

/* CUDA's stream operations, for the pool's jobs (gpu_host_gather_stream.c). */
extern const engram_gather_stream_ops_t engram_gpu_cuda_stream_ops;
const char *engram_gpu_cuda_wait_geq(void *stream, const void *flag_dev, uint32_t value);

/* Why a table of this context cannot take the path (NULL: it can): rows
 * of other nodes and GPU-initiated transports stay on the UVA layout. */
const char *engram_gpu_host_gather_unsupported(const engram_context_t *ctx);
/* The shard as a host segment (before the table's shape is filled). */
engram_status_t engram_gpu_host_gather_alloc_shard(engram_table_t *t, engram_gpu_table_t *g);
/* Collective (the status is agreed): the node span, the pool, each slot's
 * staging and job. On failure the caller releases with ..._destroy. */
engram_status_t engram_gpu_host_gather_create(engram_table_t *t, engram_gpu_table_t *g);
/* Waits for the slots' last fetches, lets abandoned ones pass, stops the
 * pool and frees what create took, whatever it got to. */
void engram_gpu_host_gather_destroy(engram_table_t *t, engram_gpu_table_t *g);
/* Rows [first, first + n) of this rank's shard; the replicated scales
 * into the pool's copy. */
engram_status_t engram_gpu_host_gather_write_rows(engram_table_t *t, uint64_t first, uint64_t n, const void *rows);
engram_status_t engram_gpu_host_gather_write_scales(engram_table_t *t, const uint32_t *scales);
/* n rows of row_bytes from src (host or GPU memory) into host memory at
 * dst, `stride` bytes apart: the host shards' writes (this path's and the
 * host mirror of gpu_remote.h). */
engram_status_t engram_gpu_rows_to_host(char *dst, uint64_t stride, const void *src, uint32_t row_bytes, uint64_t n);
/* Rows rows[n] of this node (checked) into GPU memory dst[n][row_bytes],
 * through a pinned bounce buffer: the hot-row cache's load. */
engram_status_t engram_gpu_host_gather_copy_rows(engram_table_t *t, const int64_t *rows, uint64_t n, char *dst);
/* Queues slot's fetch on stream (indices anywhere the stream can copy
 * from) and the slot's copy stream; the fetch is joined later
 * (engram_gpu_host_gather_join), which leaves the stream free for the next
 * fetch meanwhile. */
engram_status_t engram_gpu_host_gather_fetch(engram_fetch_slot_t *f, int slot, const int64_t *indices, void *stream);
/* Queues on stream a wait for slot's last fetch's copies. */
engram_status_t engram_gpu_host_gather_join(engram_gpu_table_t *g, int slot, void *stream);
/* After the slot's event (recorded behind the join): ENGRAM_INPROGRESS until the pool is done with
 * it, then the bad-index tally folded into f. */
engram_status_t engram_gpu_host_gather_test(engram_fetch_slot_t *f, int slot);
/* The pool's size and the shard's backing, for logs and counters. */
int engram_gpu_host_gather_threads(const engram_gpu_table_t *g);

#endif
