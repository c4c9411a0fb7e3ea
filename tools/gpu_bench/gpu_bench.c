/* GPU fetch bench: one rank, table in CUDA host-NUMA memory, uniform random
 * rows; the fetch's GB/s beside a contiguous pinned host-to-device
 * cudaMemcpyAsync of the same bytes measured in the same run, at several
 * SM counts (gpu_sms). Prints a table and, with a path argument, appends
 * one JSON object per line there. Needs a GPU.
 * With --peer (needs 2 GPUs): 2 ranks as one node, one per GPU, tables in
 * GPU memory (gpu_table=device); rank 0 fetches only rows owned by rank 1,
 * read over NVLink, beside cudaMemcpyPeerAsync of the same bytes from GPU 1
 * to GPU 0 measured in the same run.
 * With --indices FILE: the fetches replay a trace (tools/trace/index_trace.h:
 * .npy [steps, tokens, entries_per_token], or raw int64 of 512 x 24 per
 * step) instead of the generated shapes: global indices below 2^20 (2^21
 * with --peer, used as they are), every step checked bit for bit.
 * Usage: engram_gpu_bench [--peer] [--indices FILE] [json_path] */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/engram.h"
#include "tests/table_gen.h"
#include "tools/trace/index_trace.h"
#include "tools/gpu_bench/gpu_check.h"

#define EPR (1u << 20) /* 256 MiB of 256-byte rows: far past the 60 MB L2 */
#define ROW_BYTES 256u
#define EPT 24u /* the generated shapes' entries per token */
#define SLOTS 4


typedef struct shape {
    uint32_t tokens;
    int sets; /* distinct index sets rotated, so rows come from PCIe, not L2 */
    int iters;
} shape_t;

/* What every table of a run fetches: entries_per_token, and the trace
 * replayed instead of generated indices (NULL: generated). */
typedef struct workload {
    const shape_t *shapes;
    int nshapes;
    uint32_t ept;
    const index_trace_t *trace;
} workload_t;

/* Median-free but warm: the best of three timed runs of `iters` items. */
/* The reference copy: host to device, or (peer) GPU 1 to GPU 0. */
typedef struct target {
    bool peer;
    int64_t idx_offset; /* added to every index: the rows' owner */
} target_t;

static void copy_once(const target_t *tg, cudaStream_t s, void *dst, const void *src, size_t bytes)
{
    if (tg->peer)
        CK(cudaMemcpyPeerAsync(dst, 0, src, 1, bytes, s));
    else
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
}

/* What one timed repetition does: issue `iters` items on the stream, then
 * (optional) finish host-side work after the end event is recorded. */
typedef struct timed_work {
    void (*issue)(void *arg, int iters);
    void (*drain)(void *arg);
    void *arg;
} timed_work_t;

/* Seconds per item: the best of three timed repetitions after a warm one,
 * measured with CUDA events on `s`. */
static double time_best(cudaStream_t s, const timed_work_t *w, int iters)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        CK(cudaEventRecord(a, s));
        w->issue(w->arg, iters);
        CK(cudaEventRecord(b, s));
        if (w->drain)
            w->drain(w->arg);
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (rep > 0 && ms < best)
            best = ms;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best / iters * 1e-3;
}

typedef struct copy_work {
    const target_t *tg;
    cudaStream_t s;
    void *dst;
    const void *src;
    size_t bytes;
} copy_work_t;

static void copy_issue(void *arg, int iters)
{
    copy_work_t *c = arg;
    for (int i = 0; i < iters; i++)
        copy_once(c->tg, c->s, c->dst, c->src, c->bytes);
}

static double time_memcpy(const target_t *tg, cudaStream_t s, void *dst, const void *src, size_t bytes, int iters)
{
    copy_work_t c = {tg, s, dst, src, bytes};
    timed_work_t w = {copy_issue, NULL, &c};
    return time_best(s, &w, iters);
}

/* Seconds per fetch, fetch_slots fetches kept in flight on one stream. */
typedef struct fetch_work {
    engram_table_t *t;
    cudaStream_t s;
    int64_t *const *d_idx;
    const shape_t *sh;
    engram_fetch_t *f[SLOTS];
} fetch_work_t;

static void fetch_issue(void *arg, int iters)
{
    fetch_work_t *w = arg;
    for (int i = 0; i < iters; i++) {
        if (w->f[i % SLOTS]) {
            CK(engram_wait(w->f[i % SLOTS], NULL, NULL));
            engram_fetch_release(w->f[i % SLOTS]);
        }
        CK(engram_fetch_on_stream(w->t, w->d_idx[i % w->sh->sets], w->sh->tokens, 0, w->s, &w->f[i % SLOTS]));
    }
}

static void fetch_drain(void *arg)
{
    fetch_work_t *w = arg;
    for (int k = 0; k < SLOTS; k++) {
        if (w->f[k]) {
            CK(engram_wait(w->f[k], NULL, NULL));
            engram_fetch_release(w->f[k]);
            w->f[k] = NULL;
        }
    }
}

static double time_fetch(engram_table_t *t, cudaStream_t s, int64_t *const *d_idx, const shape_t *sh, int iters)
{
    fetch_work_t fw = {.t = t, .s = s, .d_idx = d_idx, .sh = sh};
    timed_work_t w = {fetch_issue, fetch_drain, &fw};
    return time_best(s, &w, iters);
}

/* Index set k of a shape: a trace step as it is, or generated indices of
 * the target's rows. */
static void make_set(const target_t *tg, const workload_t *wl, const shape_t *sh, int k, int64_t *out)
{
    size_t n = (size_t)sh->tokens * wl->ept;
    if (wl->trace) {
        index_trace_step(wl->trace, (uint64_t)k, out);
        return;
    }
    table_gen_indices(EPR, TABLE_GEN_UNIFORM, 1000 + (uint64_t)k, 0, 0, n, out);
    for (size_t r = 0; r < n; r++)
        out[r] += tg->idx_offset;
}

static void run_sms(engram_group_t *g, const target_t *tg, int sms, const workload_t *wl, const uint8_t *rows,
                    FILE *json)
{
    const shape_t *shapes = wl->shapes;
    int nshapes = wl->nshapes;
    uint32_t ept = wl->ept;
    engram_config_t *cfg;
    CK(engram_config_create(&cfg));
    char v[16];
    snprintf(v, sizeof(v), "%d", sms);
    CK(engram_config_set(cfg, "gpu_sms", v));
    CK(engram_config_set(cfg, "transport", "loopback"));
    CK(engram_config_set(cfg, "gpu_table", tg->peer ? "device" : "host_numa"));
    engram_context_t *ctx;
    CK(engram_context_create(cfg, g, &ctx));
    engram_config_destroy(cfg);
    uint32_t max_tokens = 0;
    for (int i = 0; i < nshapes; i++)
        max_tokens = shapes[i].tokens > max_tokens ? shapes[i].tokens : max_tokens;
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = EPR, .row_bytes = ROW_BYTES,
                               .entries_per_token = ept, .max_tokens = max_tokens, .recv = ENGRAM_RECV_CUDA};
    engram_table_t *t;
    CK(engram_table_create(ctx, &p, &t));
    CK(engram_write(t, rows, ROW_BYTES, NULL));
    if (engram_group_rank(g) != 0) { /* the peer only owns rows */
        CK(engram_table_destroy(t));
        CK(engram_context_destroy(ctx));
        return;
    }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int dev_sms = 0;
    CK(cudaDeviceGetAttribute(&dev_sms, cudaDevAttrMultiProcessorCount, engram_group_local_rank(g)));
    int used = sms > 0 && sms < dev_sms ? sms : dev_sms;
    for (int i = 0; i < nshapes; i++) {
        const shape_t *sh = &shapes[i];
        size_t n = (size_t)sh->tokens * ept, bytes = n * ROW_BYTES;
        int64_t **d_idx = calloc((size_t)sh->sets, sizeof(*d_idx));
        int64_t *idx = malloc(n * sizeof(int64_t));
        if (d_idx == NULL || idx == NULL)
            bench_gpu_fail("allocating the index sets", 1);
        /* every set checked bit for bit before any is timed */
        bool ok = true;
        for (int k = 0; k < sh->sets; k++) {
            make_set(tg, wl, sh, k, idx);
            CK(cudaMalloc((void **)&d_idx[k], n * sizeof(int64_t)));
            CK(cudaMemcpy(d_idx[k], idx, n * sizeof(int64_t), cudaMemcpyHostToDevice));
            engram_fetch_t *f;
            const void *d_rows;
            CK(engram_fetch_on_stream(t, d_idx[k], sh->tokens, 0, s, &f));
            CK(engram_wait(f, &d_rows, NULL));
            ok = ok && bench_gpu_rows_match(idx, n, ROW_BYTES, d_rows);
            engram_fetch_release(f);
        }
        double fetch_s = time_fetch(t, s, d_idx, sh, sh->iters);
        void *src, *d_dst;
        if (tg->peer) {
            /* peer access on, or the copy is staged through the host */
            cudaError_t pe = cudaDeviceEnablePeerAccess(1, 0);
            if (pe != cudaSuccess && pe != cudaErrorPeerAccessAlreadyEnabled)
                bench_gpu_fail("cudaDeviceEnablePeerAccess(1)", (int)pe);
            (void)cudaGetLastError();
            CK(cudaSetDevice(1));
            CK(cudaMalloc(&src, bytes));
            CK(cudaMemset(src, 1, bytes));
            CK(cudaSetDevice(0));
        } else {
            CK(cudaMallocHost(&src, bytes));
            memset(src, 1, bytes);
        }
        CK(cudaMalloc(&d_dst, bytes));
        double copy_s = time_memcpy(tg, s, d_dst, src, bytes, sh->iters);
        const char *ref = tg->peer ? "memcpy peer" : "memcpy H2D ";
        double gbps = bytes / fetch_s * 1e-9, copy_gbps = bytes / copy_s * 1e-9;
        printf("%6u tok x %u x %u B %s sms %3d  fetch %7.1f us %6.1f GB/s  %s %7.1f us %6.1f GB/s  "
               "ratio %.3f  check %s\n",
               sh->tokens, ept, ROW_BYTES, wl->trace ? "trace" : "     ", used, fetch_s * 1e6, gbps, ref, copy_s * 1e6, copy_gbps,
               gbps / copy_gbps, ok ? "ok" : "FAILED");
        fflush(stdout);
        if (json)
            fprintf(json,
                    "{\"bench\":\"gpu_fetch\",\"tokens\":%u,\"entries_per_token\":%u,\"row_bytes\":%u,"
                    "\"indices\":\"%s\","
                    "\"table\":\"%s\",\"sms\":%d,\"fetch_us\":%.2f,\"fetch_gbps\":%.2f,"
                    "\"ref\":\"%s\",\"ref_us\":%.2f,\"ref_gbps\":%.2f,\"ratio\":%.4f,\"check_ok\":%s}\n",
                    sh->tokens, ept, ROW_BYTES, wl->trace ? "trace" : "uniform", tg->peer ? "peer_gpu" : "cuda_host_numa", used, fetch_s * 1e6,
                    gbps, tg->peer ? "memcpy_peer" : "memcpy_h2d", copy_s * 1e6, copy_gbps,
                    gbps / copy_gbps, ok ? "true" : "false");
        if (tg->peer)
            cudaFree(src);
        else
            cudaFreeHost(src);
        cudaFree(d_dst);
        for (int k = 0; k < sh->sets; k++)
            cudaFree(d_idx[k]);
        free(d_idx);
        free(idx);
        if (!ok)
            exit(1);
    }
    CK(cudaStreamDestroy(s));
    CK(engram_table_destroy(t));
    CK(engram_context_destroy(ctx));
}

typedef struct run_args {
    const target_t *tg;
    const workload_t *wl;
    FILE *json;
} run_args_t;

static int run_all(engram_group_t *g, void *arg)
{
    const run_args_t *a = arg;
    static const int sms[] = {8, 16, 32, 64, 0};
    int devices = 0;
    if (a->tg->peer && (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2)) {
        fprintf(stderr, "engram_gpu_bench --peer: needs 2 GPUs, found %d\n", devices);
        return 77;
    }
    CK(cudaSetDevice(engram_group_local_rank(g)));
    uint8_t *rows = malloc((size_t)EPR * ROW_BYTES);
    uint64_t first = (uint64_t)engram_group_rank(g) * EPR;
    for (uint64_t i = 0; i < EPR; i++)
        table_gen_row(first + i, ROW_BYTES, rows + i * ROW_BYTES);
    for (size_t k = 0; k < sizeof(sms) / sizeof(sms[0]); k++)
        run_sms(g, a->tg, sms[k], a->wl, rows, a->json);
    free(rows);
    if (a->json)
        fflush(a->json);
    return 0;
}

static _Noreturn void usage(void)
{
    fprintf(stderr, "usage: engram_gpu_bench [--peer] [--indices FILE] [json_path]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bool peer = false;
    const char *path = NULL, *indices = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--peer") == 0)
            peer = true;
        else if (strcmp(argv[i], "--indices") == 0 && i + 1 < argc)
            indices = argv[++i];
        else if (argv[i][0] == '-' || path != NULL)
            usage();
        else
            path = argv[i];
    }
    static const shape_t shapes[] = {{512, 64, 400}, {8192, 8, 40}};
    workload_t wl = {.shapes = shapes, .nshapes = 2, .ept = EPT};
    index_trace_t trace;
    shape_t trace_shape;
    if (indices) {
        /* raw traces take the first generated shape */
        index_trace_want_t want = {.tokens = shapes[0].tokens, .entries_per_token = EPT,
                                   .total_rows = (uint64_t)EPR * (peer ? 2 : 1)};
        char err[512];
        if (index_trace_open(indices, &want, &trace, err, sizeof(err)) != 0) {
            fprintf(stderr, "engram_gpu_bench: %s\n", err);
            return 2;
        }
        if (trace.steps > 4096) {
            fprintf(stderr, "engram_gpu_bench: --indices %s: %llu steps; at most 4096 are kept on the GPU\n", indices,
                    (unsigned long long)trace.steps);
            return 2;
        }
        /* each timed repetition replays every step at least once */
        trace_shape = (shape_t){.tokens = trace.tokens, .sets = (int)trace.steps,
                                .iters = trace.steps > 40 ? (int)trace.steps : 40};
        wl = (workload_t){.shapes = &trace_shape, .nshapes = 1, .ept = trace.entries_per_token, .trace = &trace};
    }
    FILE *json = path ? fopen(path, "a") : NULL;
    if (path && json == NULL) {
        perror(path);
        return 1;
    }
    target_t tg = {.peer = peer, .idx_offset = peer ? EPR : 0};
    run_args_t a = {.tg = &tg, .wl = &wl, .json = json};
    int rc;
    if (peer) {
        /* the ranks initialise CUDA themselves: nothing here touches it before the fork */
        int codes[2] = {0, 0};
        rc = engram_group_fork_run(2, 0, run_all, &a, codes) == ENGRAM_OK ? 0 : codes[0] ? codes[0] : 1;
    } else {
        engram_group_t *g;
        CK(engram_group_solo_create(&g));
        rc = run_all(g, &a);
        engram_group_destroy(g);
    }
    if (json)
        fclose(json);
    if (indices)
        index_trace_close(&trace);
    return rc;
}
