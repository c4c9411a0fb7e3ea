/* Registry: built-in selection over a fake table defined here (instead of
 * //transports:builtins) and handed to it, transport=auto order and its log
 * line, and plugin loading: a working plugin used end to end with its own
 * config key, every refused plugin, relative and empty plugin_path entries,
 * and transport keys: each checked by the one transport its name names,
 * loading no other.
 *
 * argv[1] is the runfiles path of libengram_transport_testplug.so; every
 * test plugin is built into the same directory. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal/config_keys.h"
#include "hal/log.h"
#include "hal/registry.h"
#include "hal/testdata/check_error.h"

/* ---- the fake built-in table ---- */

static bool single_host = true; /* what the fake loopback sees */
static bool ucx_ok = true;

static bool fake_loopback_available(engram_group_t *group, const char **why)
{
    (void)group;
    if (!single_host)
        *why = "not a single-host group";
    return single_host;
}

static bool fake_mlx5dv_available(engram_group_t *group, const char **why)
{
    (void)group;
    *why = "no mlx5 device";
    return false;
}

static bool fake_ucx_available(engram_group_t *group, const char **why)
{
    (void)group;
    if (!ucx_ok)
        *why = "no UCX transport reaches every peer";
    return ucx_ok;
}

static const engram_transport_ops_t fake_loopback = {.name = "loopback", .available = fake_loopback_available};
static const engram_transport_ops_t fake_mlx5dv = {.name = "mlx5dv", .available = fake_mlx5dv_available};
static const engram_config_key_decl_t fake_ucx_keys[] = {
    {"ucx_window", ENGRAM_CONFIG_INT, "256", "1..65536", "outstanding gets"},
};
static const engram_transport_ops_t fake_ucx = {.name = "ucx", .available = fake_ucx_available,
                                                .config_keys = fake_ucx_keys, .num_config_keys = 1};

/* Not in priority order, so auto has to sort. */
static const engram_builtin_t fake_entries[] = {
    {"loopback", &fake_loopback, NULL, 20, false},
    {"ucx", &fake_ucx, NULL, 10, false},
    {"nccl_gin", NULL, "needs NCCL >= 2.30.4, found 2.28.9", 40, false},
    {"mlx5dv", &fake_mlx5dv, NULL, 30, false},
};
static const engram_builtin_table_t builtins = {fake_entries, 4};

/* ---- helpers ---- */

static char plugin_dir[4096];

static int gather_one(void *ctx, const void *send, void *recv, size_t bytes)
{
    (void)ctx;
    memcpy(recv, send, bytes);
    return 0;
}

static int barrier_one(void *ctx)
{
    (void)ctx;
    return 0;
}

/* A callbacks group of `nranks` in which this process is rank 0; only the
 * one-rank group is ever asked to communicate. */
static engram_group_t *group_new(int nranks)
{
    engram_group_callbacks_t cb = {.size = sizeof(cb), .rank = 0, .nranks = nranks, .local_size = nranks,
                                   .allgather = gather_one, .barrier = barrier_one};
    engram_group_t *g = NULL;
    CHECK_OK(engram_group_callbacks_create(&cb, &g));
    CHECK(engram_group_size(g) == nranks);
    return g;
}

static engram_config_t *config_new(const char *transport, const char *plugin_path)
{
    engram_config_t *cfg = NULL;
    CHECK_OK(engram_config_create(&cfg));
    CHECK_OK(engram_config_set(cfg, "transport", transport));
    CHECK_OK(engram_config_set(cfg, "plugin_path", plugin_path));
    return cfg;
}

/* Select `transport` with plugin_path = the test plugin directory. */
static engram_status_t select_named(engram_group_t *g, const char *transport, const engram_transport_ops_t **out)
{
    engram_config_t *cfg = config_new(transport, plugin_dir);
    engram_status_t st = engram_registry_select(g, cfg, &builtins, out);
    engram_config_destroy(cfg);
    return st;
}

/* Runs transport=auto with stderr captured into `log` (ENGRAM_LOG_LEVEL is
 * info, set before the first log call). */
static engram_status_t select_auto_logged(engram_group_t *g, const engram_transport_ops_t **out, char *log,
                                          size_t len)
{
    char path[4096];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(path, sizeof(path), "%s/auto.log", tmp ? tmp : "/tmp");
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    CHECK(saved >= 0);
    CHECK(freopen(path, "w", stderr) != NULL);
    engram_config_t *cfg = config_new("auto", "");
    engram_status_t st = engram_registry_select(g, cfg, &builtins, out);
    engram_config_destroy(cfg);
    fflush(stderr);
    CHECK(dup2(saved, STDERR_FILENO) == STDERR_FILENO);
    close(saved);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(log, 1, len - 1, f);
    log[n] = '\0';
    fclose(f);
    fputs(log, stderr); /* keep it in the test log */
    return st;
}

/* ---- built-ins ---- */

static void test_builtins(engram_group_t *g)
{
    const engram_transport_ops_t *ops = NULL;
    CHECK_OK(select_named(g, "loopback", &ops));
    CHECK(ops == &fake_loopback);

    ops = NULL;
    CHECK_ERROR(select_named(g, "nccl_gin", &ops), ENGRAM_ERR_UNSUPPORTED,
                "transport 'nccl_gin' is not in this build: needs NCCL >= 2.30.4, found 2.28.9");
    CHECK_ERROR(select_named(g, "mlx5dv", &ops), ENGRAM_ERR_UNSUPPORTED,
                "transport 'mlx5dv' cannot run here: no mlx5 device");
    single_host = false;
    CHECK_ERROR(select_named(g, "loopback", &ops), ENGRAM_ERR_UNSUPPORTED,
                "transport 'loopback' cannot run here: not a single-host group");
    single_host = true;
    CHECK(ops == NULL); /* out untouched by failures */
}

static void test_unknown_backend(engram_group_t *g)
{
    const engram_transport_ops_t *ops = NULL;
    char want[8192];
    /* A program that links the library statically: the modules are looked
     * for in ../lib/engram beside it (an installed bin/), first. */
    const char *modules = engram_registry_module_dir();
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    CHECK(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    char want_dir[8192];
    snprintf(want_dir, sizeof(want_dir), "%s/../lib/engram", exe);
    CHECK(strcmp(modules, want_dir) == 0);
    snprintf(want, sizeof(want),
             "transport 'nosuch' is not a built-in (known backends: auto, loopback, ucx, nccl_gin, mlx5dv) nor a "
             "plugin: no libengram_transport_nosuch.so in the module directory '%s' or plugin_path directories "
             "/nonexistent:%s",
             modules, plugin_dir);
    char path[8192];
    snprintf(path, sizeof(path), "/nonexistent:%s", plugin_dir);
    engram_config_t *cfg = config_new("nosuch", path);
    CHECK_ERROR(engram_registry_select(g, cfg, &builtins, &ops), ENGRAM_ERR_NOT_FOUND, want);
    engram_config_destroy(cfg);

    cfg = config_new("nosuch", "");
    snprintf(want, sizeof(want),
             "nor a plugin: no libengram_transport_nosuch.so in the module directory '%s', and plugin_path is empty",
             modules);
    CHECK_ERROR(engram_registry_select(g, cfg, &builtins, &ops), ENGRAM_ERR_NOT_FOUND, want);
    engram_config_destroy(cfg);

    CHECK_ERROR(engram_registry_load_plugin("../hal/x", plugin_dir, &ops), ENGRAM_ERR_INVALID,
                "transport name '../hal/x' is not a valid plugin name");
    CHECK_ERROR(engram_registry_load_plugin("", plugin_dir, &ops), ENGRAM_ERR_INVALID, "is not a valid plugin name");
    CHECK(ops == NULL);
}

/* ---- auto ---- */

static void test_auto(engram_group_t *g)
{
    char log[4096];
    const engram_transport_ops_t *ops = NULL;
    CHECK_OK(select_auto_logged(g, &ops, log, sizeof(log)));
    CHECK(ops == &fake_loopback);
    CHECK(strstr(log, "transport=auto chose loopback; passed over nccl_gin: needs NCCL >= 2.30.4, found 2.28.9, "
                      "mlx5dv: no mlx5 device\n") != NULL);

    /* Multi-host: loopback steps aside and ucx is the one left. */
    single_host = false;
    CHECK_OK(select_auto_logged(g, &ops, log, sizeof(log)));
    CHECK(ops == &fake_ucx);
    CHECK(strstr(log, "transport=auto chose ucx; passed over nccl_gin: needs NCCL >= 2.30.4, found 2.28.9, "
                      "mlx5dv: no mlx5 device, loopback: not a single-host group\n") != NULL);

    ucx_ok = false;
    ops = NULL;
    CHECK_ERROR(select_auto_logged(g, &ops, log, sizeof(log)), ENGRAM_ERR_UNSUPPORTED,
                "transport=auto found no usable backend: nccl_gin: needs NCCL >= 2.30.4, found 2.28.9, mlx5dv: no "
                "mlx5 device, loopback: not a single-host group, ucx: no UCX transport reaches every peer");
    CHECK(ops == NULL);
    CHECK(strstr(log, "chose") == NULL);
    single_host = true;
    ucx_ok = true;
}

/* ---- the working plugin ---- */

static void fill(engram_segment_t *seg, void *mem, size_t size)
{
    *seg = (engram_segment_t){.kind = ENGRAM_MEM_HOST, .addr = mem, .size = size, .numa_node = -1, .device = -1};
}

static void wait_request(const engram_transport_ops_t *ops, engram_transport_t *t, engram_request_t *req)
{
    int polls = 0;
    engram_status_t st;
    while ((st = ops->test(t, req)) == ENGRAM_INPROGRESS)
        CHECK(++polls < 1000);
    CHECK_OK(st);
    CHECK(polls == 1); /* testplug completes on the second test */
    ops->request_free(t, req);
}

/* testplug from `dir`: of the current transport ABI version, or of
 * version 3 (converted by the loader). */
static void test_plugin_works(engram_group_t *g, const char *dir)
{
    const engram_transport_ops_t *ops = NULL;
    char path[8192];
    snprintf(path, sizeof(path), "/nonexistent:%s", dir);
    engram_config_t *cfg = config_new("testplug", path);
    CHECK_OK(engram_registry_select(g, cfg, &builtins, &ops));
    CHECK(ops != NULL && strcmp(ops->name, "testplug") == 0);

    /* Stays loaded: loading again yields the same ops. */
    const engram_transport_ops_t *again = NULL;
    CHECK_OK(engram_registry_load_plugin("testplug", dir, &again));
    CHECK(again == ops);

    /* Its own key, read through the view: default 4, then as set. */
    engram_transport_t *t = NULL;
    engram_transport_caps_t caps;
    CHECK_OK(engram_transport_open(ops, g, cfg, &t));
    ops->caps(t, &caps);
    CHECK(caps.max_queues == 4);
    ops->close(t);
    CHECK_OK(engram_config_set(cfg, "testplug_queues", "3"));
    CHECK_OK(engram_registry_select(g, cfg, &builtins, &ops));
    CHECK_OK(engram_transport_open(ops, g, cfg, &t));
    ops->caps(t, &caps);
    CHECK(caps.max_queues == 3);
    ops->close(t);
    CHECK_OK(engram_config_set(cfg, "num_qps", "2"));
    CHECK_OK(engram_transport_open(ops, g, cfg, &t));
    ops->caps(t, &caps);
    CHECK(caps.flags == ENGRAM_CAP_HOST_INITIATED);
    CHECK(caps.max_queues == 2);

    static unsigned char table[4096], dest[1024];
    for (size_t i = 0; i < sizeof(table); i++)
        table[i] = (unsigned char)(i * 7 + 3);
    engram_segment_t table_seg, dest_seg;
    fill(&table_seg, table, sizeof(table));
    fill(&dest_seg, dest, sizeof(dest));
    engram_region_t *remote = NULL, *local = NULL;
    CHECK_OK(ops->reg_symmetric(t, &table_seg, ENGRAM_REG_RANK, &remote));
    CHECK_OK(ops->reg_local(t, &dest_seg, &local));
    CHECK_STATUS(ops->reg_symmetric(t, &table_seg, ENGRAM_REG_NODE_SPAN, &remote), ENGRAM_ERR_UNSUPPORTED);

    /* Rows 5, 9, 2 with AGGREGATE are held back; row 7 rings the doorbell. */
    const int rows[] = {5, 9, 2, 7};
    for (int i = 0; i < 4; i++)
        CHECK_OK(ops->get(t, 1, 0, remote, (uint64_t)rows[i] * 256, local, (uint64_t)i * 256, 256,
                          i < 3 ? ENGRAM_GET_AGGREGATE : 0));
    for (int i = 0; i < 4; i++)
        CHECK(memcmp(dest + i * 256, table + rows[i] * 256, 256) == 0);

    /* A held-back get lands at the flush at the latest. */
    memset(dest, 0, sizeof(dest));
    CHECK_OK(ops->get(t, 0, 0, remote, 15 * 256, local, 0, 256, ENGRAM_GET_AGGREGATE));
    CHECK(dest[0] == 0 && dest[255] == 0); /* still held back */
    engram_request_t *req = NULL;
    CHECK_OK(ops->flush(t, 0, 0, &req));
    wait_request(ops, t, req);
    CHECK(memcmp(dest, table + 15 * 256, 256) == 0);

    char text[256];
    ops->describe(t, text, sizeof(text));
    CHECK(strcmp(text, "testplug: 2 queues, 5 gets, 2 doorbells, 1 flushes") == 0);

    /* Out of bounds, bad queue, bad peer: refused, nothing copied. */
    CHECK_STATUS(ops->get(t, 0, 0, remote, sizeof(table) - 255, local, 0, 256, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->get(t, 0, 0, remote, 0, local, sizeof(dest) - 255, 256, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->get(t, 2, 0, remote, 0, local, 0, 256, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->get(t, 0, 1, remote, 0, local, 0, 256, 0), ENGRAM_ERR_INVALID);
    CHECK_OK(ops->get(t, 0, 0, remote, sizeof(table), local, sizeof(dest), 0, 0)); /* zero length at the end */

    ops->dereg(t, local);
    ops->dereg(t, remote);
    ops->close(t);
    engram_config_destroy(cfg);

    /* The plugin's own available() is consulted: it serves one rank only. */
    engram_group_t *two = group_new(2);
    ops = NULL;
    CHECK_ERROR(select_named(two, "testplug", &ops), ENGRAM_ERR_UNSUPPORTED,
                "transport 'testplug' (plugin) cannot run here: testplug copies within one process");
    CHECK(ops == NULL);
    engram_group_destroy(two);
}

/* ---- refused plugins and paths ---- */

static void test_plugins_refused(void)
{
    const struct {
        const char *name;
        engram_status_t status;
        const char *message;
    } refused[] = {
        {"badver", ENGRAM_ERR_VERSION, "exports engram_transport_plugin_v3 with transport ABI version 4; that symbol is "
                                       "version 3's"},
        {"nosym", ENGRAM_ERR_INVALID, "exports none of engram_transport_plugin_v4 (transport ABI version 4), "
                                      "engram_transport_plugin_v3 (version 3) and engram_transport_plugin_v1 (version "
                                      "2)"},
        {"noops", ENGRAM_ERR_INVALID, "engram_transport_plugin_v4 points to no ops"},
        {"v3noops", ENGRAM_ERR_INVALID, "its engram_transport_plugin_v3 record's ops is NULL"},
        {"small", ENGRAM_ERR_VERSION, "ops->size is 64 bytes, a transport ABI version 3 plugin needs at least 112"},
        {"badname", ENGRAM_ERR_INVALID, "ops->name is 'someone_else', expected 'badname'"},
        {"nofns", ENGRAM_ERR_INVALID, "ops->caps is NULL but every transport must provide it"},
        {"gpunofns", ENGRAM_ERR_INVALID, "gpu_launcher->issue is NULL but a fetch launcher must provide it"},
        {"gpumixed", ENGRAM_ERR_INVALID,
         "ops->reg_symmetric is NULL but every transport must provide it (a GPU-initiated one with a "
         "gpu_launcher may leave all 7 host ops NULL)"},
        {"gpusmall", ENGRAM_ERR_VERSION, "gpu_launcher->size is 24 bytes, a transport ABI version 3 plugin needs at "
                                         "least 40"},
        {"badkeys", ENGRAM_ERR_INVALID, "libengram_transport_badkeys.so: default of badkeys_depth: '9' is out of "
                                        "range 0..4"},
        {"badprefix", ENGRAM_ERR_INVALID, "libengram_transport_badprefix.so: config key 'depth' is not named after its "
                                          "transport: transport badprefix declares only keys named badprefix_<rest>"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        const engram_transport_ops_t *ops = NULL;
        char want[8192];
        snprintf(want, sizeof(want), "plugin %s/libengram_transport_%s.so", plugin_dir, refused[i].name);
        CHECK_ERROR(engram_registry_load_plugin(refused[i].name, plugin_dir, &ops), refused[i].status, want);
        CHECK_ERROR(engram_registry_load_plugin(refused[i].name, plugin_dir, &ops), refused[i].status,
                    refused[i].message);
        CHECK(ops == NULL);
    }
    /* A GPU-initiated plugin may leave the host data path out. */
    const engram_transport_ops_t *gpu = NULL;
    CHECK_OK(engram_registry_load_plugin("gpuonly", plugin_dir, &gpu));
    CHECK(gpu != NULL && gpu->get == NULL && gpu->gpu_launcher != NULL && gpu->gpu_launcher->issue != NULL);
    /* A plugin of transport ABI version 2 (its record under
     * engram_transport_plugin_v1), converted: its launcher too. */
    const engram_transport_ops_t *old = NULL;
    CHECK_OK(engram_registry_load_plugin("oldabi", plugin_dir, &old));
    CHECK(old != NULL && strcmp(old->name, "oldabi") == 0 && old->caps != NULL && old->get == NULL);
    CHECK(old->gpu_launcher != NULL && old->gpu_launcher->issue != NULL && old->gpu_launcher->detach != NULL);
    CHECK(old->progress == NULL && old->alloc_symmetric == NULL && old->config_keys == NULL);
}

static void test_plugin_path_refused(void)
{
    const engram_transport_ops_t *ops = NULL;
    char path[8192];
    /* Relative entries are refused even when an absolute one has the plugin;
     * the working directory (the runfiles tree) does hold hal/. */
    snprintf(path, sizeof(path), "%s:hal", plugin_dir);
    CHECK_ERROR(engram_registry_load_plugin("testplug", path, &ops), ENGRAM_ERR_INVALID,
                "plugin_path: entry 'hal' is relative; entries must be absolute directories");
    CHECK_ERROR(engram_registry_load_plugin("testplug", "./hal", &ops), ENGRAM_ERR_INVALID,
                "plugin_path: entry './hal' is relative");
    snprintf(path, sizeof(path), "%s:", plugin_dir);
    CHECK_ERROR(engram_registry_load_plugin("testplug", path, &ops), ENGRAM_ERR_INVALID, "has an empty entry");
    snprintf(path, sizeof(path), "::%s", plugin_dir);
    CHECK_ERROR(engram_registry_load_plugin("testplug", path, &ops), ENGRAM_ERR_INVALID, "has an empty entry");
    CHECK(ops == NULL);

    /* From the environment, as a user would set it: a configuration error
     * whatever the transport (not only logged when transport=auto looks
     * for plugins). */
    const char *transports[] = {"testplug", "loopback", "auto"};
    for (int i = 0; i < 3; i++) {
        CHECK(setenv("ENGRAM_PLUGIN_PATH", i == 2 ? "." : "hal", 1) == 0);
        CHECK(setenv("ENGRAM_TRANSPORT", transports[i], 1) == 0);
        engram_config_t *cfg = (engram_config_t *)&ops;
        CHECK_ERROR(engram_config_create(&cfg), ENGRAM_ERR_INVALID,
                    i == 2 ? "ENGRAM_PLUGIN_PATH: plugin_path: entry '.' is relative"
                           : "ENGRAM_PLUGIN_PATH: plugin_path: entry 'hal' is relative");
        CHECK(cfg == (engram_config_t *)&ops);
    }
    unsetenv("ENGRAM_PLUGIN_PATH");
    unsetenv("ENGRAM_TRANSPORT");
}

/* ---- transport keys ---- */

/* The log lines of the checks below, to show which plugins they touched. */
static char key_log[16384];
static size_t key_log_used;

static void log_to_buffer(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg, (void)level, (void)file, (void)line;
    if (key_log_used < sizeof(key_log))
        key_log_used += (size_t)snprintf(key_log + key_log_used, sizeof(key_log) - key_log_used, "%s\n", msg);
}

/* engram_registry_check_keys on `key = value` with plugin_path `path` over
 * `table`, logging into key_log (emptied first). */
static engram_status_t check_key(const engram_builtin_table_t *table, const char *path, const char *key,
                                 const char *value)
{
    engram_config_t *cfg = config_new("loopback", path);
    CHECK_OK(engram_config_set(cfg, key, value));
    key_log_used = 0;
    key_log[0] = '\0';
    engram_log_set_handler(log_to_buffer, NULL);
    engram_status_t st = engram_registry_check_keys(cfg, table);
    engram_log_set_handler(NULL, NULL);
    engram_config_destroy(cfg);
    return st;
}

/* The file libengram_transport_junk.so in a directory of its own: no
 * shared object, so loading it fails. */
static void junk_dir(char *dir, size_t len)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(dir, len, "%s/junk", tmp ? tmp : "/tmp");
    (void)mkdir(dir, 0700);
    char file[8192];
    snprintf(file, sizeof(file), "%s/libengram_transport_junk.so", dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    CHECK(fputs("not a shared object\n", f) >= 0);
    CHECK(fclose(f) == 0);
}

static const engram_config_key_decl_t fake_test_keys[] = {{"test_depth", ENGRAM_CONFIG_INT, "1", "1..8", "d"}};
static const engram_transport_ops_t fake_test = {.name = "test",
                                                 .available = fake_loopback_available,
                                                 .config_keys = fake_test_keys, .num_config_keys = 1};
static const engram_config_key_decl_t unnamed_keys[] = {{"window", ENGRAM_CONFIG_INT, "1", "1..8", "w"}};
static const engram_transport_ops_t fake_unnamed = {.name = "unnamed",
                                                    .available = fake_loopback_available,
                                                    .config_keys = unnamed_keys, .num_config_keys = 1};
static const engram_config_key_decl_t fake_testplug_keys[] = {
    {"testplug_other", ENGRAM_CONFIG_INT, "1", "1..8", "o"},
};
static const engram_transport_ops_t fake_testplug = {.name = "testplug",
                                                     .available = fake_loopback_available,
                                                     .config_keys = fake_testplug_keys, .num_config_keys = 1};

static void test_transport_keys(engram_group_t *g)
{
    const engram_transport_ops_t *ops = NULL;
    /* A value its declaring plugin refuses, named with where it was set. */
    engram_config_t *cfg = config_new("loopback", plugin_dir);
    CHECK_OK(engram_config_set(cfg, "testplug_queues", "9"));
    CHECK_ERROR(engram_registry_select(g, cfg, &builtins, &ops), ENGRAM_ERR_INVALID,
                "engram_config_set: testplug's testplug_queues: '9' is out of range 1..4");
    engram_config_destroy(cfg);

    /* A key the transport it names does not declare: its keys listed. */
    CHECK(setenv("ENGRAM_TESTPLUG_QUEUE", "2", 1) == 0);
    cfg = config_new("loopback", plugin_dir);
    CHECK_ERROR(engram_registry_select(g, cfg, &builtins, &ops), ENGRAM_ERR_INVALID,
                "ENGRAM_TESTPLUG_QUEUE: unknown key 'testplug_queue': not a core key, and transport testplug "
                "declares no such key (its keys: testplug_queues)");
    engram_config_destroy(cfg);
    unsetenv("ENGRAM_TESTPLUG_QUEUE");
    /* Without the plugin directory, no transport is named testplug. */
    CHECK(setenv("ENGRAM_TESTPLUG_QUEUES", "2", 1) == 0);
    cfg = config_new("loopback", "");
    CHECK_ERROR(engram_registry_select(g, cfg, &builtins, &ops), ENGRAM_ERR_INVALID,
                "ENGRAM_TESTPLUG_QUEUES: unknown key 'testplug_queues': not a core key, and no transport's name "
                "followed by '_' begins it (a transport's keys are <transport>_<rest>; transports: loopback, ucx, "
                "nccl_gin, mlx5dv)");
    engram_config_destroy(cfg);
    unsetenv("ENGRAM_TESTPLUG_QUEUES");
    CHECK(ops == NULL);

    /* Checking a key loads only the transport it names: with every loader
     * test plugin and a file that is no shared object on the path, a
     * built-in's key checks as it does with an empty path, and the log
     * shows no plugin touched. */
    char junk[4096], path[16384];
    junk_dir(junk, sizeof(junk));
    snprintf(path, sizeof(path), "%s:%s", junk, plugin_dir);
    CHECK_OK(check_key(&builtins, path, "ucx_window", "16"));
    CHECK(strstr(key_log, "libengram_transport_") == NULL);
    CHECK_ERROR(check_key(&builtins, path, "ucx_window", "0"), ENGRAM_ERR_INVALID,
                "engram_config_set: ucx's ucx_window: '0' is out of range 1..65536");
    CHECK(strstr(key_log, "libengram_transport_") == NULL);
    CHECK_ERROR(check_key(&builtins, "", "ucx_window", "0"), ENGRAM_ERR_INVALID,
                "engram_config_set: ucx's ucx_window: '0' is out of range 1..65536");
    /* A plugin's key loads that plugin and no other. */
    CHECK_OK(check_key(&builtins, path, "testplug_queues", "2"));
    CHECK(strstr(key_log, "transport plugin 'testplug' loaded from") != NULL);
    CHECK(strstr(key_log, "junk") == NULL && strstr(key_log, "badkeys") == NULL &&
          strstr(key_log, "gpuonly") == NULL);

    /* The transports known, when a key names none: built-in rows, then the
     * plugins found, by name. */
    CHECK_ERROR(check_key(&builtins, path, "nosuch_key", "1"), ENGRAM_ERR_INVALID,
                "engram_config_set: unknown key 'nosuch_key': not a core key, and no transport's name followed by "
                "'_' begins it (a transport's keys are <transport>_<rest>; transports: loopback, ucx, nccl_gin, "
                "mlx5dv, badkeys, badname, badprefix, badver, gpumixed, gpunofns, gpuonly, gpusmall, junk, nofns");
    CHECK(strstr(engram_last_error(), ", testplug,") != NULL || strstr(engram_last_error(), ", testplug)") != NULL);
    CHECK(strstr(key_log, "libengram_transport_") == NULL);

    /* A key naming a transport that cannot be loaded: that one's reason. */
    CHECK_ERROR(check_key(&builtins, path, "nccl_gin_queue_depth", "1"), ENGRAM_ERR_INVALID,
                "engram_config_set: key 'nccl_gin_queue_depth' is transport nccl_gin's, which cannot be loaded: "
                "needs NCCL >= 2.30.4, found 2.28.9");
    char want[16384];
    snprintf(want, sizeof(want),
             "key 'junk_x' is transport junk's, which cannot be loaded: plugin %s/libengram_transport_junk.so "
             "could not be loaded: ",
             junk);
    CHECK_ERROR(check_key(&builtins, path, "junk_x", "1"), ENGRAM_ERR_INVALID, want);
    snprintf(want, sizeof(want),
             "key 'badkeys_depth' is transport badkeys's, which cannot be loaded: plugin "
             "%s/libengram_transport_badkeys.so: default of badkeys_depth: '9' is out of range 0..4",
             plugin_dir);
    CHECK_ERROR(check_key(&builtins, path, "badkeys_depth", "1"), ENGRAM_ERR_INVALID, want);
    snprintf(want, sizeof(want),
             "key 'badprefix_depth' is transport badprefix's, which cannot be loaded: plugin "
             "%s/libengram_transport_badprefix.so: config key 'depth' is not named after its transport",
             plugin_dir);
    CHECK_ERROR(check_key(&builtins, path, "badprefix_depth", "1"), ENGRAM_ERR_INVALID, want);
    CHECK(strstr(key_log, "badkeys") == NULL);
    /* A module row whose file is not installed. */
    const engram_builtin_t module_rows[] = {{"nomodule", NULL, NULL, 0, true}};
    const engram_builtin_table_t modules = {module_rows, 1};
    CHECK_ERROR(check_key(&modules, "", "nomodule_x", "1"), ENGRAM_ERR_INVALID,
                "key 'nomodule_x' is transport nomodule's, which cannot be loaded: module not loaded: ");
    CHECK(strstr(engram_last_error(), "libengram_transport_nomodule.so is not installed") != NULL);

    /* The longest name wins, whether a built-in row's or a plugin's; a
     * plugin file of a built-in row's name is that row's. */
    const engram_builtin_t test_rows[] = {{"test", &fake_test, NULL, 0, false}};
    const engram_builtin_table_t tests = {test_rows, 1};
    CHECK_OK(check_key(&tests, plugin_dir, "testplug_queues", "2"));
    CHECK_OK(check_key(&tests, plugin_dir, "test_depth", "2"));
    CHECK_ERROR(check_key(&tests, plugin_dir, "test_queues", "2"), ENGRAM_ERR_INVALID,
                "unknown key 'test_queues': not a core key, and transport test declares no such key (its keys: "
                "test_depth)");
    const engram_builtin_t shadow_rows[] = {{"testplug", &fake_testplug, NULL, 0, false}};
    const engram_builtin_table_t shadow = {shadow_rows, 1};
    CHECK_OK(check_key(&shadow, plugin_dir, "testplug_other", "2"));
    CHECK_ERROR(check_key(&shadow, plugin_dir, "testplug_queues", "2"), ENGRAM_ERR_INVALID,
                "transport testplug declares no such key (its keys: testplug_other)");
    CHECK(strstr(key_log, "libengram_transport_") == NULL);

    /* A built-in whose key table breaks the naming rule is refused too. */
    const engram_builtin_t unnamed_rows[] = {{"unnamed", &fake_unnamed, NULL, 0, false}};
    const engram_builtin_table_t unnamed = {unnamed_rows, 1};
    CHECK_ERROR(check_key(&unnamed, "", "unnamed_window", "1"), ENGRAM_ERR_INVALID,
                "unnamed: config key 'window' is not named after its transport: transport unnamed declares only "
                "keys named unnamed_<rest>");

    /* A plugin directory of many files: every name is looked through, in
     * order, each once however often the path repeats the directory; the
     * key of the plugin that sorts after 70 others finds it. */
    char many_dir[4096], file[8192], target[8192];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(many_dir, sizeof(many_dir), "%s/many", tmp ? tmp : "/tmp");
    (void)mkdir(many_dir, 0700);
    for (int i = 0; i < 70; i++) {
        snprintf(file, sizeof(file), "%s/libengram_transport_a%02d.so", many_dir, i);
        FILE *f = fopen(file, "w");
        CHECK(f != NULL && fputs("not a shared object\n", f) >= 0 && fclose(f) == 0);
    }
    snprintf(file, sizeof(file), "%s/libengram_transport_testplug.so", many_dir);
    snprintf(target, sizeof(target), "%s/libengram_transport_testplug.so", plugin_dir);
    (void)unlink(file);
    CHECK(symlink(target, file) == 0);
    char twice[sizeof(many_dir) * 2 + 2];
    snprintf(twice, sizeof(twice), "%s:%s", many_dir, many_dir);
    engram_plugin_name_t *names = NULL;
    CHECK(engram_registry_plugin_names(twice, NULL, &names) == 71);
    CHECK(strcmp(names[0], "a00") == 0 && strcmp(names[69], "a69") == 0 && strcmp(names[70], "testplug") == 0);
    free(names);
    CHECK(engram_registry_plugin_names("", NULL, &names) == 0 && names == NULL);
    CHECK_OK(check_key(&builtins, twice, "testplug_queues", "2"));
    CHECK(strstr(key_log, "transport plugin 'testplug' loaded from") != NULL);
    CHECK(strstr(key_log, "libengram_transport_a") == NULL);

    /* A transport reading a key it did not declare gets an error naming it. */
    cfg = config_new("testplug", plugin_dir);
    engram_config_keyset_t none = {"someone", NULL, 0, "someone"};
    engram_config_view_impl_t impl;
    engram_config_view_t view;
    engram_config_view_init(&view, &impl, cfg, &none);
    int64_t v = 0;
    const char *text = NULL;
    CHECK_ERROR(view.get_int(&view, "testplug_queues", &v), ENGRAM_ERR_INVALID,
                "someone reads config key 'testplug_queues', which is neither a core key nor one it declares");
    CHECK_ERROR(view.get_string(&view, "timeout_ms", &text), ENGRAM_ERR_INVALID, "not a STRING or PATHS key");
    CHECK_ERROR(view.get_int(&view, "transport", &v), ENGRAM_ERR_INVALID, "not an INT or ENUM key");
    CHECK_OK(view.get_string(&view, "transport", &text));
    CHECK(strcmp(text, "testplug") == 0);
    CHECK_OK(view.get_int(&view, "timeout_ms", &v));
    CHECK(v == 30000);
    CHECK_OK(engram_config_set(cfg, "mode", "hybrid"));
    CHECK_OK(view.get_int(&view, "mode", &v));
    CHECK(v == ENGRAM_MODE_HYBRID);
    engram_config_destroy(cfg);
}

int main(int argc, char **argv)
{
    /* Before the first log call: the auto test reads the INFO line. */
    CHECK(setenv("ENGRAM_LOG_LEVEL", "info", 1) == 0);
    CHECK(argc == 2);
    char cwd[2048];
    CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
    char rel[2048];
    snprintf(rel, sizeof(rel), "%s", argv[1]);
    snprintf(plugin_dir, sizeof(plugin_dir), "%s/%s", cwd, dirname(rel));

    engram_group_t *g = group_new(1);
    test_builtins(g);
    test_unknown_backend(g);
    test_auto(g);
    test_plugin_works(g, plugin_dir);
    char v3_dir[sizeof(plugin_dir) + 8];
    snprintf(v3_dir, sizeof(v3_dir), "%s/v3", plugin_dir);
    test_plugin_works(g, v3_dir);
    const engram_transport_ops_t *current = NULL, *converted = NULL;
    CHECK_OK(engram_registry_load_plugin("testplug", plugin_dir, &current));
    CHECK_OK(engram_registry_load_plugin("testplug", v3_dir, &converted));
    CHECK(current != converted);
    test_plugins_refused();
    test_plugin_path_refused();
    test_transport_keys(g);
    engram_group_destroy(g);
    printf("registry_test: all passed\n");
    return 0;
}
