/* Engram-level fetch checks shared by the model-tier error test and the
 * hardware-tier test (test only). */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_FETCH_CHECKS_H
#define ENGRAM_TRANSPORTS_MLX5DV_FETCH_CHECKS_H

#include <stdbool.h>
#include <stdint.h>

#include "tests/engram_harness.h"

#define MLX5_CHECK_TOKENS 64u
#define MLX5_CHECK_EPT 6u

/* Table params: bf16 rows (scale_packs 0) or fp8 rows with scale packs. */
engram_table_params_t mlx5_check_params(bool fp8);

/* Fetches uniform then zipf indices (seeded) and compares with the host
 * reference, in both scale layouts when the table has scales. */
void mlx5_check_fetches(harness_t *h, uint64_t seed);

#endif
