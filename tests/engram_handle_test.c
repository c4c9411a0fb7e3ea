/* Fetch handles and release (one rank, recording transport):
 *   - a released handle whose slot a later fetch reuses is refused by
 *     engram_test, engram_wait, engram_fetch_buffers,
 *     engram_fetch_bad_indices and engram_fetch_release (ENGRAM_ERR_INVALID), and the later fetch is
 *     untouched (a second release must not release the later fetch);
 *   - so are handles never issued and handles of a destroyed table;
 *   - releasing a fetch whose gets never complete returns
 *     ENGRAM_ERR_TIMEOUT and retires its slot: not reused while they may
 *     land, taken back once they complete, their requests freed by the
 *     table's destroy otherwise; nothing leaks;
 *   - engram_fetch_buffers of a recv=HOST fetch: ENGRAM_ERR_STATE (its
 *     out-parameters untouched) until a test has seen it complete, then
 *     the pointers engram_wait gives; engram_fetch_release_ordered of it
 *     is refused and engram_table_poll_released has nothing to report. */
#include <string.h>
#include <time.h>

#include "engram/plugin/deadline.h"
#include "tests/check.h"
#include "tests/recording_transport.h"
#include "tests/single_rank.h"

enum { EPR = 64, EPT = 2, TOKENS = 3, ROW = 32 };

static engram_table_t *open_table(engram_context_t *ctx)
{
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = EPR, .row_bytes = ROW,
                               .entries_per_token = EPT, .max_tokens = TOKENS, .scale_packs = 1};
    engram_table_t *t;
    CHECK_OK(engram_table_create(ctx, &p, &t));
    static uint8_t rows[EPR * ROW];
    static uint32_t scales[EPR];
    CHECK_OK(engram_write(t, rows, ROW, scales));
    return t;
}

static engram_fetch_t *fetch(engram_table_t *t, int64_t first)
{
    int64_t idx[TOKENS * EPT];
    for (int i = 0; i < TOKENS * EPT; i++)
        idx[i] = first + i;
    engram_fetch_t *f = NULL;
    CHECK_OK(engram_fetch(t, idx, TOKENS, 0, &f));
    return f;
}

/* The recording transport writes (peer, remote offset) into each row. */
static void check_rows(engram_fetch_t *f, int64_t first)
{
    const void *rows;
    CHECK_OK(engram_wait(f, &rows, NULL));
    for (int i = 0; i < TOKENS * EPT; i++) {
        uint64_t tag[2];
        memcpy(tag, (const char *)rows + (size_t)i * ROW, sizeof(tag));
        CHECK(tag[0] == 0 && tag[1] == (uint64_t)(first + i) * ROW);
    }
}

static void check_refused(engram_fetch_t *stale)
{
    uint64_t count = 7;
    CHECK_STATUS(engram_test(stale), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "engram_test: ") != NULL);
    CHECK_STATUS(engram_wait(stale, NULL, NULL), ENGRAM_ERR_INVALID);
    const void *rows = &count;
    CHECK_STATUS(engram_fetch_buffers(stale, &rows, NULL), ENGRAM_ERR_INVALID);
    CHECK(rows == &count && strstr(engram_last_error(), "engram_fetch_buffers: ") != NULL);
    CHECK_STATUS(engram_fetch_bad_indices(stale, &count, NULL, NULL), ENGRAM_ERR_INVALID);
    CHECK(count == 7);
    int captured = 7;
    CHECK_STATUS(engram_fetch_captured(stale, &captured), ENGRAM_ERR_INVALID);
    CHECK(captured == 7 && strstr(engram_last_error(), "engram_fetch_captured: ") != NULL);
    CHECK_STATUS(engram_fetch_release_ordered(stale, 1), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "engram_fetch_release_ordered: ") != NULL);
    CHECK_STATUS(engram_fetch_release(stale), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "engram_fetch_release: not a fetch in flight") != NULL);
}

static void check_stale_handles(engram_context_t *ctx) /* fetch_slots = 1 */
{
    engram_table_t *t = open_table(ctx);
    engram_fetch_t *f1 = fetch(t, 0);
    check_rows(f1, 0);
    CHECK_OK(engram_fetch_release(f1));
    engram_fetch_t *f2 = fetch(t, 10); /* the same, only, slot */
    CHECK(f2 != f1);
    check_refused(f1);
    CHECK_OK(engram_test(f2)); /* f2 untouched by everything f1 was given */
    check_rows(f2, 10);
    uint64_t count = 1;
    CHECK_OK(engram_fetch_bad_indices(f2, &count, NULL, NULL));
    CHECK(count == 0);
    CHECK_OK(engram_fetch_release(f2));
    check_refused(f2);
    CHECK_OK(engram_fetch_release(NULL));
    CHECK_STATUS(engram_test(NULL), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_fetch_bad_indices(NULL, NULL, NULL, NULL), ENGRAM_ERR_INVALID);
    check_refused((engram_fetch_t *)(uintptr_t)0x1234567);
    /* a handle of a destroyed table, even once a new table has its record */
    engram_fetch_t *f3 = fetch(t, 20);
    check_rows(f3, 20);
    CHECK_OK(engram_fetch_release(f3));
    engram_fetch_t *live = fetch(t, 30);
    CHECK_STATUS(engram_table_destroy(t), ENGRAM_ERR_BUSY);
    CHECK_OK(engram_fetch_release(live));
    CHECK_OK(engram_table_destroy(t));
    check_refused(live);
    t = open_table(ctx);
    check_refused(live);
    check_refused(f3);
    engram_fetch_t *f4 = fetch(t, 0);
    check_refused(live);
    check_rows(f4, 0);
    CHECK_OK(engram_fetch_release(f4));
    CHECK_OK(engram_table_destroy(t));
}

static void check_buffers_host(engram_context_t *ctx) /* fetch_slots = 2, one queue */
{
    engram_table_t *t = open_table(ctx);
    recording_test_status = ENGRAM_INPROGRESS;
    engram_fetch_t *f = fetch(t, 0);
    const void *rows = &rows;
    const uint32_t *sf = NULL;
    CHECK_STATUS(engram_fetch_buffers(f, &rows, &sf), ENGRAM_ERR_STATE);
    CHECK(rows == &rows && sf == NULL && strstr(engram_last_error(), "recv=HOST") != NULL);
    CHECK_STATUS(engram_test(f), ENGRAM_INPROGRESS);
    CHECK_STATUS(engram_fetch_buffers(f, NULL, NULL), ENGRAM_ERR_STATE);
    recording_test_status = ENGRAM_OK;
    CHECK_OK(engram_test(f));
    CHECK_OK(engram_fetch_buffers(f, &rows, &sf));
    const void *wrows = NULL;
    const uint32_t *wsf = NULL;
    CHECK_OK(engram_wait(f, &wrows, &wsf));
    CHECK(rows == wrows && sf == wsf && sf != NULL);
    CHECK_OK(engram_fetch_buffers(f, NULL, NULL)); /* NULL out-parameters: allowed */
    int captured = 7;
    CHECK_OK(engram_fetch_captured(f, &captured)); /* only a recv=CUDA fetch may be */
    CHECK(captured == 0);
    CHECK_STATUS(engram_fetch_captured(f, NULL), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "captured must not be NULL") != NULL);
    check_rows(f, 0);
    /* host rows are there only once a wait saw them: no release in stream order */
    CHECK_STATUS(engram_fetch_release_ordered(f, 1), ENGRAM_ERR_UNSUPPORTED);
    CHECK(strstr(engram_last_error(), "use engram_fetch_release") != NULL);
    uint32_t n = 9, pending = 9;
    engram_fetch_completion_t c;
    CHECK_OK(engram_table_poll_released(t, &c, 1, 1, &n, &pending)); /* nothing to wait for */
    CHECK(n == 0 && pending == 0);
    CHECK_OK(engram_table_poll_released(t, NULL, 0, 0, &n, NULL));
    CHECK_STATUS(engram_table_poll_released(t, NULL, 1, 0, &n, NULL), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_table_poll_released(t, &c, 1, 0, NULL, NULL), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_table_poll_released(NULL, &c, 1, 0, &n, NULL), ENGRAM_ERR_INVALID);
    CHECK_OK(engram_fetch_release(f));
    CHECK_STATUS(engram_fetch_buffers(f, &rows, NULL), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_fetch_buffers(NULL, &rows, NULL), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "fetch is NULL") != NULL);
    CHECK_OK(engram_table_destroy(t));
}

static double seconds(void)
{
    return (double)engram_now_ns() * 1e-9;
}

static void check_release_timed_out(engram_context_t *ctx) /* fetch_slots = 2, timeout_ms = 300, one queue */
{
    engram_table_t *t = open_table(ctx);
    recording_test_status = ENGRAM_INPROGRESS; /* gets that never complete */
    engram_fetch_t *a = fetch(t, 0);
    CHECK_STATUS(engram_wait(a, NULL, NULL), ENGRAM_ERR_TIMEOUT);
    CHECK_STATUS(engram_test(a), ENGRAM_INPROGRESS); /* still in flight after the timeout */
    double t0 = seconds();
    CHECK_STATUS(engram_fetch_release(a), ENGRAM_ERR_TIMEOUT);
    CHECK(seconds() - t0 < 0.2); /* a wait already gave up: not waited for again */
    CHECK(strstr(engram_last_error(), "retired") != NULL);
    check_refused(a);
    CHECK(recording_log.open_requests == 1); /* the transport still holds a's gets */
    /* the retired slot is not reused: one slot left */
    engram_fetch_t *b = fetch(t, 10);
    engram_fetch_t *c = NULL;
    int64_t idx[TOKENS * EPT] = {0};
    CHECK_STATUS(engram_fetch(t, idx, TOKENS, 0, &c), ENGRAM_ERR_BUSY);
    /* released without a wait: waited for once (timeout_ms), then retired */
    t0 = seconds();
    CHECK_STATUS(engram_fetch_release(b), ENGRAM_ERR_TIMEOUT);
    CHECK(seconds() - t0 >= 0.25);
    CHECK_STATUS(engram_fetch(t, idx, TOKENS, 0, &c), ENGRAM_ERR_BUSY);
    /* retired slots do not make the table busy */
    static uint8_t rows[EPR * ROW];
    static uint32_t scales[EPR];
    CHECK_OK(engram_write(t, rows, ROW, scales));
    /* once their gets complete, the next fetch takes the slots back */
    recording_test_status = ENGRAM_OK;
    engram_fetch_t *d = fetch(t, 20);
    CHECK(recording_log.open_requests == 1); /* a's and b's freed, d's open */
    engram_fetch_t *e = fetch(t, 30);
    check_rows(d, 20);
    check_rows(e, 30);
    CHECK_OK(engram_fetch_release(d));
    CHECK_OK(engram_fetch_release(e));
    /* gets that never complete, then destroy: their requests are freed */
    recording_test_status = ENGRAM_INPROGRESS;
    engram_fetch_t *g = fetch(t, 40);
    CHECK_STATUS(engram_wait(g, NULL, NULL), ENGRAM_ERR_TIMEOUT);
    CHECK_STATUS(engram_fetch_release(g), ENGRAM_ERR_TIMEOUT);
    CHECK(recording_log.open_requests == 1);
    CHECK_OK(engram_table_destroy(t));
    CHECK(recording_log.open_requests == 0 && recording_log.open_regions == 0);
    recording_test_status = ENGRAM_OK;
}

int main(void)
{
    engram_group_t *g;
    engram_context_t *ctx;
    const char *const one_slot[] = {"fetch_slots", "1", NULL};
    CHECK_OK(single_rank_open("recording", one_slot, &g, &ctx));
    check_stale_handles(ctx);
    CHECK_OK(single_rank_close(g, ctx));
    const char *const two_slots[] = {"fetch_slots", "2", "timeout_ms", "300", "num_qps", "1", NULL};
    CHECK_OK(single_rank_open("recording", two_slots, &g, &ctx));
    check_buffers_host(ctx);
    check_release_timed_out(ctx);
    CHECK_OK(single_rank_close(g, ctx));
    CHECK(recording_log.open_requests == 0 && recording_log.open_regions == 0);
    puts("engram_handle_test: ok");
    return 0;
}
