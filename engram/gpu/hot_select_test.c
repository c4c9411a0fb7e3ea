/* The hot-row cache's choice from a profile and its lookup table. */
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/hot_select.h"
#include "hal/log.h"
#include "tests/check.h"

static void test_pick_orders_by_count_then_index(void)
{
    /* 7 x4, 3 x3, 9 x3, 1 x1, 5 x1; -2 and 100 are outside the table */
    const int64_t trace[] = {9, 7, 3, 7, -2, 9, 1, 7, 3, 100, 9, 3, 7, 5};
    int64_t *rows = NULL;
    uint64_t n = 0;
    CHECK_OK(engram_hot_pick(trace, sizeof(trace) / sizeof(trace[0]), 0, 100, 3, &rows, &n));
    CHECK(n == 3 && rows[0] == 7 && rows[1] == 3 && rows[2] == 9);
    free(rows);
    CHECK_OK(engram_hot_pick(trace, sizeof(trace) / sizeof(trace[0]), 0, 100, 100, &rows, &n));
    CHECK(n == 5 && rows[3] == 1 && rows[4] == 5); /* every distinct in-range row, no more */
    free(rows);
    CHECK_OK(engram_hot_pick(trace, sizeof(trace) / sizeof(trace[0]), 4, 9, 10, &rows, &n));
    CHECK(n == 2 && rows[0] == 7 && rows[1] == 5); /* [lo, hi): 9 and 3 are outside */
    free(rows);
    CHECK_OK(engram_hot_pick(trace, 0, 0, 100, 3, &rows, &n));
    CHECK(n == 0 && rows == NULL);
    CHECK_OK(engram_hot_pick(trace, 3, 0, 100, 0, &rows, &n));
    CHECK(n == 0 && rows == NULL);
    CHECK_STATUS(engram_hot_pick(NULL, 3, 0, 100, 1, &rows, &n), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_hot_pick(trace, 3, 0, 100, 1, NULL, &n), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_hot_pick(trace, UINT64_MAX, 0, 100, 1, &rows, &n), ENGRAM_ERR_OVERFLOW);
}

static void test_hash_finds_every_row_and_only_those(void)
{
    enum { N = 5000, TOTAL = 1 << 20 };
    int64_t *rows = malloc(N * sizeof(*rows));
    CHECK(rows != NULL);
    for (int i = 0; i < N; i++)
        rows[i] = (int64_t)(((uint64_t)i * 2654435761u) % TOTAL) | 1; /* odd rows: distinct (i < TOTAL / 2) */
    int64_t *keys = NULL;
    uint32_t *vals = NULL, lg = 0;
    CHECK_OK(engram_hot_hash_build(rows, N, TOTAL, &keys, &vals, &lg));
    CHECK(((uint64_t)1 << lg) >= 2 * N && ((uint64_t)1 << lg) < 4 * N);
    engram_hot_hash_t h = {keys, vals, lg};
    for (int i = 0; i < N; i++)
        CHECK(engram_hot_find(&h, rows[i]) == (uint32_t)i);
    for (int64_t even = 0; even < 20000; even += 2)
        CHECK(engram_hot_find(&h, even) == ENGRAM_HOT_MISS);
    CHECK(engram_hot_find(&h, -1) == ENGRAM_HOT_MISS);
    engram_hot_hash_t none = {NULL, NULL, 0};
    CHECK(engram_hot_find(&none, rows[0]) == ENGRAM_HOT_MISS);
    free(keys);
    free(vals);
    free(rows);
}

static void test_hash_refuses_repeats_and_bad_rows(void)
{
    int64_t *keys = NULL;
    uint32_t *vals = NULL, lg = 0;
    const int64_t twice[] = {4, 8, 4};
    CHECK_STATUS(engram_hot_hash_build(twice, 3, 10, &keys, &vals, &lg), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "row 4 is listed twice (entries 0 and 2)") != NULL);
    const int64_t outside[] = {4, 10};
    CHECK_STATUS(engram_hot_hash_build(outside, 2, 10, &keys, &vals, &lg), ENGRAM_ERR_BAD_INDEX);
    CHECK(strstr(engram_last_error(), "row 10 (entry 1 of the list) is outside the table's 10 rows") != NULL);
    const int64_t negative[] = {-3};
    CHECK_STATUS(engram_hot_hash_build(negative, 1, 10, &keys, &vals, &lg), ENGRAM_ERR_BAD_INDEX);
    CHECK_STATUS(engram_hot_hash_build(twice, 0, 10, &keys, &vals, &lg), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_hot_hash_build(twice, (uint64_t)UINT32_MAX, 10, &keys, &vals, &lg), ENGRAM_ERR_OVERFLOW);
    CHECK(keys == NULL && vals == NULL && lg == 0); /* untouched on every refusal */
}

int main(void)
{
    test_pick_orders_by_count_then_index();
    test_hash_finds_every_row_and_only_those();
    test_hash_refuses_repeats_and_bad_rows();
    return 0;
}
