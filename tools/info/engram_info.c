/* engram_info: version, every backend (built in, and every plugin found on
 * plugin_path: loaded, or why not; available, or why not; what it can do),
 * the effective configuration with each key's source (the transports' keys
 * too), and whether this configuration can run: a context and a small host
 * table are created on a group of one exactly as an application's would be;
 * and for recv=CUDA tables, gpu_path=auto's probe (each window's rates of
 * uva and host_gather beside a host-to-device copy, the path auto takes by
 * table size, the GPU's reach into host memory) and the path a table of
 * --table-gib GiB of rows per node would take (64 by default). Exits 1 with the library's message when the configuration
 * could not run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/engram.h"
#include "engram/log.h"
#include "tools/num_flag.h"

static void print_caps(const engram_backend_info_t *b)
{
    printf("      caps:");
    if (b->caps & ENGRAM_CAP_HOST_INITIATED)
        printf(" host-initiated");
    if (b->caps & ENGRAM_CAP_GPU_INITIATED)
        printf(" gpu-initiated");
    if (b->caps & ENGRAM_CAP_HYBRID)
        printf(" hybrid");
    if (b->caps & ENGRAM_CAP_CROSS_HOST)
        printf(" cross-host");
    if (b->caps & ENGRAM_CAP_HOST_PROXIED)
        printf(" host-proxied (transport=auto passes it over)");
    printf("; queues %d, outstanding per (queue, peer) ", b->max_queues);
    if (b->max_outstanding > 0)
        printf("%d", b->max_outstanding);
    else
        printf("not stated");
    printf("; reads");
    for (int k = 0; k < ENGRAM_MEM_NUM_KINDS; k++)
        if (b->read_kinds & ENGRAM_MEM_KIND_BIT(k))
            printf(" %s", engram_mem_kind_name((engram_mem_kind_t)k));
    printf("; writes");
    for (int k = 0; k < ENGRAM_MEM_NUM_KINDS; k++)
        if (b->write_kinds & ENGRAM_MEM_KIND_BIT(k))
            printf(" %s", engram_mem_kind_name((engram_mem_kind_t)k));
    printf("\n");
}

/* One backend: loaded or why not, available or why not, and what an open
 * of it offers. */
static void print_backend(const engram_backend_info_t *b)
{
    if (b->state == ENGRAM_BACKEND_ABSENT && b->origin == ENGRAM_BACKEND_PLUGIN) {
        printf("  %-10s not loaded: %s\n", b->name, b->reason);
        return;
    }
    if (b->state != ENGRAM_BACKEND_AVAILABLE) {
        printf("  %-10s available: no  (%s)\n", b->name, b->reason);
        return;
    }
    printf("  %-10s available: yes\n", b->name);
    print_caps(b);
    if (b->selected[0])
        printf("      selected: %s\n", b->selected);
}

/* The built-ins and modules, then the plugins found on plugin_path. */
static void print_backends(const engram_config_t *cfg, const engram_backend_list_t *list)
{
    const char *modules = engram_backend_module_dir();
    printf("\nbackends (built in, or modules from %s):\n", modules[0] ? modules : "(module directory unknown)");
    const int n = engram_backend_list_count(list);
    int i = 0;
    engram_backend_info_t b = {.size = sizeof(b)};
    for (; i < n && engram_backend_list_get(list, i, &b) == ENGRAM_OK && b.origin != ENGRAM_BACKEND_PLUGIN; i++)
        print_backend(&b);
    char path[4096] = "";
    (void)engram_config_get(cfg, "plugin_path", path, sizeof(path));
    printf("\nplugins (libengram_transport_<name>.so on plugin_path '%s'):\n", path);
    if (i == n)
        printf("  none found\n");
    for (; i < n && engram_backend_list_get(list, i, &b) == ENGRAM_OK; i++)
        print_backend(&b);
}

/* The GPU section's library lines: its outcome is printed as part of the
 * report (a host or build without a GPU path is normal, not an error), so
 * errors are kept out of the log; the rest goes to stderr as usual. */
static void gpu_section_log(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg;
    if (level != ENGRAM_LOG_LEVEL_ERROR)
        fprintf(stderr, "engram %s:%d %s\n", file, line, msg);
}

/* gpu_path=auto's probe: each window's rates of both paths beside the
 * host-to-device copy, and the path auto takes for rows up to that
 * window's size (the library's own report for that size). */
static void print_probe(engram_context_t *ctx, const engram_gpu_path_report_t *r)
{
    printf("  probe of both paths (once per device and process, %.0f ms; GB/s of random 256-byte rows into GPU "
           "memory; uva on every SM, host_gather with ",
           r->probe_ms);
    if (r->gather_threads > 0)
        printf("%d pool threads):\n", r->gather_threads);
    else
        printf("its probe failed, see the log):\n");
    printf("    %10s %8s %12s %9s %8s %16s   %s\n", "window", "uva", "host_gather", "H2D copy", "uva/H2D",
           "host_gather/H2D", "auto for rows up to the window");
    for (int i = 0; i < r->windows && i < ENGRAM_GPU_PATH_WINDOWS_MAX; i++) {
        const engram_gpu_path_window_t *w = &r->window[i];
        engram_gpu_path_report_t at = {.size = sizeof(at)};
        const bool ok = engram_gpu_path_report(ctx, w->bytes, &at) == ENGRAM_OK;
        printf("    %6llu MiB %8.1f %12.1f %9.1f %8.3f %16.3f   %s%s%s\n", (unsigned long long)(w->bytes >> 20),
               w->uva_gbps, w->host_gather_gbps, w->h2d_gbps, w->h2d_gbps > 0 ? w->uva_gbps / w->h2d_gbps : 0,
               w->h2d_gbps > 0 ? w->host_gather_gbps / w->h2d_gbps : 0, ok ? at.path : "?",
               ok && at.window_bytes == 0 ? " (not probed at this size)" : "",
               ok && at.window_bytes > 0 && at.uva_gbps == 0 ? " (uva's rate not compared)" : "");
    }
    printf("  auto takes uva where its rate in the smallest window holding the rows is at least host_gather's "
           "times %.2f\n",
           1 + ENGRAM_GPU_AUTO_MARGIN);
}

/* recv=CUDA tables: the rule gpu_path applies, with what it measured on
 * this process's current GPU. Informative: a machine without a GPU still
 * runs host tables. */
static void print_gpu(const engram_config_t *cfg, engram_context_t *ctx, uint64_t table_gib)
{
    char path[32] = "?";
    (void)engram_config_get(cfg, "gpu_path", path, sizeof(path));
    printf("\ngpu (recv=CUDA tables, gpu_path=%s):\n", path);
    const uint64_t bytes = table_gib << 30;
    engram_gpu_path_report_t r = {.size = sizeof(r)};
    engram_log_set_handler(gpu_section_log, NULL);
    const engram_status_t st = engram_gpu_path_report(ctx, bytes, &r);
    if (st == ENGRAM_OK && r.windows > 0)
        print_probe(ctx, &r);
    engram_log_set_handler(NULL, NULL);
    if (st != ENGRAM_OK) {
        printf("  none: %s\n", engram_last_error());
        return;
    }
    if (r.probed_bytes > 0)
        printf("  uva's reach into host memory: %llu MiB measured (windows up to %llu MiB probed; %.1f GB/s in the "
               "first, 64 MiB; %.2f of that past the reach; a window holds at %.2f)\n",
               (unsigned long long)(r.reach_bytes >> 20), (unsigned long long)(r.probed_bytes >> 20), r.gbps_first,
               r.share_past, ENGRAM_GPU_REACH_SHARE);
    printf("  a table of %llu GiB of rows per node: %s (%s", (unsigned long long)table_gib, r.path, r.reason);
    if (r.window_bytes > 0)
        printf("; rates from the %llu MiB window: uva %.1f GB/s, host_gather %.1f GB/s, H2D copy %.1f GB/s; "
               "0 = not measured or not compared",
               (unsigned long long)(r.window_bytes >> 20), r.uva_gbps, r.host_gather_gbps, r.h2d_gbps);
    printf(")\n");
}

/* Creates a context and a small host table on it as an application would:
 * the one verdict on whether this configuration runs (keys, selection,
 * open, queue count; then what a table needs: its segments with the
 * huge_pages and numa_node asked for, their registration); then, on the
 * same context, the GPU section. */
static int check_runs(const engram_config_t *cfg, engram_group_t *g, uint64_t table_gib)
{
    char transport[ENGRAM_BACKEND_NAME_MAX + 1] = "?";
    (void)engram_config_get(cfg, "transport", transport, sizeof(transport));
    printf("\ncheck: transport=%s ", transport);
    engram_context_t *ctx = NULL;
    if (engram_context_create(cfg, g, &ctx) != ENGRAM_OK) {
        printf("cannot run\n");
        fprintf(stderr, "engram_info: configuration error: %s\n", engram_last_error());
        return 1;
    }
    const engram_table_params_t params = {.size = sizeof(params), .entries_per_rank = 64, .row_bytes = 256,
                                          .entries_per_token = 1, .max_tokens = 1, .recv = ENGRAM_RECV_HOST};
    engram_table_t *table = NULL;
    if (engram_table_create(ctx, &params, &table) != ENGRAM_OK) {
        printf("cannot create a table on %s\n", engram_context_transport(ctx));
        fprintf(stderr, "engram_info: configuration error: a table (64 rows of 256 bytes, recv=HOST) cannot be "
                "created: %s\n", engram_last_error());
        engram_context_destroy(ctx);
        return 1;
    }
    printf("runs on %s (a table created and destroyed)\n", engram_context_transport(ctx));
    engram_table_destroy(table);
    print_gpu(cfg, ctx, table_gib);
    engram_context_destroy(ctx);
    return 0;
}

/* Usage on stdout with status 0 when asked for (--help), else on stderr
 * with status 2. */
static void usage_exit(const char *prog, int status)
{
    fprintf(status == 0 ? stdout : stderr,
            "usage: %s [--table-gib N]\n"
            "  Lists the backends (where each comes from, whether it runs here and why not, what it offers),\n"
            "  the effective configuration with each value's source, and the GPU fetch path a recv=CUDA\n"
            "  table of N GiB per node would take (default 64).\n",
            prog);
    exit(status);
}

int main(int argc, char **argv)
{
    uint64_t table_gib = 64;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--table-gib") == 0 && i + 1 < argc)
            table_gib = num_flag(argv[0], "--table-gib", argv[++i], 1, 1u << 16);
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            usage_exit(argv[0], 0);
        else
            usage_exit(argv[0], 2);
    }
    printf("engram %s\n", engram_version(NULL, NULL, NULL));
    engram_config_t *cfg;
    if (engram_config_create(&cfg) != ENGRAM_OK) {
        fprintf(stderr, "engram_info: configuration error: %s\n", engram_last_error());
        return 1;
    }
    /* availability checks and opens may be collective: a group of one */
    engram_group_t *g;
    if (engram_group_solo_create(&g) != ENGRAM_OK) {
        fprintf(stderr, "engram_info: %s\n", engram_last_error());
        engram_config_destroy(cfg);
        return 1;
    }
    /* every backend, with what it offers; then every key, the backends' too */
    engram_backend_list_t *list;
    if (engram_backend_list_create(cfg, g, &list) != ENGRAM_OK) {
        fprintf(stderr, "engram_info: configuration error: %s\n", engram_last_error());
        engram_group_destroy(g);
        engram_config_destroy(cfg);
        return 1;
    }
    print_backends(cfg, list);
    printf("\nconfiguration (ENGRAM_<KEY> env > ENGRAM_CONFIG_FILE > default; API calls override all):\n");
    engram_config_print(cfg, stdout);
    engram_backend_list_print_keys(list, cfg, stdout);
    engram_backend_list_destroy(list);

    int rc = check_runs(cfg, g, table_gib);
    engram_group_destroy(g);
    engram_config_destroy(cfg);
    return rc;
}
