/* Hardware tier: the engram fetch through mlx5dv on a real mlx5 device
 * (4 ranks on this host; bf16 and fp8+scales, direct and hybrid 2x2).
 * Without a device it prints that it did not run and exits 77, which is
 * not a pass: the test is tagged "hardware" and left out of the default
 * run. Device: config mlx5dv_device (ENGRAM_MLX5DV_DEVICE), default the first. */
#include <stdio.h>

#include "hal/registry.h"
#include "tests/check.h"
#include "transports/mlx5dv/mlx5_fetch_checks.h"
#include "transports/mlx5dv/mlx5dv.h"

#define EXIT_DID_NOT_RUN 77

static int rank_main(engram_group_t *g, void *arg)
{
    bool hybrid = *(bool *)arg;
    for (int fp8 = 0; fp8 < 2; fp8++) {
        engram_table_params_t p = mlx5_check_params(fp8);
        harness_t h;
        CHECK_OK(harness_open(&h, g, "mlx5dv", hybrid, &p));
        CHECK_OK(harness_write(&h));
        mlx5_check_fetches(&h, 17);
        harness_close(&h);
    }
    return 0;
}

int main(void)
{
    const char *why = NULL;
    if (!engram_mlx5dv_ops.available(NULL, &why)) {
        printf("mlx5_hw_test: DID NOT RUN: %s\n", why ? why : "mlx5dv unavailable");
        return EXIT_DID_NOT_RUN;
    }
    static const struct { int local; bool hybrid; } shapes[] = {{4, false}, {2, false}, {2, true}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        bool hybrid = shapes[s].hybrid;
        CHECK_OK(engram_group_fork_run(4, shapes[s].local, rank_main, &hybrid, NULL));
    }
    printf("mlx5_hw_test: ok on a real mlx5 device\n");
    return 0;
}
