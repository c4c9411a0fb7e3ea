/* GPU fetch bench: one rank (or --peer's two), uniform (or zipf, or a
 * trace's) random rows; the fetch's GB/s beside a contiguous pinned
 * host-to-device cudaMemcpyAsync of the same bytes measured in the same run,
 * for each path a table's rows take (gpu_path: uva at several SM counts,
 * host_gather once, auto as the table chooses) at a table size of the
 * caller's (--table-gib: production tables are tens of GiB per node). The
 * table is loaded a chunk at a time (engram_write_rows), timed beside a
 * plain memcpy of the same chunks. Prints a table and, with a path
 * argument, appends one JSON object per line there. Needs a GPU.
 * With --peer (needs 2 GPUs): 2 ranks as one node, one per GPU, tables in
 * GPU memory (gpu_table=device); rank 0 fetches only rows owned by rank 1,
 * read over NVLink, beside cudaMemcpyPeerAsync of the same bytes from GPU 1
 * to GPU 0 measured in the same run.
 * With --indices FILE: the fetches replay a trace (tools/trace/index_trace.h:
 * .npy [steps, tokens, entries_per_token], or raw int64 of 512 x 24 per
 * step) instead of the generated shapes: global indices below the table's
 * rows (twice them with --peer, used as they are), every step checked bit
 * for bit. Usage: engram_gpu_bench --help. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engram/engram.h"
#include "tests/table_gen.h"
#include "tools/trace/index_trace.h"
#include "tools/gpu_bench/gpu_check.h"

#define ROW_BYTES 256u
#define SLOTS 4
#define LOAD_CHUNK_ROWS (1u << 18) /* 64 MiB of rows generated and written at a time */
#define MAX_TRACE_STEPS 4096       /* a trace's steps replayed (each one's indices kept on the GPU) */

/* What a run measures (the command line). */
typedef struct bench_opts {
    uint64_t epr;   /* rows per rank: --table-gib (default 256 MiB, far past a GPU's L2) */
    uint32_t packs; /* scale packs per row (--packs: 1 = FP8 rows with their ue8m0 scales) */
    table_gen_dist_t dist;
    const char *paths[3];
    int npaths;
    double cache_pct; /* --cache-pct: the hot-row cache, % of the table's rows (0: none) */
    int sms[8];
    int nsms;
} bench_opts_t;


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
    const bench_opts_t *opts;
} workload_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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
        CK(engram_fetch_on_stream(w->t, w->d_idx[i % w->sh->sets], w->sh->tokens, ENGRAM_FETCH_ORDER_AT_WAIT, w->s,
                                  &w->f[i % SLOTS]));
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
    table_gen_indices(wl->opts->epr, wl->opts->dist, 1000 + (uint64_t)k, 0, 0, n, out);
    for (size_t r = 0; r < n; r++)
        out[r] += tg->idx_offset;
}

/* Loads this rank's shard a chunk at a time (engram_write_rows), then
 * prints the load rate beside a memcpy of the same chunks into a scratch
 * buffer (what any loader pays once per byte). Rank 0 prints. */
static void load_table(engram_group_t *g, engram_table_t *t, const bench_opts_t *o, double gib)
{
    const uint64_t epr = o->epr, chunk = epr < LOAD_CHUNK_ROWS ? epr : LOAD_CHUNK_ROWS;
    uint8_t *buf = malloc(chunk * ROW_BYTES), *scratch = malloc(chunk * ROW_BYTES);
    uint64_t total = epr * (uint64_t)engram_group_size(g);
    uint32_t *sf = o->packs ? malloc(total * o->packs * sizeof(uint32_t)) : NULL;
    if (buf == NULL || scratch == NULL || (o->packs && sf == NULL))
        bench_gpu_fail("allocating the load buffers", 1);
    for (uint64_t i = 0; i < total * o->packs; i++)
        sf[i] = table_gen_scale(i / o->packs, (uint32_t)(i % o->packs));
    const uint64_t first = (uint64_t)engram_group_rank(g) * epr;
    double write_s = 0, copy_s = 0;
    CK(engram_write_begin(t));
    for (uint64_t lo = 0; lo < epr; lo += chunk) {
        uint64_t n = epr - lo < chunk ? epr - lo : chunk;
        for (uint64_t i = 0; i < n; i++)
            table_gen_row(first + lo + i, ROW_BYTES, buf + i * ROW_BYTES);
        double t0 = now_s();
        CK(engram_write_rows(t, lo, n, buf, ROW_BYTES));
        double t1 = now_s();
        memcpy(scratch, buf, n * ROW_BYTES);
        copy_s += now_s() - t1;
        write_s += t1 - t0;
    }
    double t0 = now_s();
    CK(engram_write_end(t, sf));
    write_s += now_s() - t0;
    if (engram_group_rank(g) == 0)
        printf("load %.2f GiB: engram_write_rows %.1f GB/s (%.1f s), memcpy of the same chunks %.1f GB/s, "
               "ratio %.3f\n",
               gib, epr * ROW_BYTES / write_s * 1e-9, write_s, epr * ROW_BYTES / copy_s * 1e-9, copy_s / write_s);
    free(sf);
    free(scratch);
    free(buf);
}

/* The hot-row cache (--cache-pct) from a profile of fetches of the
 * largest shape: index sets the timed ones do not use (other seeds, the
 * same distribution), or a trace's first steps. At most the profile's
 * distinct rows are cached, so the profile has PROFILE_SAMPLES_PER_ROW
 * samples per cached row where PROFILE_MAX_FETCHES allow, and
 * PROFILE_MIN_FETCHES at least. */
enum { PROFILE_MIN_FETCHES = 16, PROFILE_MAX_FETCHES = 256, PROFILE_SAMPLES_PER_ROW = 4 };

static void cache_from_profile(engram_table_t *t, const target_t *tg, const workload_t *wl)
{
    const bench_opts_t *o = wl->opts;
    const uint64_t rows = (uint64_t)(o->cache_pct / 100.0 * (double)o->epr);
    uint32_t tokens = 0;
    for (int i = 0; i < wl->nshapes; i++)
        tokens = wl->shapes[i].tokens > tokens ? wl->shapes[i].tokens : tokens;
    const size_t per = (size_t)tokens * wl->ept;
    uint64_t steps = (rows * PROFILE_SAMPLES_PER_ROW + per - 1) / per;
    steps = steps < PROFILE_MIN_FETCHES ? PROFILE_MIN_FETCHES : steps > PROFILE_MAX_FETCHES ? PROFILE_MAX_FETCHES : steps;
    if (wl->trace && wl->trace->steps < steps)
        steps = wl->trace->steps;
    int64_t *profile = malloc(per * steps * sizeof(int64_t));
    if (profile == NULL)
        bench_gpu_fail("allocating the cache's profile", 1);
    for (uint64_t k = 0; k < steps; k++) {
        if (wl->trace) {
            index_trace_step(wl->trace, k, profile + k * per);
            continue;
        }
        table_gen_indices(o->epr, o->dist, 5000 + k, 0, 0, per, profile + k * per);
        for (size_t r = 0; r < per; r++)
            profile[k * per + r] += tg->idx_offset;
    }
    double t0 = now_s();
    CK(engram_table_cache_profile(t, profile, per * steps, rows));
    engram_table_stats_t st = {.size = sizeof(st)};
    CK(engram_table_stats(t, &st));
    printf("  hot-row cache: %llu rows (%.2f%% of the table, %.1f MiB of GPU memory), chosen from %llu fetches "
           "in %.2f s\n",
           (unsigned long long)st.cache_rows, 100.0 * (double)st.cache_rows / (double)o->epr,
           (double)st.cache_rows * ROW_BYTES / (1u << 20), (unsigned long long)steps, now_s() - t0);
    free(profile);
}

/* One table on `path` at `sms` (ignored on host_gather): every shape,
 * checked bit for bit, then timed beside the reference copy. */
static void run_table(engram_group_t *g, const target_t *tg, const char *path, int sms, const workload_t *wl,
                      FILE *json)
{
    const bench_opts_t *o = wl->opts;
    const shape_t *shapes = wl->shapes;
    int nshapes = wl->nshapes;
    uint32_t ept = wl->ept;
    engram_config_t *cfg;
    CK(engram_config_create(&cfg));
    char v[16];
    snprintf(v, sizeof(v), "%d", sms);
    CK(engram_config_set(cfg, "gpu_sms", sms < 0 ? "auto" : v));
    CK(engram_config_set(cfg, "gpu_path", path));
    CK(engram_config_set(cfg, "transport", "loopback"));
    CK(engram_config_set(cfg, "gpu_table", tg->peer ? "device" : "host_numa"));
    engram_context_t *ctx;
    CK(engram_context_create(cfg, g, &ctx));
    engram_config_destroy(cfg);
    uint32_t max_tokens = 0;
    for (int i = 0; i < nshapes; i++)
        max_tokens = shapes[i].tokens > max_tokens ? shapes[i].tokens : max_tokens;
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = o->epr, .row_bytes = ROW_BYTES,
                               .entries_per_token = ept, .max_tokens = max_tokens, .scale_packs = o->packs,
                               .recv = ENGRAM_RECV_CUDA};
    const double gib = (double)o->epr * ROW_BYTES / (1u << 30);
    engram_table_t *t;
    double c0 = now_s();
    CK(engram_table_create(ctx, &p, &t));
    double create_s = now_s() - c0;
    load_table(g, t, o, gib);
    if (engram_group_rank(g) != 0) { /* the peer only owns rows */
        CK(engram_table_destroy(t));
        CK(engram_context_destroy(ctx));
        return;
    }
    engram_table_stats_t st = {.size = sizeof(st)};
    CK(engram_table_stats(t, &st));
    printf("table %.2f GiB per rank (%s pages), created in %.1f s; gpu_path=%s takes %s%s\n", gib,
           st.shard_huge_pages ? "2 MiB" : "4 KiB", create_s, path, st.path,
           st.gather_threads ? " with a pool of threads" : "");
    if (st.gather_threads)
        printf("  host_gather pool: %d threads\n", st.gather_threads);
    if (o->cache_pct > 0)
        cache_from_profile(t, tg, wl);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int dev_sms = 0;
    CK(cudaDeviceGetAttribute(&dev_sms, cudaDevAttrMultiProcessorCount, engram_group_local_rank(g)));
    bool gather = strcmp(st.path, "host_gather") == 0;
    int used = gather ? 0 : sms > 0 && sms < dev_sms ? sms : dev_sms;
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
            /* from pageable memory the copy may still be landing when it
             * returns, and nothing orders it before the fetch's stream */
            CK(cudaDeviceSynchronize());
            engram_fetch_t *f;
            const void *d_rows;
            CK(engram_fetch_on_stream(t, d_idx[k], sh->tokens, 0, s, &f));
            CK(engram_wait(f, &d_rows, NULL));
            ok = ok && bench_gpu_rows_match(idx, n, ROW_BYTES, d_rows);
            engram_fetch_release(f);
        }
        engram_table_stats_t timed0 = {.size = sizeof(timed0)}, timed1 = {.size = sizeof(timed1)};
        CK(engram_table_stats(t, &timed0));
        double fetch_s = time_fetch(t, s, d_idx, sh, sh->iters);
        CK(engram_table_stats(t, &timed1));
        const double hit_share = timed1.rows > timed0.rows ? (double)(timed1.cache_hits - timed0.cache_hits) /
                                                                 (double)(timed1.rows - timed0.rows)
                                                           : 0;
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
        const char *traffic = wl->trace ? "trace" : o->dist == TABLE_GEN_ZIPF ? "zipf" : "uniform";

        double gbps = bytes / fetch_s * 1e-9, copy_gbps = bytes / copy_s * 1e-9;
        printf("%6.2f GiB %-11s %6u tok x %u x %u B %-7s sms %3d  fetch %8.1f us %6.1f GB/s  %s %7.1f us %6.1f GB/s  "
               "ratio %.3f  check %s",
               gib, st.path, sh->tokens, ept, ROW_BYTES, traffic, used, fetch_s * 1e6, gbps, ref, copy_s * 1e6,
               copy_gbps, gbps / copy_gbps, ok ? "ok" : "FAILED");
        if (o->cache_pct > 0)
            printf("  cache hits %.1f%%", 100 * hit_share);
        printf("\n");
        fflush(stdout);
        if (json)
            fprintf(json,
                    "{\"bench\":\"gpu_fetch\",\"table_gib\":%.3f,\"path\":\"%s\",\"gpu_path\":\"%s\","
                    "\"gather_threads\":%d,\"huge_pages\":%s,\"tokens\":%u,\"entries_per_token\":%u,"
                    "\"row_bytes\":%u,\"scale_packs\":%u,\"indices\":\"%s\",\"table\":\"%s\",\"sms\":%d,"
                    "\"fetch_us\":%.2f,\"fetch_gbps\":%.2f,\"ref\":\"%s\",\"ref_us\":%.2f,\"ref_gbps\":%.2f,"
                    "\"ratio\":%.4f,\"cache_pct\":%.3f,\"cache_hit_share\":%.4f,\"check_ok\":%s}\n",
                    gib, st.path, path, st.gather_threads, st.shard_huge_pages ? "true" : "false", sh->tokens, ept,
                    ROW_BYTES, o->packs, traffic, tg->peer ? "peer_gpu" : "host", used, fetch_s * 1e6, gbps,
                    tg->peer ? "memcpy_peer" : "memcpy_h2d", copy_s * 1e6, copy_gbps, gbps / copy_gbps, o->cache_pct,
                    hit_share, ok ? "true" : "false");
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
    CK(engram_table_stats(t, &st));
    printf("  stats: %llu fetches, %llu rows, %.1f MiB, %llu bad rows, %llu cache hits, %.1f ms in engram_wait\n",
           (unsigned long long)st.fetches, (unsigned long long)st.rows, (double)st.bytes / (1u << 20),
           (unsigned long long)st.bad_rows, (unsigned long long)st.cache_hits, (double)st.wait_ns * 1e-6);
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
    const bench_opts_t *o = a->wl->opts;
    int devices = 0;
    if (a->tg->peer && (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2)) {
        fprintf(stderr, "engram_gpu_bench --peer: needs 2 GPUs, found %d\n", devices);
        return 77;
    }
    CK(cudaSetDevice(engram_group_local_rank(g)));
    /* one table at a time: a production table fits in host memory once */
    for (int p = 0; p < o->npaths; p++) {
        bool sweep = strcmp(o->paths[p], "uva") == 0;
        for (int k = 0; k < (sweep ? o->nsms : 1); k++)
            run_table(g, a->tg, o->paths[p], sweep ? o->sms[k] : -1, a->wl, a->json);
    }
    if (a->json)
        fflush(a->json);
    return 0;
}

static _Noreturn void usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: engram_gpu_bench [--peer] [--indices FILE] [--table-gib G] [--paths P,..] [--sms N,..]\n"
            "                        [--tokens T,..] [--ept E] [--packs N] [--dist uniform|zipf] [--cache-pct P]\n"
            "                        [json_path]\n"
            "  --table-gib G   rows per rank in GiB of 256-byte rows (default 0.25)\n"
            "  --paths P,..    gpu_path values to run, each a table: uva, host_gather, auto (default uva)\n"
            "  --sms N,..      gpu_sms values for uva (default 8,16,32,64,0; 0 = every SM)\n"
            "  --tokens T,..   tokens per fetch (default 512,8192)\n"
            "  --ept E         rows per token (default 24; DeepSeek-V4.1: 48)\n"
            "  --packs N       scale packs per row (default 0; 1 for FP8 rows with their scales)\n"
            "  --dist D        generated rows: uniform (default) or zipf\n"
            "  --cache-pct P   a hot-row cache of P%% of the table's rows (0..100, default 0), chosen from a\n"
            "                  profile of fetches of the largest shape the timed ones do not repeat (a trace's\n"
            "                  first steps): 4 samples per cached row, 16..256 fetches; at most the profile's\n"
            "                  distinct rows\n");
    exit(rc);
}

/* A comma-separated list of ints in [lo, hi] into out (at most max). */
static int parse_ints(const char *arg, int lo, int hi, int *out, int max)
{
    int n = 0;
    for (const char *p = arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || n == max || (*end != ',' && *end != 0))
            usage(2);
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n > 0 ? n : (usage(2), 0);
}

int main(int argc, char **argv)
{
    bool peer = false;
    const char *path = NULL, *indices = NULL;
    bench_opts_t o = {.epr = 1u << 20, .paths = {"uva"}, .npaths = 1, .sms = {8, 16, 32, 64, 0}, .nsms = 5};
    int tokens[4] = {512, 8192}, ntokens = 2, ept = 24;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            usage(0);
        } else if (strcmp(a, "--peer") == 0) {
            peer = true;
        } else if (strcmp(a, "--indices") == 0 && v) {
            indices = argv[++i];
        } else if (strcmp(a, "--table-gib") == 0 && v) {
            char *end;
            double gib = strtod(argv[++i], &end);
            if (*end != 0 || !(gib >= 1.0 / 1024 && gib <= 4096))
                usage(2);
            o.epr = (uint64_t)(gib * (1u << 30) / ROW_BYTES);
        } else if (strcmp(a, "--paths") == 0 && v) {
            char *list = argv[++i];
            o.npaths = 0;
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                if (o.npaths == 3 || (strcmp(tok, "uva") && strcmp(tok, "host_gather") && strcmp(tok, "auto")))
                    usage(2);
                o.paths[o.npaths++] = tok;
            }
            if (o.npaths == 0)
                usage(2);
        } else if (strcmp(a, "--sms") == 0 && v) {
            o.nsms = parse_ints(argv[++i], 0, 4096, o.sms, 8);
        } else if (strcmp(a, "--tokens") == 0 && v) {
            ntokens = parse_ints(argv[++i], 1, 65536, tokens, 4);
        } else if (strcmp(a, "--ept") == 0 && v) {
            parse_ints(argv[++i], 1, 1024, &ept, 1);
        } else if (strcmp(a, "--packs") == 0 && v) {
            int packs;
            parse_ints(argv[++i], 0, 16, &packs, 1);
            o.packs = (uint32_t)packs;
        } else if (strcmp(a, "--cache-pct") == 0 && v) {
            char *end;
            o.cache_pct = strtod(argv[++i], &end);
            if (*end != 0 || !(o.cache_pct >= 0 && o.cache_pct <= 100))
                usage(2);
        } else if (strcmp(a, "--dist") == 0 && v) {
            i++;
            if (strcmp(v, "uniform") == 0)
                o.dist = TABLE_GEN_UNIFORM;
            else if (strcmp(v, "zipf") == 0)
                o.dist = TABLE_GEN_ZIPF;
            else
                usage(2);
        } else if (a[0] == '-' || path != NULL) {
            usage(2);
        } else {
            path = a;
        }
    }
    /* fetches in flight rotate over distinct sets, so rows come from host memory, not L2 */
    shape_t shapes[4];
    for (int k = 0; k < ntokens; k++)
        shapes[k] = (shape_t){.tokens = (uint32_t)tokens[k], .sets = tokens[k] >= 4096 ? 8 : 64,
                              .iters = tokens[k] >= 4096 ? 40 : 400};
    workload_t wl = {.shapes = shapes, .nshapes = ntokens, .ept = (uint32_t)ept, .opts = &o};
    index_trace_t trace;
    shape_t trace_shape;
    if (indices) {
        /* raw traces take the first generated shape */
        index_trace_want_t want = {.tokens = shapes[0].tokens, .entries_per_token = (uint32_t)ept,
                                   .total_rows = o.epr * (peer ? 2 : 1)};
        char err[512];
        if (index_trace_open(indices, &want, &trace, err, sizeof(err)) != 0) {
            fprintf(stderr, "engram_gpu_bench: %s\n", err);
            return 2;
        }
        if (trace.steps > MAX_TRACE_STEPS) { /* each step's indices are kept on the GPU */
            printf("--indices %s: %llu steps; the first %d are replayed\n", indices, (unsigned long long)trace.steps,
                   MAX_TRACE_STEPS);
            trace.steps = MAX_TRACE_STEPS;
        }
        /* each timed repetition replays every step at least once */
        trace_shape = (shape_t){.tokens = trace.tokens, .sets = (int)trace.steps,
                                .iters = trace.steps > 40 ? (int)trace.steps : 40};
        wl = (workload_t){.shapes = &trace_shape, .nshapes = 1, .ept = trace.entries_per_token, .trace = &trace,
                          .opts = &o};
    }
    FILE *json = path ? fopen(path, "a") : NULL;
    if (path && json == NULL) {
        perror(path);
        return 1;
    }
    target_t tg = {.peer = peer, .idx_offset = peer ? (int64_t)o.epr : 0};
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
