/* engram_bench internals: options, one case's memory, one rank's run,
 * reporting. Row contents come from //tests:table_gen. */
#ifndef ENGRAM_TOOLS_BENCH_H
#define ENGRAM_TOOLS_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include "engram/engram.h"
#include "tests/table_gen.h"
#include "tools/trace/index_trace.h"

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
    table_gen_dist_t dist;
    const index_trace_t *trace; /* --indices: replayed instead of dist */
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
    /* every rank's table counters (engram_table_stats), summed */
    uint64_t fetches, rows, repeats, bad_rows;
    double wait_s;
    int status; /* engram_status_t of the run, OK if it ran */
    char error[256]; /* with status: the first failed rank's message */
} bench_result_t;

uint32_t bench_scale_packs(const bench_case_t *c);
/* The indices of one rank's fetch number `step` (0 is the checked one):
 * the trace's step (rank + step) mod steps, or a generated set. */
void bench_indices(const bench_case_t *c, int rank, uint64_t step, int64_t *out);

/* Bytes a case needs at its peak: every rank's own memory plus what the
 * ranks share (the memcpy reference table and its scales). */
typedef struct bench_memory {
    uint64_t shard, recv, scales, own; /* per rank: shard, receive slots, replicated scales; all it holds */
    uint64_t shared;
    uint64_t total; /* ranks * own + shared */
} bench_memory_t;

/* ENGRAM_ERR_OVERFLOW when a size does not fit in 64 bits. */
engram_status_t bench_memory_estimate(const bench_case_t *c, int fetch_slots, bench_memory_t *out);
/* Refuses (ENGRAM_ERR_NOMEM, with the estimate) a case that cannot fit in
 * this host's available memory. */
engram_status_t bench_memory_check(const bench_case_t *c);

/* Runs the case on forked ranks; fills *res on success. */
engram_status_t bench_run_case(const bench_case_t *c, bench_result_t *res);

void bench_print_human(const bench_case_t *c, const bench_result_t *r);
void bench_print_json(const bench_case_t *c, const bench_result_t *r);

#endif
