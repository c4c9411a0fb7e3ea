// The GPU fetch: route every row with engram/plugin/routing.h (the host path's own
// header) and copy it straight out of the mapped shards of this node; rows
// owned by other nodes are left to the other-nodes path (the launcher or the
// host transport, fetch_path.h). Each thread keeps kUnroll independent vector
// loads in flight before its first store, so a few SMs hide the latency of
// reads across PCIe or NVLink. The kernel is launched with programmatic
// dependent launch so back-to-back fetches overlap one launch with the
// previous kernel's tail. Outside graph capture it reads its first step's
// indices and rows speculatively, before griddepcontrol.wait, and after the
// wait rechecks the indices and reloads what changed, so stream order is
// kept (gather_order_test). The dependent kernel's blocks are placed while
// its predecessor runs, so a chain of fetches keeps its SMs beside a GEMM
// that would otherwise take each SM a fetch block frees; anything queued
// between the two kernels (an event record) breaks that chain, which is why
// the kernel itself can signal completion (args.seq).
//
// The two row kernels carry the names profilers show (kineto, nsys) and
// DeepEP's engram test times by: engram_fetch_impl is the fetch (this
// node's rows, the scales, the bad-index rule), engram_fetch_wait_impl the
// work of its completion on the GPU (placing the rows of other nodes once
// the host has seen their gets complete).
#include <cuda_runtime.h>

#include "engram/gpu/gather.h"

namespace {

constexpr int kThreads = 1024;
constexpr int kUnroll = 4;
// A fetch of at most this many row bytes releases the next fetch's launch
// at each thread's last step, a longer one at its start (engram_fetch_impl).
constexpr uint64_t kReleaseLateBytes = 8u << 20;

template <typename V>
__device__ __forceinline__ V load_row_vec(const V *p)
{
    return __ldg(p);
}

// The receive row of vector c (vpr vectors a row; shifts when a power of two).
__device__ __forceinline__ uint32_t row_of(uint64_t c, uint32_t vpr, int vpr_log2)
{
    return vpr_log2 >= 0 ? (uint32_t)(c >> vpr_log2) : (uint32_t)(c / vpr);
}

// The row indices of the kUnroll vectors at base + u * nthreads; bit u of
// the result: no row to read there (past the end, or a dedup repeat the
// copy kernel places). Read through L2 only (ld.global.cg): a speculative
// read before griddepcontrol.wait must leave no stale line in L1 for the
// read that checks it.
__device__ __forceinline__ unsigned read_indices(const engram_gpu_gather_args_t &a, uint64_t base, uint64_t nthreads,
                                                 uint64_t total, uint32_t vpr, int vpr_log2, int64_t idx[kUnroll])
{
    unsigned skip = 0;
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
        const uint64_t c = base + u * nthreads;
        idx[u] = 0;
        if (c >= total) {
            skip |= 1u << u;
            continue;
        }
        const uint32_t row = row_of(c, vpr, vpr_log2);
        idx[u] = __ldcg(&a.indices[row]);
        if (a.first != nullptr && __ldcg(&a.first[row]) != row)
            skip |= 1u << u;
    }
    return skip;
}

// One step's loads: for each u in `mask` and not in `skip`, v[u] = the
// row's vector from the hot-row cache or this node's shard (bit u of the
// result: store it) or zeros for a bad index (stored too; bit u of *bad
// when it is the row's first vector, so each bad row is counted once; bit u
// of *hit likewise for a cached row). Vectors of other nodes' rows are
// left alone.
template <typename V>
__device__ __forceinline__ unsigned load_step(const engram_gpu_gather_args_t &a, uint64_t base, uint64_t nthreads,
                                              uint32_t vpr, int vpr_log2, const int64_t idx[kUnroll], unsigned skip,
                                              unsigned mask, V v[kUnroll], unsigned *bad, unsigned *hit)
{
    unsigned keep = 0;
    *bad = 0;
    *hit = 0;
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
        if (!(mask & (1u << u)))
            continue;
        v[u] = V{};
        if (skip & (1u << u))
            continue;
        const uint64_t c = base + u * nthreads;
        const uint32_t row = row_of(c, vpr, vpr_log2);
        const uint32_t j = (uint32_t)(c - (uint64_t)row * vpr);
        const uint32_t slot = engram_hot_find(&a.hot, idx[u]);
        if (slot != ENGRAM_HOT_MISS) {
            v[u] = load_row_vec(reinterpret_cast<const V *>(a.hot_rows + (uint64_t)slot * a.row_bytes) + j);
            keep |= 1u << u;
            if (j == 0)
                *hit |= 1u << u;
            continue;
        }
        engram_route_t r;
        if (engram_route_index(&a.shape, idx[u], &r)) {
            const uint32_t lp = r.peer - a.first_peer;
            if (lp < a.local_peers) { // else the other-nodes path places it
                const char *src = a.span + (uint64_t)lp * a.peer_stride + r.src_off;
                v[u] = load_row_vec(reinterpret_cast<const V *>(src) + j);
                keep |= 1u << u;
            }
        } else {
            keep |= 1u << u;
            if (j == 0)
                *bad |= 1u << u;
        }
    }
    return keep;
}

template <typename V>
__global__ void __launch_bounds__(kThreads, 1) engram_fetch_impl(const engram_gpu_gather_args_t a, int vpr_log2)
{
    __shared__ unsigned long long bad_count, bad_first, hit_count;
    const uint32_t vpr = a.row_bytes / sizeof(V);
    const uint64_t total = (uint64_t)a.num_rows * vpr;
    const uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    V *out = reinterpret_cast<V *>(a.rows);
    const uint64_t step = nthreads * kUnroll;
    int64_t idx[kUnroll] = {};
    V v[kUnroll];
    unsigned skip = 0, keep = 0, bad = 0, hit = 0;
    if (a.speculate) {
        // The first step's rows before the wait below, from indices the
        // work before us may still be writing: the table is not stream
        // work (engram_write synchronizes), so any index that routes reads
        // valid, current rows, and the check after the wait reloads the
        // vectors whose index (or dedup first) changed. The row reads of a
        // fetch queued behind another then fly while that one drains,
        // instead of after it (the gap between back-to-back fetches).
        skip = read_indices(a, tid, nthreads, total, vpr, vpr_log2, idx);
        keep = load_step(a, tid, nthreads, vpr, vpr_log2, idx, skip, ~0u, v, &bad, &hit);
    }
    // Launched with programmatic stream serialization: wait until the work
    // before us on the stream is complete and visible (stream order holds),
    // then let the next fetch's launch start while this one drains. A
    // short fetch (at most kReleaseLateBytes) releases it only at each
    // thread's last step: released at its start, the next fetch's blocks
    // would wait for SMs through most of this one beside the GEMMs, and the
    // fetch reaches less of the copy rate there. A long fetch keeps the
    // early release: released late, a fetch on a few SMs loses much of its
    // rate beside GEMMs while the GEMMs gain nothing (tools/overlap_bench.py
    // measures both; docs/BENCHMARKS.md, "GPU fetch beside GEMMs").
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const bool release_late = (uint64_t)a.num_rows * a.row_bytes <= kReleaseLateBytes;
    if (!release_late)
        asm volatile("griddepcontrol.launch_dependents;");
    if (threadIdx.x == 0) {
        bad_count = 0;
        bad_first = ~0ull;
        hit_count = 0;
    }
    __syncthreads();
    {
        int64_t now[kUnroll];
        const unsigned skip_now = read_indices(a, tid, nthreads, total, vpr, vpr_log2, now);
        unsigned redo = a.speculate ? skip ^ skip_now : ~0u;
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            if (now[u] != idx[u])
                redo |= 1u << u;
            idx[u] = now[u];
        }
        if (redo != 0) {
            unsigned redo_bad, redo_hit;
            const unsigned redo_keep =
                load_step(a, tid, nthreads, vpr, vpr_log2, idx, skip_now, redo, v, &redo_bad, &redo_hit);
            keep = (keep & ~redo) | (redo_keep & redo);
            bad = (bad & ~redo) | (redo_bad & redo);
            hit = (hit & ~redo) | (redo_hit & redo);
        }
        skip = skip_now;
    }
    for (uint64_t base = tid; base < total;) {
#pragma unroll
        for (int u = 0; u < kUnroll; u++)
            if (bad & (1u << u)) {
                atomicAdd(&bad_count, 1ull);
                atomicMin(&bad_first, (unsigned long long)row_of(base + u * nthreads, vpr, vpr_log2));
            }
        if (hit != 0)
            atomicAdd(&hit_count, (unsigned long long)__popc(hit));
        // The next step's indices now, before the stores wait for this
        // step's rows: their read hides under the row reads instead of
        // adding an L2 round trip to every step.
        skip = read_indices(a, base + step, nthreads, total, vpr, vpr_log2, idx);
#pragma unroll
        for (int u = 0; u < kUnroll; u++)
            if (keep & (1u << u))
                out[base + u * nthreads] = v[u];
        base += step;
        if (release_late && base + step >= total)
            asm volatile("griddepcontrol.launch_dependents;");
        if (base < total)
            keep = load_step(a, base, nthreads, vpr, vpr_log2, idx, skip, ~0u, v, &bad, &hit);
    }
    // Scales come from the replicated table in this GPU's memory.
    const uint64_t nscales = (uint64_t)a.num_rows * a.packs;
    const uint64_t col_stride = engram_scales_col_stride(a.num_tokens);
    for (uint64_t i = tid; i < nscales; i += nthreads) {
        const uint32_t row = (uint32_t)(i / a.packs), k = (uint32_t)(i - (uint64_t)row * a.packs);
        const int64_t idx = a.indices[row];
        engram_route_t r;
        const uint32_t v = engram_route_index(&a.shape, idx, &r) ? a.scales[(uint64_t)idx * a.packs + k] : 0u;
        if (a.col_major) {
            const uint32_t tok = row / a.entries_per_token, e = row - tok * a.entries_per_token;
            a.scales_out[((uint64_t)e * a.packs + k) * col_stride + tok] = v;
        } else {
            a.scales_out[i] = v;
        }
    }
    // The barrier makes the block's writes visible to thread 0, whose
    // system-scope fence below orders them (cumulatively) before its seq
    // store: the pattern of cooperative groups' grid sync.
    __syncthreads();
    if (threadIdx.x == 0) {
        engram_gpu_bad_t *report = &a.bad[blockIdx.x];
        report->count = bad_count;
        report->first_row = bad_first;
        report->hits = hit_count;
        if (a.seq != 0) {
            __threadfence_system(); // the block's writes, then the tally, before the host sees seq
            *reinterpret_cast<volatile uint64_t *>(&report->seq) = a.seq;
        }
    }
}

// Staged rows from other nodes to their receive rows; one vector per thread
// per step (these rows are the minority that crossed the host transport).
template <typename V>
__global__ void __launch_bounds__(kThreads, 1)
    engram_fetch_wait_impl(const V *staged, const uint32_t *dst_row, const uint32_t *src, uint32_t count,
                           uint32_t vpr, V *rows)
{
    const uint64_t total = (uint64_t)count * vpr;
    const uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; c < total; c += nthreads) {
        const uint32_t k = (uint32_t)(c / vpr), j = (uint32_t)(c - (uint64_t)k * vpr);
        const uint64_t from = src != nullptr ? (uint64_t)src[k] * vpr + j : c;
        rows[(uint64_t)dst_row[k] * vpr + j] = staged[from];
    }
}

// dedup: one thread per row claims its index's slot with atomicCAS (row + 1;
// 0 = empty). Linear probing without deletions gives every distinct index
// one winner: threads with the same index probe the same slots, and the
// first empty one goes to exactly one of them.
__global__ void __launch_bounds__(kThreads, 1) mark_firsts(const engram_gpu_gather_args_t a, uint32_t *table,
                                                          uint32_t table_log2, uint32_t *first)
{
    const uint32_t mask = (1u << table_log2) - 1;
    for (uint32_t row = blockIdx.x * blockDim.x + threadIdx.x; row < a.num_rows; row += gridDim.x * blockDim.x) {
        const int64_t idx = a.indices[row];
        engram_route_t r;
        uint32_t f = row;
        if (engram_route_index(&a.shape, idx, &r) && r.peer - a.first_peer < a.local_peers) {
            uint32_t h = (uint32_t)(((uint64_t)idx * 0x9e3779b97f4a7c15ull) >> (64 - table_log2));
            for (;; h = (h + 1) & mask) {
                const uint32_t prev = atomicCAS(&table[h], 0u, row + 1);
                if (prev == 0)
                    break;
                if (a.indices[prev - 1] == idx) {
                    f = prev - 1;
                    break;
                }
            }
        }
        first[row] = f;
    }
}

template <typename V>
__global__ void __launch_bounds__(kThreads, 1) copy_repeats(const uint32_t *first, uint32_t num_rows, uint32_t vpr,
                                                           V *rows)
{
    const uint64_t total = (uint64_t)num_rows * vpr;
    const uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; c < total; c += nthreads) {
        const uint32_t row = (uint32_t)(c / vpr), j = (uint32_t)(c - (uint64_t)row * vpr);
        const uint32_t f = first[row];
        if (f != row)
            rows[c] = rows[(uint64_t)f * vpr + j];
    }
}

// host_gather with a cache: each row's cache slot (GPU memory) and a hit
// bit per row (host memory the pool reads once the stream has run this),
// one warp per 32 rows, so each mask word is one store.
__global__ void __launch_bounds__(kThreads, 1) hot_probe(const engram_hot_hash_t hash, const int64_t *indices,
                                                         uint32_t num_rows, uint32_t *slots, uint32_t *hit_mask)
{
    const uint32_t lane = threadIdx.x % 32;
    const uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x - lane; base < num_rows;
         base += nthreads) {
        const uint64_t row = base + lane;
        uint32_t slot = ENGRAM_HOT_MISS;
        if (row < num_rows) {
            slot = engram_hot_find(&hash, indices[row]);
            slots[row] = slot;
        }
        const uint32_t bits = __ballot_sync(0xffffffffu, slot != ENGRAM_HOT_MISS);
        if (lane == 0) {
            hit_mask[base / 32] = bits;
            __threadfence_system(); // the bits before the stream's next write, which starts the pool
        }
    }
}

// host_gather with a cache: the rows the probe found, from the cache.
template <typename V>
__global__ void __launch_bounds__(kThreads, 1) hot_hits(const V *hot_rows, const uint32_t *slots, uint32_t num_rows,
                                                       uint32_t vpr, V *rows)
{
    const uint64_t total = (uint64_t)num_rows * vpr;
    const uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; c < total; c += nthreads) {
        const uint32_t row = (uint32_t)(c / vpr), j = (uint32_t)(c - (uint64_t)row * vpr);
        const uint32_t slot = slots[row];
        if (slot != ENGRAM_HOT_MISS)
            rows[c] = hot_rows[(uint64_t)slot * vpr + j];
    }
}

// A chunk's misses (moved into GPU memory by the copy engine) to their
// receive rows.
template <typename V>
__global__ void __launch_bounds__(kThreads, 1) place_rows(const V *staged, const uint32_t *dst_rows, uint32_t count,
                                                         uint32_t vpr, V *rows)
{
    const uint64_t total = (uint64_t)count * vpr;
    const uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; c < total; c += nthreads) {
        const uint32_t k = (uint32_t)(c / vpr), j = (uint32_t)(c - (uint64_t)k * vpr);
        rows[(uint64_t)dst_rows[k] * vpr + j] = staged[c];
    }
}

// The blocks `work` threads need, `max_blocks` at most.
static int grid_for(uint64_t work, int max_blocks)
{
    const uint64_t need = (work + kThreads - 1) / kThreads;
    return need == 0 ? 1 : (need < (uint64_t)max_blocks ? (int)need : max_blocks);
}

// Calls launch(V{}) with the widest vector that divides a row: shard rows sit
// at a 32-byte stride, received and staged rows at multiples of row_bytes,
// so every row start is aligned to it.
template <typename F>
cudaError_t by_vector(uint32_t row_bytes, F launch)
{
    if (row_bytes % 16 == 0)
        return launch(uint4{});
    if (row_bytes % 8 == 0)
        return launch(uint2{});
    if (row_bytes % 4 == 0)
        return launch(0u);
    return launch((unsigned char)0);
}

}  // namespace

extern "C" int engram_gpu_kernels_load(void)
{
    cudaFuncAttributes attr;
    cudaError_t ce = cudaSuccess;
    for (uint32_t row_bytes : {16u, 8u, 4u, 1u})
        if (ce == cudaSuccess)
            ce = by_vector(row_bytes, [&](auto v) {
                using V = decltype(v);
                cudaError_t e = cudaFuncGetAttributes(&attr, engram_fetch_impl<V>);
                if (e == cudaSuccess)
                    e = cudaFuncGetAttributes(&attr, copy_repeats<V>);
                if (e == cudaSuccess)
                    e = cudaFuncGetAttributes(&attr, hot_hits<V>);
                if (e == cudaSuccess)
                    e = cudaFuncGetAttributes(&attr, place_rows<V>);
                return e == cudaSuccess ? cudaFuncGetAttributes(&attr, engram_fetch_wait_impl<V>) : e;
            });
    if (ce == cudaSuccess)
        ce = cudaFuncGetAttributes(&attr, hot_probe);
    return ce == cudaSuccess ? cudaFuncGetAttributes(&attr, mark_firsts) : ce;
}

extern "C" int engram_gpu_gather_launch(const engram_gpu_gather_args_t *a, int blocks, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    return by_vector(a->row_bytes, [&](auto v) {
        using V = decltype(v);
        const uint32_t vpr = a->row_bytes / sizeof(V);
        // Programmatic dependent launch: back-to-back fetches overlap each
        // launch with the previous kernel's tail instead of paying it
        // between kernels.
        cudaLaunchAttribute attrs[2];
        attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attrs[0].val.programmaticStreamSerializationAllowed = 1;
        // Blocks in clusters of two land on SMs of one GPC in pairs, so a
        // GEMM whose tiles run as 2-SM clusters loses the fetch's SMs and
        // not a broken pair beside each (tools/sm_hold_probe.py measures
        // paired against single).
        attrs[1].id = cudaLaunchAttributeClusterDimension;
        attrs[1].val.clusterDim.x = 2;
        attrs[1].val.clusterDim.y = 1;
        attrs[1].val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)blocks);
        cfg.blockDim = dim3(kThreads);
        cfg.stream = s;
        cfg.attrs = attrs;
        cfg.numAttrs = blocks % 2 == 0 ? 2 : 1;
        if (a->unchained) { // the cluster attribute alone, where there is one
            attrs[0] = attrs[1];
            cfg.numAttrs = blocks % 2 == 0 ? 1 : 0;
        }
        return cudaLaunchKernelEx(&cfg, engram_fetch_impl<V>, *a, engram_route_log2(vpr));
    });
}

extern "C" int engram_gpu_scatter_launch(const char *staged, const uint32_t *dst_row, const uint32_t *src,
                                         uint32_t count, uint32_t row_bytes, char *rows, int blocks, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    return by_vector(row_bytes, [&](auto v) {
        using V = decltype(v);
        engram_fetch_wait_impl<V><<<blocks, kThreads, 0, s>>>(reinterpret_cast<const V *>(staged), dst_row, src,
                                                              count, row_bytes / (uint32_t)sizeof(V),
                                                              reinterpret_cast<V *>(rows));
        return cudaGetLastError();
    });
}

extern "C" int engram_gpu_hot_probe_launch(const engram_hot_hash_t *hash, const int64_t *indices, uint32_t num_rows,
                                           uint32_t *slots, uint32_t *hit_mask, int blocks, void *stream)
{
    hot_probe<<<grid_for(num_rows, blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(*hash, indices, num_rows,
                                                                                             slots, hit_mask);
    return cudaGetLastError();
}

extern "C" int engram_gpu_hot_hits_launch(const char *hot_rows, const uint32_t *slots, uint32_t num_rows,
                                          uint32_t row_bytes, char *rows, int blocks, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    return by_vector(row_bytes, [&](auto v) {
        using V = decltype(v);
        const uint32_t vpr = row_bytes / (uint32_t)sizeof(V);
        hot_hits<V><<<grid_for((uint64_t)num_rows * vpr, blocks), kThreads, 0, s>>>(
            reinterpret_cast<const V *>(hot_rows), slots, num_rows, vpr, reinterpret_cast<V *>(rows));
        return cudaGetLastError();
    });
}

extern "C" int engram_gpu_place_launch(const char *staged, const uint32_t *dst_rows, uint32_t count,
                                       uint32_t row_bytes, char *rows, int blocks, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    return by_vector(row_bytes, [&](auto v) {
        using V = decltype(v);
        const uint32_t vpr = row_bytes / (uint32_t)sizeof(V);
        place_rows<V><<<grid_for((uint64_t)count * vpr, blocks), kThreads, 0, s>>>(
            reinterpret_cast<const V *>(staged), dst_rows, count, vpr, reinterpret_cast<V *>(rows));
        return cudaGetLastError();
    });
}

extern "C" int engram_gpu_dedup_mark_launch(const engram_gpu_gather_args_t *a, uint32_t *table,
                                            uint32_t table_log2, uint32_t *first, int blocks, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t ce = cudaMemsetAsync(table, 0, sizeof(*table) << table_log2, s);
    if (ce != cudaSuccess)
        return ce;
    mark_firsts<<<blocks, kThreads, 0, s>>>(*a, table, table_log2, first);
    return cudaGetLastError();
}

extern "C" int engram_gpu_dedup_copy_launch(const uint32_t *first, uint32_t num_rows, uint32_t row_bytes, char *rows,
                                            int blocks, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    return by_vector(row_bytes, [&](auto v) {
        using V = decltype(v);
        copy_repeats<V><<<blocks, kThreads, 0, s>>>(first, num_rows, row_bytes / (uint32_t)sizeof(V),
                                                    reinterpret_cast<V *>(rows));
        return cudaGetLastError();
    });
}
