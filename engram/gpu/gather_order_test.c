/* Stream order holds for the GPU fetch although its kernel is launched with
 * programmatic dependent launch: indices written on the stream by a kernel
 * that releases its dependents early and writes late are the ones fetched.
 * 1 rank, 1 GPU; tables in host-NUMA and device memory. Needs a GPU (tagged
 * gpu). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "engram/gpu/delayed_copy.h"
#include "tests/check.h"
#include "tests/engram_harness.h"

#define TOKENS 64u
#define EPT 4u
#define ROUNDS 8
#define CUDA_CHECK(expr) CHECK((expr) == cudaSuccess)

static void check_order(const char *gpu_table)
{
    setenv("ENGRAM_GPU_TABLE", gpu_table, 1);
    engram_group_t *g;
    CHECK_OK(engram_group_solo_create(&g));
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = 4096, .row_bytes = 256,
                               .entries_per_token = EPT, .max_tokens = TOKENS, .recv = ENGRAM_RECV_CUDA};
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &p));
    CHECK_OK(harness_write(&h));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const uint32_t n = TOKENS * EPT;
    int64_t stale[TOKENS * EPT], fresh[TOKENS * EPT], *d_idx, *d_fresh;
    CUDA_CHECK(cudaMalloc((void **)&d_idx, sizeof(stale)));
    CUDA_CHECK(cudaMalloc((void **)&d_fresh, sizeof(fresh)));
    uint8_t *rows = malloc((size_t)n * p.row_bytes);
    for (int round = 0; round < ROUNDS; round++) {
        for (uint32_t i = 0; i < n; i++) {
            stale[i] = (int64_t)((i * 7u + (unsigned)round) % p.entries_per_rank);
            fresh[i] = (int64_t)((i * 13u + 1000u + (unsigned)round) % p.entries_per_rank);
        }
        CUDA_CHECK(cudaMemcpy(d_idx, stale, sizeof(stale), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_fresh, fresh, sizeof(fresh), cudaMemcpyHostToDevice));
        /* ~100 us at H200 clocks: far longer than a launch */
        CUDA_CHECK((cudaError_t)engram_test_delayed_copy_launch(d_idx, d_fresh, n, 200000, s));
        engram_fetch_t *f;
        CHECK_OK(engram_fetch_on_stream(h.table, d_idx, TOKENS, 0, s, &f));
        const void *d_rows;
        CHECK_OK(engram_wait(f, &d_rows, NULL));
        CUDA_CHECK(cudaMemcpy(rows, d_rows, (size_t)n * p.row_bytes, cudaMemcpyDeviceToHost));
        CHECK(harness_check(&h, fresh, TOKENS, false, rows, NULL));
        engram_fetch_release(f);
    }
    free(rows);
    CUDA_CHECK(cudaFree(d_idx));
    CUDA_CHECK(cudaFree(d_fresh));
    CUDA_CHECK(cudaStreamDestroy(s));
    harness_close(&h);
    engram_group_destroy(g);
}

int main(void)
{
    check_order("host_numa");
    check_order("device");
    printf("gather_order_test: ok\n");
    return 0;
}
