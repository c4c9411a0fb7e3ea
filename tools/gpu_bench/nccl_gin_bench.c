/* nccl_gin issue and wait times: 2 emulated nodes (own NCCL_HOSTID each) of
 * 1 rank by default, or of `local` ranks, direct or hybrid mode, table in
 * host-NUMA memory; every rank fetches DeepEP's decode shape (512 tokens x
 * 24 rows of 256 bytes) of rows owned by the other node's ranks only, so
 * every row crosses GIN. Per fetch, CUDA events on the fetch's stream time
 *   issue: engram_fetch_on_stream's kernels (issue + local gather),
 *   wait:  from there to the end of the launcher's wait kernel,
 * and the medians over the timed fetches are printed (rank 0) and, with a
 * path argument, appended there as one JSON line. Needs NCCL's GIN (on a
 * host without a GIN NIC: the RMA plugin, transports/nccl_gin/README.md)
 * and one GPU per rank, or GPUs shared (NCCL_MULTI_RANK_GPU_ENABLE=1, set
 * here when there are fewer GPUs than ranks).
 * Usage: nccl_gin_bench [json_path [tokens [entries_per_rank [local [direct|hybrid]]]]]
 * ("" for no JSON; local: ranks per node, 1 by default, 2 nodes always) */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/engram.h"
#include "tests/table_gen.h"
#include "tools/gpu_bench/gpu_check.h"
#include "tools/num_flag.h"

#define ROW_BYTES 256u
#define EPT 24u
#define WARMUP 5
#define TIMED 30 /* few: proxy mode moves each get under a host thread, so each fetch is slow */
#define DEADLINE_S 90 /* a rank with no result by then gives up (a stuck GIN kernel would hold the GPU tier) */
#define MAX_LOCAL 8   /* ranks per node */

/* The shape: DeepEP's decode shape over 256 MiB of rows per rank, 2 nodes
 * of one rank, direct mode, unless argv says otherwise. */
static uint32_t TOKENS = 512, EPR = 1u << 20, LOCAL = 1;
static bool HYBRID;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_float);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Rows of the other node's ranks only, uniform. */
static void make_indices(int rank, uint64_t seed, int64_t *out)
{
    const uint64_t node_rows = (uint64_t)LOCAL * EPR;
    const int other = 1 - rank / (int)LOCAL;
    table_gen_indices(2 * node_rows, TABLE_GEN_UNIFORM, seed, rank, 0, (uint64_t)TOKENS * EPT, out);
    for (uint64_t i = 0; i < (uint64_t)TOKENS * EPT; i++)
        out[i] = (int64_t)((uint64_t)out[i] % node_rows + (uint64_t)other * node_rows);
}

static void give_up(int sig)
{
    (void)sig;
    static const char msg[] = "nccl_gin_bench: no result within the deadline; giving up\n";
    (void)write(2, msg, sizeof(msg) - 1);
    _exit(1);
}

static int rank_main(engram_group_t *g, void *arg)
{
    const char *json = arg;
    signal(SIGALRM, give_up);
    alarm(DEADLINE_S);
    int rank = engram_group_rank(g), devices = 0;
    CK(cudaGetDeviceCount(&devices));
    CK(cudaSetDevice(rank % devices));
    if (devices < engram_group_size(g))
        setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0); /* NCCL refuses ranks sharing a GPU otherwise */
    char hostid[32];
    snprintf(hostid, sizeof(hostid), "engram-node-%d", rank / (int)LOCAL);
    setenv("NCCL_HOSTID", hostid, 1);
    engram_config_t *cfg;
    CK(engram_config_create(&cfg));
    CK(engram_config_set(cfg, "transport", "nccl_gin"));
    CK(engram_config_set(cfg, "mode", HYBRID ? "hybrid" : "direct"));
    engram_context_t *ctx;
    CK(engram_context_create(cfg, g, &ctx));
    fprintf(stderr, "nccl_gin_bench: rank %d: context on GPU %d\n", rank, rank % devices);
    engram_config_destroy(cfg);
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = EPR, .row_bytes = ROW_BYTES,
                               .entries_per_token = EPT, .max_tokens = TOKENS, .recv = ENGRAM_RECV_CUDA};
    engram_table_t *t;
    CK(engram_table_create(ctx, &p, &t));
    uint8_t *rows = malloc((size_t)EPR * ROW_BYTES);
    for (uint32_t i = 0; i < EPR; i++)
        table_gen_row((uint64_t)rank * EPR + i, ROW_BYTES, rows + (size_t)i * ROW_BYTES);
    CK(engram_write(t, rows, ROW_BYTES, NULL));
    free(rows);
    fprintf(stderr, "nccl_gin_bench: rank %d: table attached and written\n", rank);

    enum { SETS = 8 };
    size_t n = (size_t)TOKENS * EPT;
    int64_t *idx = malloc(SETS * n * sizeof(int64_t)), *d_idx;
    CK(cudaMalloc((void **)&d_idx, SETS * n * sizeof(int64_t)));
    for (int s = 0; s < SETS; s++)
        make_indices(rank, 1000 + (uint64_t)s, idx + s * n);
    CK(cudaMemcpy(d_idx, idx, SETS * n * sizeof(int64_t), cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize()); /* a copy from pageable memory may still be landing */
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t ev[3];
    for (int i = 0; i < 3; i++)
        CK(cudaEventCreate(&ev[i]));
    float issue_ms[TIMED], wait_ms[TIMED];
    for (int it = 0; it < WARMUP + TIMED; it++) {
        int s = it % SETS;
        engram_fetch_t *f;
        CK(cudaEventRecord(ev[0], st));
        CK(engram_fetch_on_stream(t, d_idx + s * n, TOKENS, 0, st, &f));
        CK(cudaEventRecord(ev[1], st));
        if (it == 0)
            fprintf(stderr, "nccl_gin_bench: rank %d: first fetch issued\n", rank);
        engram_status_t ts = engram_test(f); /* queues the launcher's wait */
        if (ts != ENGRAM_OK && ts != ENGRAM_INPROGRESS)
            bench_gpu_fail("engram_test", ts);
        CK(cudaEventRecord(ev[2], st));
        const void *d_rows;
        CK(engram_wait(f, &d_rows, NULL));
        CK(cudaEventSynchronize(ev[2]));
        if (it == 0 && !bench_gpu_rows_match(idx + s * n, n, ROW_BYTES, d_rows))
            bench_gpu_fail("comparing the fetched rows with the reference", 1);
        if (it == 0)
            fprintf(stderr, "nccl_gin_bench: rank %d: first fetch complete and correct\n", rank);
        engram_fetch_release(f);
        if (it >= WARMUP) {
            CK(cudaEventElapsedTime(&issue_ms[it - WARMUP], ev[0], ev[1]));
            CK(cudaEventElapsedTime(&wait_ms[it - WARMUP], ev[1], ev[2]));
        }
    }
    float mi = median(issue_ms, TIMED), mw = median(wait_ms, TIMED);
    double gbps = (double)n * ROW_BYTES / ((mi + mw) * 1e-3) / 1e9;
    if (rank == 0) {
        printf("nccl_gin_bench: 2 nodes x %u ranks, %s, %u tokens x %u rows x %u B, all rows of the other node: "
               "issue %.1f us, wait %.1f us (medians of %d), %.2f GB/s\n",
               LOCAL, HYBRID ? "hybrid" : "direct", TOKENS, EPT, ROW_BYTES, mi * 1e3, mw * 1e3, TIMED, gbps);
        if (json) {
            FILE *fp = fopen(json, "a");
            if (fp) {
                fprintf(fp, "{\"bench\":\"nccl_gin\",\"nodes\":2,\"local\":%u,\"mode\":\"%s\",\"tokens\":%u,"
                            "\"ept\":%u,\"row_bytes\":%u,\"issue_us\":%.2f,\"wait_us\":%.2f,\"gbps\":%.3f,"
                            "\"fetches\":%d}\n",
                        LOCAL, HYBRID ? "hybrid" : "direct", TOKENS, EPT, ROW_BYTES, mi * 1e3, mw * 1e3, gbps, TIMED);
                fclose(fp);
            }
        }
    }
    for (int i = 0; i < 3; i++)
        cudaEventDestroy(ev[i]);
    cudaStreamDestroy(st);
    cudaFree(d_idx);
    free(idx);
    CK(engram_table_destroy(t));
    CK(engram_context_destroy(ctx));
    return 0;
}

int main(int argc, char **argv)
{
    /* NCCL reports on stdout: lines must survive a rank that is killed */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Before any CUDA call: the RMA plugin's copies need hardware queues of
     * their own (rma_plugin/README.md). */
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    if (argc > 6 || (argc > 5 && strcmp(argv[5], "direct") != 0 && strcmp(argv[5], "hybrid") != 0)) {
        fprintf(stderr, "usage: nccl_gin_bench [json_path [tokens [entries_per_rank [local [direct|hybrid]]]]]\n");
        return 2;
    }
    if (argc > 2)
        TOKENS = (uint32_t)num_flag("nccl_gin_bench", "tokens", argv[2], 1, UINT32_MAX);
    if (argc > 3)
        EPR = (uint32_t)num_flag("nccl_gin_bench", "entries_per_rank", argv[3], 1, UINT32_MAX);
    if (argc > 4)
        LOCAL = (uint32_t)num_flag("nccl_gin_bench", "local", argv[4], 1, MAX_LOCAL);
    HYBRID = argc > 5 && strcmp(argv[5], "hybrid") == 0;
    int codes[2 * MAX_LOCAL] = {0};
    const int ranks = 2 * (int)LOCAL;
    engram_status_t st =
        engram_group_fork_run(ranks, (int)LOCAL, rank_main, argc > 1 && argv[1][0] ? argv[1] : NULL, codes);
    if (st != ENGRAM_OK) {
        fprintf(stderr, "nccl_gin_bench: failed (%s), rank exit codes", engram_status_str(st));
        for (int r = 0; r < ranks; r++)
            fprintf(stderr, " %d", codes[r]);
        fprintf(stderr, "\n");
        return 1;
    }
    return 0;
}
