/* Deterministic table contents and index sets, shared by the tests, the
 * benches and anything else that checks fetched rows bit for bit: a row's
 * bytes and scales are a pure function of its global index, so a checker
 * regenerates what it expects instead of holding a copy of the table.
 * Depends on nothing, so every layer may use it. */
#ifndef ENGRAM_TESTS_TABLE_GEN_H
#define ENGRAM_TESTS_TABLE_GEN_H

#include <stdint.h>

typedef enum { TABLE_GEN_UNIFORM = 0, TABLE_GEN_ZIPF = 1 } table_gen_dist_t;

/* The row_bytes bytes of global row global_idx. */
void table_gen_row(uint64_t global_idx, uint32_t row_bytes, uint8_t *row);
/* Scale pack number `pack` of global row global_idx. */
uint32_t table_gen_scale(uint64_t global_idx, uint32_t pack);
/* n indices in [0, total_rows) (total_rows > 0) for one rank's fetch number
 * `step`: a new set per step, as a model's decode steps look up new n-grams
 * (so timed rows are not left in the caches by the step before). Zipf is
 * s ~ 1 with the hot rows scrambled over the owners. */
void table_gen_indices(uint64_t total_rows, table_gen_dist_t dist, uint64_t seed, int rank, uint64_t step, uint64_t n,
                       int64_t *out);

#endif
