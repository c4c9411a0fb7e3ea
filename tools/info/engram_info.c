/* engram_info: version, every backend (built in, and every plugin found on
 * plugin_path: loaded, or why not; available, or why not; what it can do),
 * the effective configuration with each key's source (the transports' keys
 * too), and whether this configuration can run: a context and a small host
 * table are created on a group of one exactly as an application's would be;
 * and for recv=CUDA tables, the GPU's measured reach into host memory and
 * the path a table of --table-gib GiB of rows per node would take (64 by
 * default). Exits 1 with the library's message when the configuration
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

/* recv=CUDA tables: the rule gpu_path applies, with the reach it measured
 * on this process's current GPU. Informative: a machine without a GPU
 * still runs host tables. */
static void print_gpu(const engram_config_t *cfg, engram_context_t *ctx, uint64_t table_gib)
{
    char path[32] = "?";
    (void)engram_config_get(cfg, "gpu_path", path, sizeof(path));
    printf("\ngpu (recv=CUDA tables, gpu_path=%s):\n", path);
    const uint64_t bytes = table_gib << 30;
    engram_gpu_path_report_t r = {.size = sizeof(r)};
    engram_log_set_handler(gpu_section_log, NULL);
    const engram_status_t st = engram_gpu_path_report(ctx, bytes, &r);
    engram_log_set_handler(NULL, NULL);
    if (st != ENGRAM_OK) {
        printf("  none: %s\n", engram_last_error());
    } else {
        if (r.probed_bytes > 0)
            printf("  reach into host memory: %llu MiB measured (windows up to %llu MiB probed; %.1f GB/s in the "
                   "first, 64 MiB; %.2f of that past the reach; a window holds at %.2f)\n",
                   (unsigned long long)(r.reach_bytes >> 20), (unsigned long long)(r.probed_bytes >> 20),
                   r.gbps_first, r.share_past, ENGRAM_GPU_REACH_SHARE);
        if (r.probed_bytes > 0 && r.reach_bytes < r.probed_bytes)
            printf("  rule: uva for up to %llu MiB of rows per node, host_gather beyond\n",
                   (unsigned long long)(r.reach_bytes >> 20));
        printf("  a table of %llu GiB of rows per node: %s (%s)\n", (unsigned long long)table_gib, r.path, r.reason);
    }
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
