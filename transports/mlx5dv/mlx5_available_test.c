/* Without the model linked, mlx5dv is available exactly when rdma-core
 * lists an mlx5 device; otherwise it is passed over with "no mlx5 device":
 * transport=mlx5dv is refused with that reason and auto chooses another. */
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

#include "hal/config.h"
#include "hal/config_keys.h"
#include "hal/registry.h"
#include "tests/check.h"
#include "transports/builtins.h"
#include "transports/mlx5dv/mlx5dv.h"

static bool mlx5_device_listed(void)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    bool found = false;
    for (int i = 0; list != NULL && i < n; i++)
        found |= mlx5dv_is_supported(list[i]);
    if (list != NULL)
        ibv_free_device_list(list);
    return found;
}

int main(void)
{
    engram_group_t *g = NULL;
    CHECK_OK(engram_group_solo_create(&g));
    const char *why = NULL;
    bool listed = mlx5_device_listed();
    CHECK(engram_mlx5dv_ops.available(g, &why) == listed);
    engram_config_t *cfg = NULL;
    CHECK_OK(engram_config_create(&cfg));
    CHECK_OK(engram_config_set(cfg, "mlx5dv_device", "mlx5_no_such_device"));
    char buf[64];
    CHECK_OK(engram_config_get(cfg, "mlx5dv_device", buf, sizeof(buf)));
    CHECK(strcmp(buf, "mlx5_no_such_device") == 0);
    const engram_transport_ops_t *ops = NULL;
    if (!listed) {
        CHECK(why != NULL && strcmp(why, "no mlx5 device") == 0);
        CHECK_OK(engram_config_set(cfg, "transport", "mlx5dv"));
        CHECK_STATUS(engram_registry_select(g, cfg, engram_transport_builtins(), &ops), ENGRAM_ERR_UNSUPPORTED);
        CHECK(strstr(engram_last_error(), "transport 'mlx5dv' cannot run here: no mlx5 device") != NULL);
        CHECK_OK(engram_config_set(cfg, "transport", "auto"));
        CHECK_OK(engram_registry_select(g, cfg, engram_transport_builtins(), &ops));
        CHECK(ops != &engram_mlx5dv_ops);
    } else {
        /* A device is there, but not under that name: open says so. */
        engram_transport_t *t = NULL;
        CHECK_STATUS(engram_transport_open(&engram_mlx5dv_ops, g, cfg, &t), ENGRAM_ERR_NOT_FOUND);
        CHECK(strstr(engram_last_error(), "mlx5_no_such_device") != NULL);
    }
    engram_config_destroy(cfg);
    engram_group_destroy(g);
    printf("mlx5_available_test: ok (%s)\n", listed ? "mlx5 device present" : "no mlx5 device");
    return 0;
}
