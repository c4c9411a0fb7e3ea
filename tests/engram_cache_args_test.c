/* The hot-row cache's and the GPU path report's refusals that every build
 * makes (the GPU tier's gpu_fetch_test covers the cache itself): a NULL or
 * host-receive table, a table not yet written or being written, NULL
 * arguments, sizes past the cache's. */
#include <string.h>

#include "tests/check.h"
#include "tests/engram_harness.h"

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = 64,
                                             .row_bytes = 64, .entries_per_token = 2, .max_tokens = 4,
                                             .recv = ENGRAM_RECV_HOST};

static void expect_error(engram_status_t st, engram_status_t want, const char *text)
{
    CHECK_STATUS(st, want);
    CHECK(strstr(engram_last_error(), text) != NULL);
}

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &params));
    const int64_t rows[2] = {0, 1};
    expect_error(engram_table_cache_rows(NULL, rows, 2), ENGRAM_ERR_INVALID, "table is NULL");
    expect_error(engram_table_cache_profile(NULL, rows, 2, 1), ENGRAM_ERR_INVALID, "table is NULL");
    expect_error(engram_table_cache_rows(h.table, rows, 2), ENGRAM_ERR_INVALID, "for recv=CUDA tables");
    expect_error(engram_table_cache_profile(h.table, rows, 2, 1), ENGRAM_ERR_INVALID, "for recv=CUDA tables");
    expect_error(engram_table_cache_rows(h.table, rows, 0), ENGRAM_ERR_INVALID, "for recv=CUDA tables");

    engram_gpu_path_report_t r = {.size = sizeof(r)};
    expect_error(engram_gpu_path_report(NULL, 1, &r), ENGRAM_ERR_INVALID, "must not be NULL");
    expect_error(engram_gpu_path_report(h.ctx, 1, NULL), ENGRAM_ERR_INVALID, "must not be NULL");
    r.size = 8;
    CHECK(engram_gpu_path_report(h.ctx, 1, &r) != ENGRAM_OK); /* too small: refused (or no GPU path here) */
    r.size = sizeof(r);
    engram_status_t st = engram_gpu_path_report(h.ctx, 1, &r);
    CHECK(st == ENGRAM_OK || st == ENGRAM_ERR_UNSUPPORTED); /* a build or host without a GPU says so */
    if (st == ENGRAM_OK)
        CHECK(r.path != NULL && r.reason != NULL);
    harness_close(&h);
    return 0;
}

int main(void)
{
    CHECK_OK(engram_group_fork_run(1, 0, rank_main, NULL, NULL));
    printf("engram_cache_args_test: ok\n");
    return 0;
}
