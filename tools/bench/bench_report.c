#include <stdio.h>

#include "tools/bench/bench.h"

static const char *indices(const bench_case_t *c)
{
    return c->trace ? "trace" : c->dist == TABLE_GEN_ZIPF ? "zipf" : "uniform";
}

/* What the rows stand for: FP8 with scales, bf16 elements (DeepEP's
 * default), or bytes where a row holds no whole number of bf16 elements. */
static const char *dtype(const bench_case_t *c)
{
    if (c->fp8)
        return c->sf_col_major ? "fp8+sf(col)" : "fp8+sf(row)";
    return c->row_bytes % 2 == 0 ? "bf16" : "bytes";
}

void bench_print_human(const bench_case_t *c, const bench_result_t *r)
{
    printf("%-8s %-6s ranks=%d local=%d rows=%ux%u %uB %-11s %-7s issue %8.1f us  wait %7.1f us  %6.2f GB/s "
           "%7.2f MPPS | ref memcpy-gather %7.2f MPPS | ratio %.2f | check %s\n",
           r->transport, c->hybrid ? "hybrid" : "direct", c->ranks, c->local_size, c->tokens, c->entries_per_token,
           c->row_bytes, dtype(c), indices(c), r->issue_us, r->wait_us, r->gbps,
           r->mpps, r->ref_mpps, r->ratio, r->check_ok ? "ok" : "mismatch");
    printf("  stats (all ranks): %llu fetches, %llu rows, %llu repeats served by dedup, %llu bad rows, %.3f s in "
           "engram_wait\n",
           (unsigned long long)r->fetches, (unsigned long long)r->rows, (unsigned long long)r->repeats,
           (unsigned long long)r->bad_rows, r->wait_s);
    fflush(stdout);
}

void bench_print_json(const bench_case_t *c, const bench_result_t *r)
{
    printf("{\"transport\": \"%s\", \"mode\": \"%s\", \"ranks\": %d, \"local_size\": %d, \"rows\": %llu, "
           "\"row_bytes\": %u, \"fp8\": %s, \"indices\": \"%s\", \"issue_us\": %.3f, \"wait_us\": %.3f, \"gbps\": %.4f, \"mpps\": %.4f, "
           "\"ref_name\": \"memcpy_gather\", \"ref_mpps\": %.4f, \"ratio\": %.4f, \"check\": \"%s\"}\n",
           r->transport, c->hybrid ? "hybrid" : "direct", c->ranks, c->local_size, (unsigned long long)c->tokens * c->entries_per_token,
           c->row_bytes, c->fp8 ? "true" : "false", indices(c), r->issue_us, r->wait_us, r->gbps, r->mpps, r->ref_mpps, r->ratio,
           r->check_ok ? "ok" : "mismatch");
    fflush(stdout);
}
