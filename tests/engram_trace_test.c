/* The data path's trace lines through the program's log handler, with
 * ENGRAM_LOG_LEVEL=trace: one per get (doorbells marked), per flush, per
 * completed flush request and per completed fetch where the engram layer
 * was built with ENGRAM_WITH_TRACE (EXPECT_TRACE=1), none where it was not
 * (EXPECT_TRACE=0). Against the recording transport, one rank of two. */
#include <stdio.h>
#include <string.h>

#include "engram/engram.h"
#include "tests/check.h"
#include "tests/recording_transport.h"
#include "tests/single_rank.h"

enum { EPR = 16, EPT = 2, TOKENS = 3, ROW = 8, GETS = TOKENS * EPT, DEPTH = 4 };

typedef struct seen {
    int lines, gets, doorbells, flushes, requests, fetches;
} seen_t;

static void on_log(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)line;
    seen_t *s = arg;
    if (level != ENGRAM_LOG_LEVEL_TRACE)
        return;
    CHECK(strcmp(file, "fetch.c") == 0);
    s->lines++;
    if (strncmp(msg, "get queue 0 peer 1: ", 20) == 0) {
        s->gets++;
        s->doorbells += strstr(msg, ", doorbell") != NULL;
    } else if (strcmp(msg, "flush queue 0 peer 1: success") == 0) {
        s->flushes++;
    } else if (strcmp(msg, "flush request complete (0 left): success") == 0) {
        s->requests++;
    } else if (strcmp(msg, "fetch in slot 0 complete: success") == 0) {
        s->fetches++;
    } else {
        fprintf(stderr, "unexpected trace line: %s\n", msg);
        CHECK(0);
    }
}

int main(void)
{
    CHECK(engram_log_level() == ENGRAM_LOG_LEVEL_TRACE); /* the test's env */
    engram_group_t *g;
    CHECK_OK(replicated_group_create(0, 2, 1, &g));
    static const char *const settings[] = {"num_qps", "1", "flush_depth", "4", NULL};
    engram_context_t *ctx;
    CHECK_OK(test_context_open(g, "recording", settings, &ctx));
    engram_table_t *t;
    CHECK_OK(test_host_table_open(ctx, EPR, ROW, EPT, TOKENS, &t));
    int64_t idx[GETS];
    for (int i = 0; i < GETS; i++)
        idx[i] = EPR + i; /* every row from peer 1, none repeated */

    seen_t seen = {0};
    engram_log_set_handler(on_log, &seen);
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(t, idx, TOKENS, 0, &f));
    CHECK_OK(engram_wait(f, NULL, NULL));
    engram_log_set_handler(NULL, NULL);
    CHECK_OK(engram_fetch_release(f));

    if (EXPECT_TRACE) {
        CHECK(seen.gets == GETS && seen.doorbells == GETS / DEPTH);
        CHECK(seen.flushes == 1 && seen.requests == 1 && seen.fetches == 1);
        CHECK(seen.lines == GETS + 3);
    } else {
        CHECK(seen.lines == 0);
    }
    CHECK_OK(engram_table_destroy(t));
    CHECK_OK(engram_context_destroy(ctx));
    engram_group_destroy(g);
    printf("engram_trace_test: %d trace lines, ok\n", seen.lines);
    return 0;
}
