/* The real built-in table: every backend has a row, absent ones say why
 * (the NCCL version comparison done in Starlark is checked here against
 * argv[1], @sys_nccl's VERSION), and auto on a one-rank group picks
 * loopback with the reasons for passing over the higher-priority rows.
 * Where nccl_gin is built (NCCL >= 2.30.4) and this machine has no GPU,
 * selecting it names that reason instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/config_keys.h"
#include "hal/registry.h"
#include "transports/builtins.h"
#include "hal/testdata/check_error.h"

/* "2.28.9" < "2.30.4", numerically per component. */
static bool older_than(const char *version, int major, int minor, int patch)
{
    int v[3] = {0, 0, 0};
    if (sscanf(version, "%d.%d.%d", &v[0], &v[1], &v[2]) < 1)
        return false;
    int want[3] = {major, minor, patch};
    for (int i = 0; i < 3; i++)
        if (v[i] != want[i])
            return v[i] < want[i];
    return false;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    const char *nccl_version = argv[1];
    const char *names[] = {"loopback", "ucx", "nccl_gin", "mlx5dv"};
    const engram_builtin_table_t *table = engram_transport_builtins();
    CHECK(table->count == 4);
    /* Each built-in's own keys: sound, and the ones it is known for. */
    const char *own_key[] = {NULL, "ucx_window", "nccl_gin_queue_depth", "mlx5dv_device"};
    for (int i = 0; i < 4; i++) {
        const engram_builtin_t *b = &table->entries[i];
        engram_config_keyset_t keys = engram_transport_keys(b->ops);
        CHECK_OK(engram_config_check_decls(&keys));
        if (b->ops != NULL && own_key[i] != NULL)
            CHECK(keys.count >= 1 && strcmp(keys.keys[0].name, own_key[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        const engram_builtin_t *b = &table->entries[i];
        CHECK(strcmp(b->name, names[i]) == 0);
        if (b->ops == NULL)
            CHECK(b->absent_reason != NULL && b->absent_reason[0] != '\0');
        else
            CHECK(strcmp(b->ops->name, b->name) == 0);
    }
    const engram_builtin_t *loopback = &table->entries[0];
    const engram_builtin_t *nccl_gin = &table->entries[2];
    CHECK(loopback->ops != NULL);
    CHECK(nccl_gin->auto_priority > table->entries[3].auto_priority);
    CHECK(table->entries[3].auto_priority > loopback->auto_priority);
    CHECK(loopback->auto_priority > table->entries[1].auto_priority);
    if (older_than(nccl_version, 2, 30, 4)) {
        char want[128];
        snprintf(want, sizeof(want), "needs NCCL >= 2.30.4, found %s", nccl_version);
        CHECK(strcmp(nccl_gin->absent_reason, want) == 0);
    }

    engram_group_t *g = NULL;
    CHECK_OK(engram_group_solo_create(&g));
    engram_config_t *cfg = NULL;
    CHECK_OK(engram_config_create(&cfg));
    const engram_transport_ops_t *ops = NULL;
    char want[512];
    const char *why = NULL;
    if (nccl_gin->ops == NULL)
        snprintf(want, sizeof(want), "transport 'nccl_gin' is not in this build: %s", nccl_gin->absent_reason);
    else if (!nccl_gin->ops->available(g, &why))
        snprintf(want, sizeof(want), "transport 'nccl_gin' cannot run here: %s", why);
    CHECK_OK(engram_config_set(cfg, "transport", "nccl_gin"));
    if (nccl_gin->ops == NULL || why != NULL)
        CHECK_ERROR(engram_registry_select(g, cfg, table, &ops), ENGRAM_ERR_UNSUPPORTED, want);
    CHECK_OK(engram_config_set(cfg, "transport", "loopback"));
    CHECK_OK(engram_registry_select(g, cfg, table, &ops));
    CHECK(ops == loopback->ops);
    /* Nothing above loopback can run here (on a CPU-tier machine), so auto
     * must land there. */
    ops = NULL;
    CHECK_OK(engram_config_set(cfg, "transport", "auto"));
    CHECK_OK(engram_registry_select(g, cfg, table, &ops));
    CHECK(ops == loopback->ops);
    engram_config_destroy(cfg);
    engram_group_destroy(g);
    printf("builtins_test: all passed\n");
    return 0;
}
