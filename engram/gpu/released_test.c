/* The bookkeeping of fetches released in stream order (released.h):
 * report entries, per-slot chains completing in order, the done FIFO and
 * its bound. Completion is a flag per record, set by the test. */
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/released.h"
#include "tests/check.h"

/* The fake: cookie c is complete once done[c]; outcome: bad_count = c. */
typedef struct fake {
    bool done[4096];
    int tested;
} fake_t;

static bool fake_test(void *ctx, engram_released_rec_t *rec, bool known_complete)
{
    fake_t *f = ctx;
    f->tested++;
    if (!known_complete && !f->done[rec->out.cookie])
        return false;
    rec->out.status = ENGRAM_OK;
    rec->out.bad_count = rec->out.cookie;
    return true;
}

static void test_reports_never_run_out(void)
{
    engram_released_t r;
    CHECK_OK(engram_released_init(&r, 4, 8));
    CHECK(r.num_reports == 12);
    bool seen[12] = {false};
    for (int i = 0; i < 12; i++) {
        uint32_t e = engram_released_take_report(&r);
        CHECK(e < 12 && !seen[e]);
        seen[e] = true;
    }
    CHECK(r.num_free_reports == 0);
    engram_released_put_report(&r, ENGRAM_RELEASED_NO_REPORT); /* nothing to give back */
    CHECK(r.num_free_reports == 0);
    engram_released_put_report(&r, 5);
    CHECK(engram_released_take_report(&r) == 5);
    engram_released_fini(&r);
}

static void test_chain_completes_in_order(void)
{
    engram_released_t r;
    fake_t f = {0};
    CHECK_OK(engram_released_init(&r, 2, 16));
    int s0 = 0, s1 = 1;
    void *stream_a = (void *)0x10, *stream_b = (void *)0x20;
    for (uint64_t c = 1; c <= 3; c++)
        CHECK_OK(engram_released_add(&r, s0, stream_a, c, c, engram_released_take_report(&r), 8));
    CHECK_OK(engram_released_add(&r, s1, stream_b, 7, 0, engram_released_take_report(&r), 8));
    CHECK(engram_released_last(&r, s0)->out.cookie == 3 && engram_released_last(&r, s1)->out.cookie == 7);
    CHECK(r.pending == 4 && engram_released_chain_stream(&r, s0) == stream_a);
    uint32_t free_before = r.num_free_reports;
    /* only the head is tested: 2 complete behind an incomplete 1 waits */
    f.done[2] = true;
    f.tested = 0;
    CHECK(!engram_released_reap_slot(&r, s0, false, fake_test, &f));
    CHECK(f.tested == 1 && r.pending == 4 && r.done == 0);
    f.done[1] = true;
    CHECK(!engram_released_reap_slot(&r, s0, false, fake_test, &f));
    CHECK(r.pending == 2 && r.done == 2 && r.num_free_reports == free_before + 2);
    /* a later fetch in the slot complete: the rest of the chain is too */
    CHECK(engram_released_reap_slot(&r, s0, true, fake_test, &f));
    CHECK(engram_released_chain_empty(&r, s0) && !engram_released_chain_empty(&r, s1));
    CHECK(r.pending == 1 && r.done == 3);
    engram_fetch_completion_t out[8];
    CHECK(engram_released_poll(&r, out, 2) == 2);
    CHECK(out[0].cookie == 1 && out[0].bad_count == 1 && out[1].cookie == 2);
    f.done[7] = true;
    CHECK(engram_released_reap_slot(&r, s1, false, fake_test, &f));
    CHECK(engram_released_poll(&r, out, 8) == 2);
    CHECK(out[0].cookie == 3 && out[1].cookie == 7 && r.done == 0 && r.pending == 0);
    CHECK(engram_released_poll(&r, out, 8) == 0);
    /* an empty chain takes a new stream */
    CHECK_OK(engram_released_add(&r, s0, stream_b, 9, 0, ENGRAM_RELEASED_NO_REPORT, 1));
    CHECK(engram_released_chain_stream(&r, s0) == stream_b);
    CHECK(engram_released_reap_slot(&r, s0, true, fake_test, &f));
    CHECK(r.num_free_reports == r.num_reports); /* every entry back */
    engram_released_fini(&r);
}

static void test_records_bounded(void)
{
    engram_released_t r;
    fake_t f = {0};
    CHECK_OK(engram_released_init(&r, 1, 3));
    for (uint64_t c = 0; c < 3; c++)
        CHECK_OK(engram_released_add(&r, 0, NULL, c, 0, engram_released_take_report(&r), 1));
    CHECK_STATUS(engram_released_add(&r, 0, NULL, 3, 0, 0, 1), ENGRAM_ERR_BUSY);
    CHECK(strstr(engram_last_error(), "engram_table_poll_released") != NULL);
    /* complete but not polled still hold their records */
    CHECK(engram_released_reap_slot(&r, 0, true, fake_test, &f));
    CHECK_STATUS(engram_released_add(&r, 0, NULL, 3, 0, 0, 1), ENGRAM_ERR_BUSY);
    engram_fetch_completion_t out[1];
    CHECK(engram_released_poll(&r, out, 1) == 1 && out[0].cookie == 0);
    CHECK_OK(engram_released_add(&r, 0, NULL, 3, 0, engram_released_take_report(&r), 1));
    /* the FIFO keeps its order across reuse of records */
    CHECK(engram_released_reap_slot(&r, 0, true, fake_test, &f));
    engram_fetch_completion_t all[4];
    CHECK(engram_released_poll(&r, all, 4) == 3);
    CHECK(all[0].cookie == 1 && all[1].cookie == 2 && all[2].cookie == 3);
    engram_released_fini(&r);
}

static void test_many_rounds(void)
{
    /* a long run through one slot: records and entries recycle, none leak */
    engram_released_t r;
    fake_t f = {0};
    CHECK_OK(engram_released_init(&r, 2, 16));
    engram_fetch_completion_t out[16];
    uint64_t next_poll = 0;
    for (uint64_t c = 0; c < 4000; c++) {
        CHECK_OK(engram_released_add(&r, (int)(c % 2), NULL, c, c + 1, engram_released_take_report(&r), 1));
        f.done[c] = true;
        if (c % 5 == 4) {
            (void)engram_released_reap_slot(&r, 0, false, fake_test, &f);
            (void)engram_released_reap_slot(&r, 1, false, fake_test, &f);
            uint32_t n = engram_released_poll(&r, out, 16);
            for (uint32_t i = 0; i < n; i++) /* each slot's in order, the two interleaved as reaped */
                CHECK(out[i].bad_count == out[i].cookie);
            next_poll += n;
        }
    }
    CHECK(next_poll == 4000 && r.pending == 0 && r.done == 0 && r.num_free_reports == r.num_reports);
    engram_released_fini(&r);
}

int main(void)
{
    test_reports_never_run_out();
    test_chain_completes_in_order();
    test_records_bounded();
    test_many_rounds();
    printf("released_test: ok\n");
    return 0;
}
