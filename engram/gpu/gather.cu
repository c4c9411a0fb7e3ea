// The GPU fetch: route every row with engram/routing.h (the host path's own
// header) and copy it straight out of the mapped shards. Each thread keeps
// UNROLL independent vector loads in flight before its first store, so a few
// SMs hide the latency of reads across PCIe or NVLink.
#include <cuda_runtime.h>

#include "engram/gpu/gather.h"

namespace {

constexpr int kThreads = 1024;
constexpr int kUnroll = 4;

template <typename V>
__device__ __forceinline__ V load_row_vec(const V *p)
{
    return __ldg(p);
}

template <typename V>
__global__ void __launch_bounds__(kThreads, 1) gather_rows(const engram_gpu_gather_args_t a, int vpr_log2)
{
    __shared__ unsigned long long bad_count, bad_first;
    if (threadIdx.x == 0) {
        bad_count = 0;
        bad_first = ~0ull;
    }
    __syncthreads();
    const uint32_t vpr = a.row_bytes / sizeof(V);
    const uint64_t total = (uint64_t)a.num_rows * vpr;
    const uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    V *out = reinterpret_cast<V *>(a.rows);
    for (uint64_t base = tid; base < total; base += nthreads * kUnroll) {
        V v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            const uint64_t c = base + u * nthreads;
            v[u] = V{};
            if (c >= total)
                continue;
            const uint32_t row = vpr_log2 >= 0 ? (uint32_t)(c >> vpr_log2) : (uint32_t)(c / vpr);
            const uint32_t j = (uint32_t)(c - (uint64_t)row * vpr);
            engram_route_t r;
            if (engram_route_index(&a.shape, a.indices[row], &r)) {
                const char *src = a.span + (uint64_t)(r.peer - a.first_peer) * a.peer_stride + r.src_off;
                v[u] = load_row_vec(reinterpret_cast<const V *>(src) + j);
            } else if (j == 0) {
                atomicAdd(&bad_count, 1ull);
                atomicMin(&bad_first, (unsigned long long)row);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            const uint64_t c = base + u * nthreads;
            if (c < total)
                out[c] = v[u];
        }
    }
    // Scales come from the replicated table in this GPU's memory.
    const uint64_t nsf = (uint64_t)a.num_rows * a.packs;
    const uint32_t col_stride = engram_sf_col_stride(a.num_tokens);
    for (uint64_t i = tid; i < nsf; i += nthreads) {
        const uint32_t row = (uint32_t)(i / a.packs), k = (uint32_t)(i - (uint64_t)row * a.packs);
        const int64_t idx = a.indices[row];
        engram_route_t r;
        const uint32_t v = engram_route_index(&a.shape, idx, &r) ? a.scales[(uint64_t)idx * a.packs + k] : 0u;
        if (a.col_major) {
            const uint32_t tok = row / a.entries_per_token, e = row - tok * a.entries_per_token;
            a.sf[(uint64_t)(e * a.packs + k) * col_stride + tok] = v;
        } else {
            a.sf[i] = v;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        a.bad[blockIdx.x].count = bad_count;
        a.bad[blockIdx.x].first_row = bad_first;
    }
}

template <typename V>
cudaError_t launch(const engram_gpu_gather_args_t *a, int blocks, cudaStream_t s)
{
    const uint32_t vpr = a->row_bytes / sizeof(V);
    gather_rows<V><<<blocks, kThreads, 0, s>>>(*a, engram_route_log2(vpr));
    return cudaGetLastError();
}

}  // namespace

extern "C" int engram_gpu_gather_launch(const engram_gpu_gather_args_t *a, int blocks, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    // The widest vector that divides a row: shard rows sit at a 32-byte
    // stride and received rows at multiples of row_bytes, so it is aligned.
    if (a->row_bytes % 16 == 0)
        return launch<uint4>(a, blocks, s);
    if (a->row_bytes % 8 == 0)
        return launch<uint2>(a, blocks, s);
    if (a->row_bytes % 4 == 0)
        return launch<unsigned int>(a, blocks, s);
    return launch<unsigned char>(a, blocks, s);
}
