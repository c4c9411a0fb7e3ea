/* engram_bench internals: options, deterministic data, one rank's run,
 * reporting. */
#ifndef ENGRAM_TOOLS_BENCH_H
#define ENGRAM_TOOLS_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include "engram/engram.h"

typedef enum { BENCH_DIST_UNIFORM = 0, BENCH_DIST_ZIPF = 1 } bench_dist_t;

typedef struct bench_case {
    int ranks;
    int local_size;
    const char *transport; /* NULL = configuration (auto by default) */
    bool hybrid;
    uint64_t entries_per_rank;
    uint32_t row_bytes;
    uint32_t tokens;
    uint32_t entries_per_token;
    bool fp8;
    bool sf_col_major;
    bench_dist_t dist;
    int iters;
    int warmup;
    bool concurrent;
    uint64_t seed;
} bench_case_t;

/* What a case measured; medians over iterations, then over ranks. */
typedef struct bench_result {
    char transport[32];
    double issue_us, wait_us; /* median issue and wait time of one fetch */
    double fetch_us;          /* median issue + wait */
    double ref_us;            /* median time of the memcpy gather reference */
    double mpps, ref_mpps, gbps, ratio;
    bool check_ok;
    int status; /* engram_status_t of the run, OK if it ran */
} bench_result_t;

/* Row contents and scales are a pure function of the global index. */
void bench_fill_row(uint64_t global_idx, uint32_t row_bytes, uint8_t *row);
uint32_t bench_scale(uint64_t global_idx, uint32_t pack);
uint32_t bench_scale_packs(const bench_case_t *c);
/* Indices for one rank's fetch number `step`: tokens * entries_per_token,
 * all in range; a new set per step, as a model's decode steps look up new
 * n-grams (so timed rows are not left in the caches by the step before). */
void bench_make_indices(const bench_case_t *c, int rank, uint64_t step, int64_t *out);

/* Runs the case on forked ranks; fills *res on success. */
engram_status_t bench_run_case(const bench_case_t *c, bench_result_t *res);

void bench_print_human(const bench_case_t *c, const bench_result_t *r);
void bench_print_json(const bench_case_t *c, const bench_result_t *r);

#endif
