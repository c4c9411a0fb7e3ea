/* GPU tables on more than one node: rows owned by other nodes travel
 * through the context's host-initiated transport (whichever it is) into a
 * host staging region, then onto the GPU receive slot.
 *
 * The transports read and write host (memfd) memory only, so each rank
 * keeps, next to its CUDA shard, a host mirror of it (written with it,
 * registered symmetrically like a host table's shard: per rank, or per node
 * span in hybrid mode; the shard's memory in host RAM is thus held twice),
 * and a staging region [slots][max rows][row_bytes] registered as the
 * transport's local destination and pinned and mapped for the GPU.
 *
 * One fetch (engram_fetch_on_stream):
 *   1. the indices are copied back into pinned host memory on the caller's
 *      stream, and the gather kernel is queued right behind the copy (it
 *      handles this node's rows and the bad indices, skipping the others);
 *   2. the host waits for that copy: fetch_on_stream returns only after the
 *      work queued earlier on the stream has run, plus one device-to-host
 *      copy of 8 bytes per row -- the cost of routing on the host;
 *   3. the host routes every row (hal/routing.h) and issues one get per
 *      row of another node into the slot's staging, compacted, with the
 *      host fetch's flush policy (engram_fetch_get_row, engram_fetch_flush);
 *   4. when engram_test/engram_wait sees the flushes complete, a scatter
 *      kernel is queued on the same stream and the fetch's event recorded
 *      behind it: the rows are complete for the host when wait returns, and
 *      for work the caller queues on the stream after wait. */
#ifndef ENGRAM_GPU_GPU_REMOTE_H
#define ENGRAM_GPU_GPU_REMOTE_H

#include "engram/gpu/gpu_state.h"

/* Collective: the mirror, the staging and their registrations; the status
 * is agreed. On failure the caller releases with engram_gpu_remote_destroy. */
engram_status_t engram_gpu_remote_create(engram_table_t *t, engram_gpu_table_t *g);
/* Releases what create took, whatever it got to. */
void engram_gpu_remote_destroy(engram_table_t *t, engram_gpu_table_t *g);
/* Copies rows [first, first + n) of this rank's shard into the mirror. */
engram_status_t engram_gpu_remote_write_rows(engram_table_t *t, uint64_t first, uint64_t n, const void *rows);
/* Step 1's copy, queued on stream before the kernel (f->num_tokens > 0). */
engram_status_t engram_gpu_remote_copy_indices(engram_fetch_slot_t *f, int slot, const int64_t *indices, void *stream);
/* Steps 2-3. On an error the gets already issued are flushed all the same. */
engram_status_t engram_gpu_remote_issue(engram_fetch_slot_t *f, int slot);
/* Step 4: ENGRAM_INPROGRESS while flushes are pending, then f->status. */
engram_status_t engram_gpu_remote_test(engram_fetch_slot_t *f, int slot);

#endif
