/* engram_table_stats on 2 forked ranks (loopback, dedup=on): the counters
 * follow fetches, their rows, repeats and bad indices; a caller's smaller
 * struct gets only the fields it has room for; bad arguments are refused. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "tests/engram_harness.h"

#define EPR 128u
#define EPT 4u
#define TOKENS 8u

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = 32, .entries_per_token = EPT, .max_tokens = TOKENS,
                                             .recv = ENGRAM_RECV_HOST};

static engram_table_stats_t stats_of(const harness_t *h)
{
    engram_table_stats_t s = {.size = sizeof(s)};
    CHECK_OK(engram_table_stats(h->table, &s));
    CHECK(s.size == sizeof(s));
    return s;
}

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    setenv("ENGRAM_DEDUP", "on", 1);
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &params));
    CHECK_OK(harness_write(&h));
    engram_table_stats_t s = stats_of(&h);
    CHECK(s.fetches == 0 && s.rows == 0 && s.bytes == 0 && s.bad_rows == 0 && s.repeats == 0);
    CHECK(strcmp(s.path, "transport") == 0);
    CHECK(s.gather_threads == 0);
    CHECK(s.shard_bytes >= EPR * 32u);

    int64_t idx[TOKENS * EPT];
    for (uint32_t i = 0; i < TOKENS * EPT; i++)
        idx[i] = (int64_t)(i % 8); /* 8 distinct rows, 24 repeats */
    bool match = false;
    CHECK_OK(harness_fetch_check(&h, idx, TOKENS, false, &match));
    CHECK(match);
    idx[3] = -1;
    idx[6] = (int64_t)(2 * EPR);
    CHECK_STATUS(harness_fetch_check(&h, idx, 2, false, &match), ENGRAM_ERR_BAD_INDEX);
    s = stats_of(&h);
    CHECK(s.fetches == 2);
    CHECK(s.rows == (TOKENS + 2) * EPT);
    CHECK(s.bytes == (TOKENS + 2) * EPT * 32u);
    CHECK(s.bad_rows == 2);
    CHECK(s.repeats == 24); /* the second fetch repeats no row */

    /* an older caller's struct: the fields past its size are left alone */
    engram_table_stats_t old;
    memset(&old, 0xab, sizeof(old));
    old.size = offsetof(engram_table_stats_t, bytes);
    CHECK_OK(engram_table_stats(h.table, &old));
    CHECK(old.size == offsetof(engram_table_stats_t, bytes));
    CHECK(old.fetches == 2 && old.rows == (TOKENS + 2) * EPT);
    CHECK(old.bytes == 0xababababababababull);

    engram_table_stats_t bad = {.size = 0};
    CHECK_STATUS(engram_table_stats(h.table, &bad), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "out->size is 0") != NULL);
    CHECK_STATUS(engram_table_stats(NULL, &s), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_table_stats(h.table, NULL), ENGRAM_ERR_INVALID);
    harness_close(&h);
    return 0;
}

int main(void)
{
    CHECK_OK(engram_group_fork_run(2, 0, rank_main, NULL, NULL));
    printf("engram_stats_test: ok\n");
    return 0;
}
