/* gpu_path=auto on a GPU: the probe of both paths runs (every window's
 * rates of uva, host_gather and the host-to-device copy measured, each
 * path's in a plausible relation to the copy), the report's choice is the
 * rule's for the rates it names, a table takes the same path, fetches bit
 * for bit on it and says why in the info log with both rates and its size;
 * the probe is measured once (a smaller size later reuses it, a larger one
 * probes its windows); settings that decide without a probe do not probe;
 * a host_gather probe that cannot run (huge_pages=on without the huge
 * pages) leaves the reach to decide. Needs a GPU (tagged gpu). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/log.h"
#include "tests/check.h"
#include "tests/engram_harness.h"
#include "tests/table_gen.h"

#define CUDA_CHECK(expr) CHECK((expr) == cudaSuccess)
#define MiB ((uint64_t)1 << 20)
#define ROW 256u
#define TOKENS 512u

/* The info lines of the library, kept for the checks. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;

static void keep_log(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg;
    fprintf(stderr, "engram %s:%d %s\n", file, line, msg);
    if (level > ENGRAM_LOG_LEVEL_INFO)
        return;
    pthread_mutex_lock(&log_mu);
    int n = snprintf(log_text + log_len, sizeof(log_text) - log_len, "%s\n", msg);
    if (n > 0 && (size_t)n < sizeof(log_text) - log_len)
        log_len += (size_t)n;
    pthread_mutex_unlock(&log_mu);
}

/* The kept line holding `what`, or NULL. */
static const char *kept_line(const char *what, char *line, size_t len)
{
    pthread_mutex_lock(&log_mu);
    const char *at = strstr(log_text, what);
    if (at != NULL) {
        const char *end = strchr(at, '\n');
        snprintf(line, len, "%.*s", (int)(end - at), at);
    }
    pthread_mutex_unlock(&log_mu);
    return at != NULL ? line : NULL;
}

static void forget_log(void)
{
    pthread_mutex_lock(&log_mu);
    log_len = 0;
    log_text[0] = 0;
    pthread_mutex_unlock(&log_mu);
}

static engram_context_t *context_with(engram_group_t *g, const char *key, const char *value)
{
    engram_config_t *cfg;
    CHECK_OK(engram_config_create(&cfg));
    CHECK_OK(engram_config_set(cfg, "transport", "loopback"));
    if (key != NULL)
        CHECK_OK(engram_config_set(cfg, key, value));
    engram_context_t *ctx;
    CHECK_OK(engram_context_create(cfg, g, &ctx));
    engram_config_destroy(cfg);
    return ctx;
}

/* The report's choice follows the rule from the rates it names. */
static void check_compared(const engram_gpu_path_report_t *r, uint64_t bytes)
{
    CHECK(strcmp(r->path, "uva") == 0 || strcmp(r->path, "host_gather") == 0);
    CHECK(r->window_bytes >= bytes && r->uva_gbps > 0 && r->host_gather_gbps > 0 && r->h2d_gbps > 0);
    const bool uva = r->uva_gbps >= r->host_gather_gbps * (1 + ENGRAM_GPU_AUTO_MARGIN);
    CHECK(strcmp(r->path, uva ? "uva" : "host_gather") == 0);
    CHECK(strstr(r->reason, "measured rate") != NULL);
    int w = 0;
    while (w < r->windows && r->window[w].bytes != r->window_bytes)
        w++;
    CHECK(w < r->windows && r->window[w].uva_gbps == r->uva_gbps &&
          r->window[w].host_gather_gbps == r->host_gather_gbps && r->window[w].h2d_gbps == r->h2d_gbps);
}

/* Every window probed, each rate plausible: host_gather's rows move on
 * the copy engine, so they come no faster than its contiguous copy (with
 * room for the noise of two timings). */
static void check_windows(const engram_gpu_path_report_t *r, int windows)
{
    static const uint64_t bytes[] = {64 * MiB, 256 * MiB, 512 * MiB};
    printf("gpu_auto_test: probe %.0f ms, %d pool threads, reach %llu MiB:", r->probe_ms, r->gather_threads,
           (unsigned long long)(r->reach_bytes >> 20));
    for (int i = 0; i < r->windows; i++)
        printf(" %llu MiB uva %.1f host_gather %.1f H2D %.1f;", (unsigned long long)(r->window[i].bytes >> 20),
               r->window[i].uva_gbps, r->window[i].host_gather_gbps, r->window[i].h2d_gbps);
    printf("\n");
    CHECK(r->windows == windows && r->gather_threads > 0 && r->probe_ms > 0);
    for (int i = 0; i < windows; i++) {
        const engram_gpu_path_window_t *w = &r->window[i];
        CHECK(w->bytes == bytes[i]);
        CHECK(w->uva_gbps > 0 && w->h2d_gbps > 0 && w->host_gather_gbps > 0);
        CHECK(w->host_gather_gbps <= 1.15 * w->h2d_gbps);
    }
    CHECK(r->probed_bytes == r->window[windows - 1].bytes && r->reach_bytes >= 64 * MiB &&
          r->reach_bytes <= r->probed_bytes);
}

/* A 256 MiB table on auto: probed, chosen by the rule, the same path as
 * the report's, said in the log, and its rows right. */
static void check_table(engram_group_t *g)
{
    const engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = 256 * MiB / ROW, .row_bytes = ROW,
                                     .entries_per_token = 1, .max_tokens = TOKENS, .recv = ENGRAM_RECV_CUDA};
    forget_log();
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &p));
    engram_gpu_path_report_t r = {.size = sizeof(r)};
    CHECK_OK(engram_gpu_path_report(h.ctx, 256 * MiB, &r));
    check_windows(&r, 2);
    check_compared(&r, 256 * MiB);
    engram_table_stats_t st = {.size = sizeof(st)};
    CHECK_OK(engram_table_stats(h.table, &st));
    CHECK(strcmp(st.path, r.path) == 0);
    char line[1024], want[64];
    CHECK(kept_line("gpu_path=auto: device ", line, sizeof(line)) != NULL && strstr(line, "probed in") != NULL &&
          strstr(line, "uva / host_gather / host-to-device copy") != NULL && strstr(line, " 256 MiB ") != NULL);
    CHECK(kept_line("GPU table: ", line, sizeof(line)) != NULL);
    printf("gpu_auto_test: %s\n", line);
    snprintf(want, sizeof(want), "GPU table: %s for 0.25 GiB of rows per node (", r.path);
    CHECK(strstr(line, want) == line && strstr(line, r.reason) != NULL);
    snprintf(want, sizeof(want), "uva %.1f GB/s", r.uva_gbps);
    CHECK(strstr(line, want) != NULL);
    snprintf(want, sizeof(want), "host_gather %.1f GB/s", r.host_gather_gbps);
    CHECK(strstr(line, want) != NULL);
    /* the path chosen serves the table */
    CHECK_OK(harness_write(&h));
    int64_t idx[TOKENS];
    table_gen_indices(p.entries_per_rank, TABLE_GEN_UNIFORM, 7, 0, 0, TOKENS, idx);
    int64_t *d_idx;
    CUDA_CHECK(cudaMalloc((void **)&d_idx, sizeof(idx)));
    CUDA_CHECK(cudaMemcpy(d_idx, idx, sizeof(idx), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    engram_fetch_t *f;
    const void *rows_dev;
    CHECK_OK(engram_fetch_on_stream(h.table, d_idx, TOKENS, 0, s, &f));
    CHECK_OK(engram_wait(f, &rows_dev, NULL));
    uint8_t *rows = malloc((size_t)TOKENS * ROW);
    CHECK(rows != NULL);
    CUDA_CHECK(cudaMemcpy(rows, rows_dev, (size_t)TOKENS * ROW, cudaMemcpyDeviceToHost));
    CHECK(harness_check(&h, idx, TOKENS, false, rows, NULL));
    CHECK_OK(engram_fetch_release(f));
    free(rows);
    CUDA_CHECK(cudaStreamDestroy(s));
    CUDA_CHECK(cudaFree(d_idx));

    /* once per process: a smaller size reuses the probe, a larger one
     * measures its windows (unless uva fell past its reach already) */
    engram_gpu_path_report_t again = {.size = sizeof(again)};
    CHECK_OK(engram_gpu_path_report(h.ctx, 200 * MiB, &again));
    CHECK(again.probe_ms == r.probe_ms && again.windows == 2 && again.window_bytes == 256 * MiB);
    check_compared(&again, 200 * MiB);
    const bool fell = r.reach_bytes < r.probed_bytes;
    CHECK_OK(engram_gpu_path_report(h.ctx, 512 * MiB, &again));
    if (fell) {
        CHECK(again.probe_ms == r.probe_ms && again.windows == 2);
        CHECK(again.window_bytes == 256 * MiB); /* past the largest window: its rates, uva's fallen */
    } else {
        check_windows(&again, 3);
        check_compared(&again, 512 * MiB);
    }
    /* within the first window: uva, no probe */
    CHECK_OK(engram_gpu_path_report(h.ctx, 64 * MiB, &again));
    CHECK(strcmp(again.path, "uva") == 0 && again.windows == 0 && strstr(again.reason, "first probe window"));
    harness_close(&h);
}

/* Settings that decide without a probe, and a host_gather probe that
 * cannot run. */
static void check_settings(engram_group_t *g)
{
    static const struct {
        const char *key, *value, *path, *reason;
    } cases[] = {
        {"gpu_path", "uva", "uva", "gpu_path=uva"},
        {"gpu_path", "host_gather", "host_gather", "gpu_path=host_gather"},
        {"gpu_table", "device", "uva", "gpu_table=device"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        engram_context_t *ctx = context_with(g, cases[i].key, cases[i].value);
        engram_gpu_path_report_t r = {.size = sizeof(r)};
        CHECK_OK(engram_gpu_path_report(ctx, 64u * 1024 * MiB, &r));
        CHECK(strcmp(r.path, cases[i].path) == 0 && strstr(r.reason, cases[i].reason) != NULL);
        CHECK(r.windows == 0 && r.window_bytes == 0 && r.probe_ms == 0);
        CHECK_OK(engram_context_destroy(ctx));
    }
    /* huge_pages=on: host_gather's probe needs 256 MiB of 2 MiB pages */
    FILE *mi = fopen("/proc/meminfo", "r");
    CHECK(mi != NULL);
    char line[256];
    long free_pages = 0, reserved = 0;
    while (fgets(line, sizeof(line), mi) != NULL) {
        sscanf(line, "HugePages_Free: %ld", &free_pages);
        sscanf(line, "HugePages_Rsvd: %ld", &reserved);
    }
    fclose(mi);
    free_pages -= reserved; /* promised to mappings already */
    engram_context_t *ctx = context_with(g, "huge_pages", "on");
    engram_gpu_path_report_t r = {.size = sizeof(r)};
    CHECK_OK(engram_gpu_path_report(ctx, 256 * MiB, &r));
    CHECK(r.windows == 2 && r.window[0].uva_gbps > 0 && r.window[1].uva_gbps > 0);
    if (free_pages >= 128) {
        printf("gpu_auto_test: huge_pages=on with %ld free 2 MiB pages: host_gather probed on them\n", free_pages);
        check_compared(&r, 256 * MiB);
        CHECK(r.gather_threads > 0);
    } else {
        printf("gpu_auto_test: huge_pages=on with %ld free 2 MiB pages: host_gather's probe fails, the reach "
               "decides (%s)\n", free_pages, r.reason);
        CHECK(r.gather_threads == 0 && r.host_gather_gbps == 0 && r.window[1].host_gather_gbps == 0);
        CHECK(strstr(r.reason, "host_gather's rate was not measured") != NULL);
        CHECK(strcmp(r.path, r.reach_bytes >= 256 * MiB ? "uva" : "host_gather") == 0);
    }
    CHECK_OK(engram_context_destroy(ctx));
}

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    engram_log_set_handler(keep_log, NULL);
    check_table(g);
    check_settings(g);
    engram_log_set_handler(NULL, NULL);
    return 0;
}

int main(void)
{
    setenv("ENGRAM_LOG_LEVEL", "info", 1);
    CHECK_OK(engram_group_fork_run(1, 0, rank_main, NULL, NULL));
    printf("gpu_auto_test: ok\n");
    return 0;
}
