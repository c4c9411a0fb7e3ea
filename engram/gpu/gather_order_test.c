/* Stream order holds for the GPU fetch although its kernel is launched with
 * programmatic dependent launch and loads its first rows before it waits
 * (from indices it then checks): indices written on the stream by a kernel
 * that releases its dependents early and writes late are the ones fetched,
 * and only their bad indices are counted (odd rounds put bad indices among
 * the stale ones and, elsewhere, among the fresh). Two shapes: 256-byte
 * rows on gpu_sms=auto, and 30-byte rows with scales (byte-wide loads,
 * row-major and column-major) on one SM, where each thread speculates
 * across rows and steps and the bad indices lie only in the later steps;
 * and 12 MiB fetches of 256-byte rows on 8 SMs with dedup on (a fetch
 * that releases the next launch at its start, gather.cu), the bad indices
 * only in the later half.
 * 1 rank, 1 GPU; tables in host-NUMA and device memory. Needs a GPU
 * (tagged gpu). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "engram/gpu/delayed_copy.h"
#include "tests/check.h"
#include "tests/engram_harness.h"

#define EPT 4u
#define ROUNDS 8
#define CUDA_CHECK(expr) CHECK((expr) == cudaSuccess)

typedef struct shape {
    const char *gpu_sms;
    uint32_t tokens, row_bytes, packs;
    bool bad_late_only; /* bad indices only in the last half of the rows */
    const char *dedup;
} shape_t;

static void check_order(const char *gpu_table, const shape_t *sh)
{
    setenv("ENGRAM_GPU_TABLE", gpu_table, 1);
    setenv("ENGRAM_GPU_SMS", sh->gpu_sms, 1);
    setenv("ENGRAM_DEDUP", sh->dedup, 1);
    engram_group_t *g;
    CHECK_OK(engram_group_solo_create(&g));
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = 4096, .row_bytes = sh->row_bytes,
                               .entries_per_token = EPT, .max_tokens = sh->tokens, .scale_packs = sh->packs,
                               .recv = ENGRAM_RECV_CUDA};
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &p));
    CHECK_OK(harness_write(&h));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const uint32_t n = sh->tokens * EPT;
    int64_t *stale = malloc(n * sizeof(int64_t)), *fresh = malloc(n * sizeof(int64_t)), *d_idx, *d_fresh;
    CHECK(stale != NULL && fresh != NULL);
    CUDA_CHECK(cudaMalloc((void **)&d_idx, n * sizeof(int64_t)));
    CUDA_CHECK(cudaMalloc((void **)&d_fresh, n * sizeof(int64_t)));
    const size_t scale_elems = (size_t)EPT * sh->packs * ((sh->tokens + 3) & ~3u);
    uint8_t *rows = malloc((size_t)n * p.row_bytes);
    uint32_t *scales = malloc(scale_elems * sizeof(uint32_t) + 4);
    for (int round = 0; round < ROUNDS; round++) {
        const bool col_major = round % 4 == 3;
        uint64_t want_bad = 0;
        uint32_t want_first = UINT32_MAX;
        for (uint32_t i = 0; i < n; i++) {
            stale[i] = (int64_t)((i * 7u + (unsigned)round) % p.entries_per_rank);
            fresh[i] = (int64_t)((i * 13u + 1000u + (unsigned)round) % p.entries_per_rank);
            if (round % 2 == 1 && i % 29 == 3)
                stale[i] = i % 2 ? -1 : (int64_t)p.entries_per_rank + i;
            if (round % 2 == 1 && i % 37 == 5 && (!sh->bad_late_only || i >= n / 2)) {
                fresh[i] = i % 2 ? (int64_t)p.entries_per_rank : INT64_MIN;
                want_bad++;
                if (want_first == UINT32_MAX)
                    want_first = i;
            }
        }
        CUDA_CHECK(cudaMemcpy(d_idx, stale, n * sizeof(int64_t), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_fresh, fresh, n * sizeof(int64_t), cudaMemcpyHostToDevice));
        /* 200000 cycles: far longer than a launch at any GPU clock */
        CUDA_CHECK((cudaError_t)engram_test_delayed_copy_launch(d_idx, d_fresh, n, 200000, s));
        engram_fetch_t *f;
        CHECK_OK(engram_fetch_on_stream(h.table, d_idx, sh->tokens, col_major ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0, s,
                                        &f));
        const void *d_rows;
        const uint32_t *d_scales;
        engram_status_t st = engram_wait(f, &d_rows, &d_scales);
        CHECK(st == (want_bad ? ENGRAM_ERR_BAD_INDEX : ENGRAM_OK));
        uint64_t bad;
        uint32_t tok, entry;
        CHECK_OK(engram_fetch_bad_indices(f, &bad, &tok, &entry));
        CHECK(bad == want_bad);
        CHECK(!want_bad || (tok == want_first / EPT && entry == want_first % EPT));
        CUDA_CHECK(cudaMemcpy(rows, d_rows, (size_t)n * p.row_bytes, cudaMemcpyDeviceToHost));
        if (sh->packs)
            CUDA_CHECK(cudaMemcpy(scales, d_scales, scale_elems * sizeof(uint32_t), cudaMemcpyDeviceToHost));
        CHECK(harness_check(&h, fresh, sh->tokens, col_major, rows, scales));
        engram_fetch_release(f);
    }
    free(rows);
    free(scales);
    free(stale);
    free(fresh);
    CUDA_CHECK(cudaFree(d_idx));
    CUDA_CHECK(cudaFree(d_fresh));
    CUDA_CHECK(cudaStreamDestroy(s));
    harness_close(&h);
    engram_group_destroy(g);
}

int main(void)
{
    static const shape_t shapes[] = {
        {"auto", 64, 256, 0, false, "off"},
        /* 1 SM, byte-wide loads: 30 vectors a row, 45 steps per thread */
        {"1", 1536, 30, 2, true, "off"},
        /* 49152 rows of 256 B: 12 MiB, over gather.cu's 8 MiB */
        {"8", 12288, 256, 2, true, "on"},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        check_order("host_numa", &shapes[i]);
        check_order("device", &shapes[i]);
    }
    printf("gather_order_test: ok\n");
    return 0;
}
