/* Through the engram layer on the software NIC model: fetches are right,
 * then the model shrinks what peers may read (as if an owner had
 * deregistered part of its shard) and the next fetch's wait fails with
 * the remote access error CQE's syndrome named. */
#include <string.h>

#include "tests/check.h"
#include "transports/mlx5dv/mlx5_fetch_checks.h"
#include "transports/mlx5dv/testing/mlx5_model.h"

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    engram_table_params_t p = mlx5_check_params(false);
    harness_t h;
    CHECK_OK(harness_open(&h, g, "mlx5dv", false, &p));
    CHECK(strcmp(engram_context_transport(h.ctx), "mlx5dv") == 0);
    CHECK_OK(harness_write(&h));
    mlx5_check_fetches(&h, 5);
    CHECK_OK(engram_group_barrier(g));
    /* Every rank's shard readable only in its first row: a row past it fails. */
    engram_mlx5_model_limit_peers(p.row_bytes);
    int peer = (engram_group_rank(g) + 1) % engram_group_size(g);
    int64_t idx[MLX5_CHECK_EPT];
    for (uint32_t e = 0; e < MLX5_CHECK_EPT; e++)
        idx[e] = (int64_t)((uint64_t)peer * p.entries_per_rank + 10 + e);
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(h.table, idx, 1, 0, &f));
    CHECK_STATUS(engram_wait(f, NULL, NULL), ENGRAM_ERR_TRANSPORT);
    CHECK(strstr(engram_last_error(), "remote access error (syndrome 0x13") != NULL);
    engram_fetch_release(f);
    engram_mlx5_model_stats_t s;
    engram_mlx5_model_stats(&s);
    CHECK(s.violations == 0 && s.error_cqes >= 1);
    CHECK_OK(engram_group_barrier(g));
    harness_close(&h);
    return 0;
}

int main(void)
{
    CHECK_OK(engram_group_fork_run(4, 4, rank_main, NULL, NULL));
    printf("mlx5_engram_error_test: ok\n");
    return 0;
}
