// gpuplug's issue kernel (tests/install/gpuplug.c): what every GPU-initiated
// transport applies per row, from the installed <engram/plugin/routing.h>:
// the row's owner and offset, the bad-index rule (an index out of range
// never becomes an offset: the engram layer zero-fills its row), the rows
// the engram layer loads itself (this node's peers), and the flush policy
// (AGGREGATE on every get but each flush_depth-th per (queue, peer)). One
// block per queue here, its thread 0 posting, so each (queue, peer) counter
// has one writer.
#include <engram/plugin/gpu_launcher.h>
#include <engram/plugin/routing.h>

__global__ void gpuplug_issue_kernel(engram_route_shape_t shape, const int64_t *indices, uint64_t rows,
                                     uint32_t first_local_peer, uint32_t local_peers, uint32_t flush_depth,
                                     uint32_t num_peers, uint32_t *counters /* [queues][num_peers] */)
{
    if (threadIdx.x != 0)
        return;
    uint32_t *mine = counters + (uint64_t)blockIdx.x * num_peers;
    const uint64_t per_queue = (rows + gridDim.x - 1) / gridDim.x;
    const uint64_t end = min(rows, (uint64_t)(blockIdx.x + 1) * per_queue);
    for (uint64_t row = (uint64_t)blockIdx.x * per_queue; row < end; row++) {
        engram_route_t r;
        if (!engram_route_index(&shape, indices[row], &r) || r.peer - first_local_peer < local_peers)
            continue;
        const unsigned flags = engram_flush_next_flags(&mine[r.peer], flush_depth);
        // A real backend posts here: row_bytes from peer r.peer at r.src_off
        // of its shard into recv + rows_off + row * row_bytes, with flags
        // (ENGRAM_ROUTE_AGGREGATE: no doorbell yet).
        (void)flags;
    }
    for (uint32_t p = 0; p < num_peers; p++)
        if (engram_flush_needed(mine[p])) {
            // ... and flushes each peer that received gets.
        }
}
