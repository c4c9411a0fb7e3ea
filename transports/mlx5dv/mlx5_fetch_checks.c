#include "transports/mlx5dv/mlx5_fetch_checks.h"

#include "tests/check.h"
#include "tests/table_gen.h"

engram_table_params_t mlx5_check_params(bool fp8)
{
    return (engram_table_params_t){.size = sizeof(engram_table_params_t), .entries_per_rank = 2000,
                                   .row_bytes = 256, .entries_per_token = MLX5_CHECK_EPT,
                                   .max_tokens = MLX5_CHECK_TOKENS, .scale_packs = fp8 ? 1 : 0,
                                   .recv = ENGRAM_RECV_HOST};
}

void mlx5_check_fetches(harness_t *h, uint64_t seed)
{
    int64_t idx[MLX5_CHECK_TOKENS * MLX5_CHECK_EPT];
    for (int d = 0; d < 2; d++) {
        table_gen_indices(h->params.entries_per_rank * (uint64_t)engram_group_size(h->g), (table_gen_dist_t)d,
                          seed + (uint64_t)d, engram_group_rank(h->g), 0,
                          (uint64_t)MLX5_CHECK_TOKENS * MLX5_CHECK_EPT, idx);
        for (int col = 0; col <= (h->params.scale_packs ? 1 : 0); col++) {
            bool match = false;
            CHECK_OK(harness_fetch_check(h, idx, MLX5_CHECK_TOKENS, col, &match));
            CHECK(match);
        }
    }
}
