#include "transports/mlx5dv/mlx5_fetch_checks.h"

#include "tests/check.h"
#include "tools/bench/bench.h"

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
        bench_case_t c = {.ranks = engram_group_size(h->g), .entries_per_rank = h->params.entries_per_rank,
                          .tokens = MLX5_CHECK_TOKENS, .entries_per_token = MLX5_CHECK_EPT, .dist = (bench_dist_t)d,
                          .seed = seed + (uint64_t)d};
        bench_make_indices(&c, engram_group_rank(h->g), 0, idx);
        for (int col = 0; col <= (h->params.scale_packs ? 1 : 0); col++) {
            bool match = false;
            CHECK_OK(harness_fetch_check(h, idx, MLX5_CHECK_TOKENS, col, &match));
            CHECK(match);
        }
    }
}
