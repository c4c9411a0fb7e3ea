#include "tools/bench/bench.h"

/* fp8 rows carry one 4-byte pack of four UE8M0 scales per 512 elements
 * (one scale per 128), as DeepEP's FP8 engram layout. */
uint32_t bench_scale_packs(const bench_case_t *c)
{
    return c->fp8 ? (uint32_t)(((uint64_t)c->row_bytes + 511) / 512) : 0;
}

void bench_indices(const bench_case_t *c, int rank, uint64_t step, int64_t *out)
{
    if (c->trace) {
        index_trace_step(c->trace, (uint64_t)rank + step, out);
        return;
    }
    table_gen_indices(c->entries_per_rank * (uint64_t)c->ranks, c->dist, c->seed, rank, step,
                      (uint64_t)c->tokens * c->entries_per_token, out);
}
