/* The public list of backends (<engram/backend.h>) over this build's
 * built-in table and a plugin directory of the loader's test plugins:
 * every row with its origin and state, the reasons of absent and
 * unavailable ones (a module not installed beside a statically linked
 * program, a plugin the loader refuses, one that says it cannot run, one
 * whose open fails), what an available one offers, its keys, and a caller
 * built against an older, smaller engram_backend_info_t. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engram/engram.h"
#include "hal/testdata/check_error.h"

static engram_backend_info_t get(const engram_backend_list_t *list, const char *name)
{
    for (int i = 0; i < engram_backend_list_count(list); i++) {
        engram_backend_info_t b = {.size = sizeof(b)};
        CHECK_OK(engram_backend_list_get(list, i, &b));
        if (strcmp(b.name, name) == 0)
            return b;
    }
    fprintf(stderr, "backend %s not listed\n", name);
    exit(1);
}

static void check_state(const engram_backend_list_t *list, const char *name, engram_backend_origin_t origin,
                        engram_backend_state_t state, const char *reason)
{
    engram_backend_info_t b = get(list, name);
    if (b.origin != origin || b.state != state || strstr(b.reason, reason) == NULL) {
        fprintf(stderr, "%s: origin %d state %d reason '%s'; wanted %d, %d, '%s'\n", name, b.origin, b.state,
                b.reason, origin, state, reason);
        exit(1);
    }
    if (state != ENGRAM_BACKEND_AVAILABLE)
        CHECK(b.caps == 0 && b.max_queues == 0 && b.selected[0] == '\0');
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    char plugin_dir[4096];
    CHECK(realpath(dirname(argv[1]), plugin_dir) != NULL);
    engram_group_t *g = NULL;
    CHECK_OK(engram_group_solo_create(&g));
    engram_config_t *cfg = NULL;
    CHECK_OK(engram_config_create(&cfg));
    engram_backend_list_t *list = NULL;
    CHECK_ERROR(engram_backend_list_create(NULL, g, &list), ENGRAM_ERR_INVALID, "NULL config");
    CHECK_ERROR(engram_backend_list_create(cfg, NULL, &list), ENGRAM_ERR_INVALID, "NULL group");
    CHECK_ERROR(engram_backend_list_create(cfg, g, NULL), ENGRAM_ERR_INVALID, "NULL out");

    /* No plugin_path: the built-in table alone, in its order. */
    CHECK_OK(engram_backend_list_create(cfg, g, &list));
    const char *names[] = {"loopback", "ucx", "nccl_gin", "mlx5dv"};
    CHECK(engram_backend_list_count(list) == 4);
    for (int i = 0; i < 4; i++) {
        engram_backend_info_t b = {.size = sizeof(b)};
        CHECK_OK(engram_backend_list_get(list, i, &b));
        CHECK(strcmp(b.name, names[i]) == 0 && b.origin != ENGRAM_BACKEND_PLUGIN);
        if (i > 0) /* a module beside a statically linked program, or not in this build */
            CHECK(b.state == ENGRAM_BACKEND_ABSENT && b.reason[0] != '\0');
    }
    engram_backend_info_t lo = get(list, "loopback");
    CHECK(lo.origin == ENGRAM_BACKEND_BUILT_IN && lo.state == ENGRAM_BACKEND_AVAILABLE && lo.reason[0] == '\0');
    CHECK(lo.caps & ENGRAM_CAP_HOST_INITIATED && !(lo.caps & ENGRAM_CAP_GPU_INITIATED));
    CHECK(lo.max_queues >= 1 && (lo.read_kinds & ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST)));
    check_state(list, "ucx", ENGRAM_BACKEND_MODULE, ENGRAM_BACKEND_ABSENT, "module not loaded: ");
    const char *modules = engram_backend_module_dir();
    CHECK(strlen(modules) > strlen("/lib/engram") && strcmp(modules + strlen(modules) - 11, "/lib/engram") == 0);
    engram_backend_list_destroy(list);

    /* The plugins on plugin_path follow, by name: loaded and available,
     * refused by the loader, or saying they cannot run. */
    CHECK_OK(engram_config_set(cfg, "plugin_path", plugin_dir));
    CHECK_OK(engram_backend_list_create(cfg, g, &list));
    CHECK(engram_backend_list_count(list) > 4);
    char prev[ENGRAM_BACKEND_NAME_MAX + 1] = "";
    for (int i = 4; i < engram_backend_list_count(list); i++) {
        engram_backend_info_t b = {.size = sizeof(b)};
        CHECK_OK(engram_backend_list_get(list, i, &b));
        CHECK(b.origin == ENGRAM_BACKEND_PLUGIN && strcmp(prev, b.name) < 0);
        snprintf(prev, sizeof(prev), "%s", b.name);
    }
    engram_backend_info_t tp = get(list, "testplug");
    CHECK(tp.origin == ENGRAM_BACKEND_PLUGIN && tp.state == ENGRAM_BACKEND_AVAILABLE);
    CHECK(tp.caps == ENGRAM_CAP_HOST_INITIATED && tp.max_queues == 4 && tp.max_outstanding == 64);
    CHECK(strcmp(tp.selected, "testplug: 4 queues, 0 gets, 0 doorbells, 0 flushes") == 0);
    check_state(list, "gpuonly", ENGRAM_BACKEND_PLUGIN, ENGRAM_BACKEND_UNAVAILABLE, "loader test plugin");
    check_state(list, "nosym", ENGRAM_BACKEND_PLUGIN, ENGRAM_BACKEND_ABSENT, "libengram_transport_nosym.so exports");

    /* A plugin_path file named like a built-in row is that row's module (as
     * selection and key checks read it): listed once, as the row, and not
     * opened as a plugin. */
    char shadow[4096], file[8192];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(shadow, sizeof(shadow), "%s/shadow", tmp ? tmp : "/tmp");
    (void)mkdir(shadow, 0700);
    snprintf(file, sizeof(file), "%s/libengram_transport_ucx.so", shadow);
    char real[4096];
    CHECK(realpath(argv[1], real) != NULL);
    (void)unlink(file);
    CHECK(symlink(real, file) == 0);
    engram_config_t *shadowed = NULL;
    CHECK_OK(engram_config_create(&shadowed));
    CHECK_OK(engram_config_set(shadowed, "plugin_path", shadow));
    engram_backend_list_t *rows = NULL;
    CHECK_OK(engram_backend_list_create(shadowed, g, &rows));
    CHECK(engram_backend_list_count(rows) == 4);
    check_state(rows, "ucx", ENGRAM_BACKEND_MODULE, ENGRAM_BACKEND_ABSENT, "");
    engram_backend_list_destroy(rows);
    engram_config_destroy(shadowed);

    /* Keys: the core's are engram_config_print's; these are the backends'. */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    engram_backend_list_print_keys(list, cfg, f);
    char text[8192] = "";
    rewind(f);
    text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
    fclose(f);
    CHECK(strstr(text, "testplug_queues") != NULL && strstr(text, "\ntransport ") == NULL);

    /* An older caller: the fields its size covers, nothing past them. */
    engram_backend_info_t old;
    memset(&old, 0x5a, sizeof(old));
    old.size = offsetof(engram_backend_info_t, caps);
    CHECK_OK(engram_backend_list_get(list, 0, &old));
    CHECK(strcmp(old.name, "loopback") == 0 && old.state == ENGRAM_BACKEND_AVAILABLE);
    CHECK(old.size == offsetof(engram_backend_info_t, caps) && old.caps == 0x5a5a5a5au);
    old.size = 1;
    CHECK_ERROR(engram_backend_list_get(list, 0, &old), ENGRAM_ERR_INVALID, "out->size is 1");
    engram_backend_info_t b = {.size = sizeof(b)};
    char past[64];
    snprintf(past, sizeof(past), "backend %d of a list of %d", engram_backend_list_count(list),
             engram_backend_list_count(list));
    CHECK_ERROR(engram_backend_list_get(list, engram_backend_list_count(list), &b), ENGRAM_ERR_INVALID, past);
    CHECK_ERROR(engram_backend_list_get(list, -1, &b), ENGRAM_ERR_INVALID, "backend -1 of");
    CHECK_ERROR(engram_backend_list_get(NULL, 0, &b), ENGRAM_ERR_INVALID, "list and out must not be NULL");
    engram_backend_list_destroy(list);

    /* An available backend whose open fails: unavailable, with the open's error. */
    CHECK_OK(engram_config_set(cfg, "testplug_queues", "7"));
    CHECK_OK(engram_backend_list_create(cfg, g, &list));
    check_state(list, "testplug", ENGRAM_BACKEND_PLUGIN, ENGRAM_BACKEND_UNAVAILABLE, "open failed: ");
    check_state(list, "testplug", ENGRAM_BACKEND_PLUGIN, ENGRAM_BACKEND_UNAVAILABLE, "testplug_queues");
    engram_backend_list_destroy(list);

    CHECK(engram_backend_list_count(NULL) == 0);
    engram_backend_list_destroy(NULL);
    engram_config_destroy(cfg);
    engram_group_destroy(g);
    printf("backend_list_test: all passed\n");
    return 0;
}
