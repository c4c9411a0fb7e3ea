/* nccl_gin's launcher on a communicator of one rank: every row is asked of
 * the rank itself over GIN (local_peers 0: none is left to a local
 * gather), so its gets read the rank's own host-NUMA shard through NCCL's
 * GIN (proxy mode over the RMA plugin where no NIC offers GIN). Bit for
 * bit against table_gen, for 256 B and 30 B rows: 1 to 512 tokens of 24
 * rows (the largest spread over several GIN contexts per queue,
 * nccl_gin_plan.h), every queue or half of them, two fetches in flight,
 * the shard's first and last rows; bad indices are skipped (their rows
 * left as they were); bad launcher calls are refused. Needs a GPU (tag
 * gpu) and NCCL_RMA_PLUGIN on a host without a GIN NIC (run_gpu_tier.sh
 * sets it). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/config.h"
#include "engram/plugin/gpu_launcher.h"
#include "hal/group.h"
#include "hal/registry.h"
#include "engram/plugin/routing.h"
#include "memory/cuda_segment.h"
#include "tests/check.h"
#include "tests/table_gen.h"
#include "transports/nccl_gin/nccl_gin.h"

#define CUDA_CHECK(expr) CHECK((expr) == cudaSuccess)

enum { ROWS = 3000, EPT = 24, MAX_TOKENS = 512, SLOTS = 2, QUEUES = 16, FILL = 0xa5 };

typedef struct solo {
    engram_transport_t *t;
    const engram_gpu_launcher_ops_t *launcher;
    engram_gpu_launch_t *launch;
    engram_segment_t *shard, *recv;
    engram_route_shape_t shape;
    uint32_t row_bytes;
    int64_t *d_idx[SLOTS];
    cudaStream_t stream;
} solo_t;

static size_t round_up(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

static engram_segment_t *alloc_seg(const engram_segment_ops_t *ops, size_t bytes)
{
    size_t gran;
    CHECK_OK(engram_cuda_granularity(-1, &gran));
    engram_segment_params_t p = {.size = sizeof(p), .bytes = round_up(bytes, gran), .numa_node = -1,
                                 .huge = ENGRAM_HUGE_AUTO, .device = -1};
    engram_segment_t *seg;
    CHECK_OK(ops->alloc(&p, &seg));
    return seg;
}

/* The shard in host-NUMA memory (written through its CPU mapping), the
 * receive region in GPU memory, both windows and the dev comm. */
static void attach(solo_t *s, uint32_t row_bytes)
{
    s->row_bytes = row_bytes;
    s->shard = alloc_seg(&engram_cuda_host_numa_segment_ops, (size_t)ROWS * row_bytes);
    for (uint64_t i = 0; i < ROWS; i++)
        table_gen_row(i, row_bytes, (uint8_t *)s->shard->addr + i * row_bytes);
    s->recv = alloc_seg(&engram_cuda_device_segment_ops, (size_t)SLOTS * MAX_TOKENS * EPT * row_bytes);
    s->shape = (engram_route_shape_t){.entries_per_rank = ROWS, .total_entries = ROWS, .rank_stride = 0,
                                      .row_stride = row_bytes, .scaleup = 1, .hybrid = 0,
                                      .epr_log2 = engram_route_log2(ROWS)};
    engram_gpu_span_t span = {.size = sizeof(span), .recv = s->recv->addr, .recv_bytes = s->recv->size,
                              .shard = s->shard->addr, .shard_bytes = s->shard->size, .hybrid = 0,
                              .num_slots = SLOTS, .max_rows = MAX_TOKENS * EPT};
    /* the transport was opened direct: a hybrid span is refused */
    span.hybrid = 1;
    CHECK_STATUS(s->launcher->attach(s->t, &span, &s->launch), ENGRAM_ERR_INVALID);
    span.hybrid = 0;
    CHECK_OK(s->launcher->attach(s->t, &span, &s->launch));
}

static void detach(solo_t *s)
{
    s->launcher->detach(s->launch);
    s->recv->ops->free(s->recv);
    s->shard->ops->free(s->shard);
}

/* n indices of the shard, its first and last rows among them, and (bad)
 * a few out of range. */
static void make_indices(uint64_t step, size_t n, bool bad, int64_t *idx)
{
    table_gen_indices(ROWS, TABLE_GEN_UNIFORM, 77, 0, step, n, idx);
    idx[0] = 0;
    idx[n - 1] = ROWS - 1;
    if (bad && n >= 4) {
        idx[1] = -1;
        idx[n / 2] = ROWS;
        idx[n - 2] = INT64_MAX;
    }
}

static void issue(solo_t *s, int slot, const int64_t *idx, uint32_t tokens, int first_queue, int num_queues)
{
    size_t n = (size_t)tokens * EPT, slot_bytes = (size_t)MAX_TOKENS * EPT * s->row_bytes;
    uint8_t *rows = (uint8_t *)s->recv->addr + (size_t)slot * slot_bytes;
    CUDA_CHECK(cudaMemsetAsync(rows, FILL, slot_bytes, s->stream));
    CUDA_CHECK(cudaMemcpyAsync(s->d_idx[slot], idx, n * sizeof(int64_t), cudaMemcpyHostToDevice, s->stream));
    engram_gpu_issue_t f = {.size = sizeof(f), .shape = &s->shape, .indices = s->d_idx[slot], .num_tokens = tokens,
                            .entries_per_token = EPT, .row_bytes = s->row_bytes,
                            .rows_off = (uint64_t)slot * slot_bytes, .first_local_peer = 0, .local_peers = 0,
                            .flush_depth = 16, .first_queue = first_queue, .num_queues = num_queues, .slot = slot};
    CHECK_OK(s->launcher->issue(s->launch, &f, s->stream));
}

/* Waits for slot's gets and compares its rows: table_gen's for good
 * indices, untouched for bad ones. */
static void wait_and_check(solo_t *s, int slot, const int64_t *idx, uint32_t tokens)
{
    CHECK_OK(s->launcher->wait(s->launch, slot, s->stream));
    CUDA_CHECK(cudaStreamSynchronize(s->stream));
    size_t n = (size_t)tokens * EPT, slot_bytes = (size_t)MAX_TOKENS * EPT * s->row_bytes;
    uint8_t *got = malloc(n * s->row_bytes), *want = malloc(s->row_bytes);
    CHECK(got != NULL && want != NULL);
    CUDA_CHECK(cudaMemcpy(got, (uint8_t *)s->recv->addr + (size_t)slot * slot_bytes, n * s->row_bytes,
                          cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        if (idx[i] >= 0 && idx[i] < ROWS)
            table_gen_row((uint64_t)idx[i], s->row_bytes, want);
        else
            memset(want, FILL, s->row_bytes);
        if (memcmp(got + i * s->row_bytes, want, s->row_bytes) != 0 && wrong++ == 0)
            fprintf(stderr, "nccl_gin_solo_test: %u B rows, %u tokens, slot %d: row %zu (index %lld) differs\n",
                    s->row_bytes, tokens, slot, i, (long long)idx[i]);
    }
    free(got);
    free(want);
    CHECK(wrong == 0);
}

static void check_fetches(solo_t *s)
{
    static const uint32_t tokens[] = {1, 7, 96, MAX_TOKENS};
    int64_t *a = malloc((size_t)MAX_TOKENS * EPT * sizeof(int64_t)),
            *b = malloc((size_t)MAX_TOKENS * EPT * sizeof(int64_t));
    CHECK(a != NULL && b != NULL);
    for (size_t k = 0; k < sizeof(tokens) / sizeof(*tokens); k++) {
        uint32_t nt = tokens[k];
        make_indices(k, (size_t)nt * EPT, true, a);
        issue(s, 0, a, nt, 0, QUEUES);
        wait_and_check(s, 0, a, nt);
        /* two in flight, on disjoint halves of the queues */
        make_indices(100 + k, (size_t)nt * EPT, false, b);
        issue(s, 0, a, nt, 0, QUEUES / 2);
        issue(s, 1, b, nt, QUEUES / 2, QUEUES / 2);
        wait_and_check(s, 1, b, nt);
        wait_and_check(s, 0, a, nt);
    }
    free(a);
    free(b);
}

static void check_refusals(solo_t *s)
{
    engram_gpu_issue_t f = {.size = sizeof(f), .shape = &s->shape, .indices = s->d_idx[0], .num_tokens = 1,
                            .entries_per_token = EPT, .row_bytes = s->row_bytes, .first_queue = 0,
                            .num_queues = QUEUES, .slot = SLOTS};
    CHECK_STATUS(s->launcher->issue(s->launch, &f, s->stream), ENGRAM_ERR_INVALID);
    f.slot = 0;
    f.first_queue = 1;
    CHECK_STATUS(s->launcher->issue(s->launch, &f, s->stream), ENGRAM_ERR_INVALID);
    CHECK_STATUS(s->launcher->issue(s->launch, NULL, s->stream), ENGRAM_ERR_INVALID);
    CHECK_STATUS(s->launcher->wait(s->launch, 1, s->stream), ENGRAM_ERR_STATE); /* nothing issued there */
    CHECK_STATUS(s->launcher->wait(s->launch, SLOTS, s->stream), ENGRAM_ERR_STATE);
}

int main(void)
{
    /* before CUDA starts: the RMA plugin's copies need hardware queues of
     * their own (rma_plugin/README.md) */
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    engram_group_t *g;
    CHECK_OK(engram_group_solo_create(&g));
    const char *why = NULL;
    if (!engram_nccl_gin_ops.available(g, &why)) {
        fprintf(stderr, "nccl_gin_solo_test: nccl_gin cannot run here: %s\n", why);
        return 1;
    }
    CUDA_CHECK(cudaSetDevice(0));
    engram_config_t *cfg;
    CHECK_OK(engram_config_create(&cfg));
    solo_t s = {.launcher = engram_nccl_gin_ops.gpu_launcher};
    CHECK_OK(engram_transport_open(&engram_nccl_gin_ops, g, cfg, &s.t));
    engram_transport_caps_t caps;
    engram_nccl_gin_ops.caps(s.t, &caps);
    CHECK(caps.flags & ENGRAM_CAP_GPU_INITIATED);
    CHECK(caps.max_queues == QUEUES);
    char desc[512];
    engram_nccl_gin_ops.describe(s.t, desc, sizeof(desc));
    CHECK(strncmp(desc, "NCCL ", 5) == 0);
    printf("nccl_gin_solo_test: %s%s\n", desc, caps.flags & ENGRAM_CAP_HOST_PROXIED ? " (host-proxied)" : "");
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    for (int i = 0; i < SLOTS; i++)
        CUDA_CHECK(cudaMalloc((void **)&s.d_idx[i], (size_t)MAX_TOKENS * EPT * sizeof(int64_t)));
    static const uint32_t row_bytes[] = {256, 30};
    for (size_t r = 0; r < sizeof(row_bytes) / sizeof(*row_bytes); r++) {
        attach(&s, row_bytes[r]);
        check_refusals(&s);
        check_fetches(&s);
        detach(&s);
        printf("nccl_gin_solo_test: %u B rows ok\n", row_bytes[r]);
    }
    for (int i = 0; i < SLOTS; i++)
        cudaFree(s.d_idx[i]);
    cudaStreamDestroy(s.stream);
    engram_nccl_gin_ops.close(s.t);
    engram_config_destroy(cfg);
    engram_group_destroy(g);
    printf("nccl_gin_solo_test: all passed\n");
    return 0;
}
