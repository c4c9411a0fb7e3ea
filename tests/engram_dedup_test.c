/* In-batch dedup against the recording transport (one process playing rank
 * 1 of 4): the gets handed to the transport are exactly the distinct valid
 * rows of the fetch (dedup=on, and auto on a batch with many repeats),
 * every row of a valid index (dedup=off, and auto on indices without
 * repeats); each repeated position gets its first position's row (the
 * transport's tag of peer and offset); every position of a bad index is a
 * zero row and counted. */
#include <stdlib.h>
#include <string.h>

#include "engram/dedup.h"
#include "engram/engram.h"
#include "hal/config_keys.h"
#include "tests/check.h"
#include "tests/recording_transport.h"
#include "tests/single_rank.h"

enum { RANKS = 4, EPR = 1000, EPT = 4, TOKENS = 128, ROWS = TOKENS * EPT, ROW = 40 /* stride 64 */ };

static engram_table_t *open_table(engram_group_t *g, engram_context_t **ctx, const char *dedup)
{
    const char *settings[] = {"num_qps", "2", "dedup", dedup, NULL};
    CHECK_OK(test_context_open(g, "recording", settings, ctx));
    engram_table_t *t;
    CHECK_OK(test_host_table_open(*ctx, EPR, ROW, EPT, TOKENS, &t));
    return t;
}

static bool is_bad(int64_t idx)
{
    return idx < 0 || idx >= RANKS * EPR;
}

/* Distinct valid indices, and bad positions, of idx[0..n). */
static void count_expected(const int64_t *idx, int n, int *distinct, int *valid, int *bad)
{
    *distinct = *valid = *bad = 0;
    for (int i = 0; i < n; i++) {
        if (is_bad(idx[i])) {
            (*bad)++;
            continue;
        }
        (*valid)++;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = idx[j] == idx[i];
        *distinct += !seen;
    }
}

/* Fetches idx, checks the gets issued (want_gets), that each get reads a
 * distinct index, each row's tag, and the bad count. */
static void fetch_and_check(engram_table_t *t, const int64_t *idx, int want_gets, bool deduped)
{
    recording_log.num_ops = 0;
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(t, idx, TOKENS, 0, &f));
    int gets = 0;
    static bool read[RANKS * EPR];
    memset(read, 0, sizeof(read));
    for (int i = 0; i < recording_log.num_ops; i++) {
        const recorded_op_t *op = &recording_log.ops[i];
        if (op->kind != 'g')
            continue;
        gets++;
        int64_t got = idx[op->local_off / ROW];
        CHECK(!is_bad(got));
        if (deduped)
            CHECK(!read[got]); /* no index read twice */
        read[got] = true;
    }
    if (gets != want_gets) {
        fprintf(stderr, "%d gets handed to the transport, expected %d\n", gets, want_gets);
        exit(1);
    }
    const void *rows;
    int distinct, valid, bad;
    count_expected(idx, ROWS, &distinct, &valid, &bad);
    CHECK_STATUS(engram_wait(f, &rows, NULL), bad ? ENGRAM_ERR_BAD_INDEX : ENGRAM_OK);
    uint64_t bad_count;
    engram_fetch_bad_indices(f, &bad_count, NULL, NULL);
    CHECK(bad_count == (uint64_t)bad);
    for (int i = 0; i < ROWS; i++) {
        uint64_t want[ROW / 8] = {0}, got[ROW / 8];
        if (!is_bad(idx[i])) {
            want[0] = (uint64_t)(idx[i] / EPR);
            want[1] = (uint64_t)(idx[i] % EPR) * 64;
        }
        memcpy(got, (const char *)rows + (size_t)i * ROW, ROW);
        CHECK(memcmp(got, want, 16) == 0);
        if (is_bad(idx[i]))
            CHECK(memcmp(got, want, ROW) == 0); /* bad rows are zero throughout */
    }
    engram_fetch_release(f);
    CHECK(recording_log.open_requests == 0);
}

/* Few distinct indices in many repeats, with a bad index repeated too. */
static void make_repeats(int64_t *idx)
{
    for (int i = 0; i < ROWS; i++)
        idx[i] = (int64_t)(((uint64_t)i * 2654435761u) % 37) * 101;
    idx[3] = idx[200] = idx[ROWS - 1] = RANKS * EPR; /* one past the end, three times */
    idx[7] = idx[9] = -5;
}

static void check_mode(engram_group_t *g, const char *dedup)
{
    engram_context_t *ctx;
    engram_table_t *t = open_table(g, &ctx, dedup);
    bool on = strcmp(dedup, "on") == 0, off = strcmp(dedup, "off") == 0;
    int64_t idx[ROWS];
    int distinct, valid, bad;

    make_repeats(idx);
    count_expected(idx, ROWS, &distinct, &valid, &bad);
    CHECK(distinct == 37 && bad == 5);
    fetch_and_check(t, idx, off ? valid : distinct, !off); /* auto: plainly pays */

    /* No repeats at all: every mode reads every row. */
    for (int i = 0; i < ROWS; i++)
        idx[i] = (int64_t)(((uint64_t)i * 7) % (RANKS * EPR));
    fetch_and_check(t, idx, ROWS, !off);

    /* Spread-out repeats, fewer than auto's threshold in the sample: one
     * repeat per 64 rows. */
    for (int i = 0; i < ROWS; i++)
        idx[i] = (int64_t)((uint64_t)i * 7 % (RANKS * EPR));
    for (int i = 64; i < ROWS; i += 64)
        idx[i] = idx[i - 1];
    count_expected(idx, ROWS, &distinct, &valid, &bad);
    CHECK(distinct == ROWS - ROWS / 64 + 1);
    fetch_and_check(t, idx, on ? distinct : ROWS, on);

    /* Fewer tokens than the slot holds: a smaller table, the same answer;
     * one token, one index repeated. */
    for (int i = 0; i < ROWS; i++)
        idx[i] = 42;
    recording_log.num_ops = 0;
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(t, idx, 1, 0, &f));
    int gets = 0;
    for (int i = 0; i < recording_log.num_ops; i++)
        gets += recording_log.ops[i].kind == 'g';
    CHECK(gets == (off ? EPT : 1));
    const void *rows;
    CHECK_OK(engram_wait(f, &rows, NULL));
    for (int e = 0; e < EPT; e++) {
        uint64_t tag[2];
        memcpy(tag, (const char *)rows + (size_t)e * ROW, sizeof(tag));
        CHECK(tag[0] == 0 && tag[1] == 42 * 64);
    }
    engram_fetch_release(f);

    CHECK_OK(engram_table_destroy(t));
    CHECK_OK(engram_context_destroy(ctx));
    CHECK(recording_log.open_regions == 0);
}

/* The n-gram shape: 8192 rows a fetch, tokens of 8 heads, a repeated
 * n-gram repeating all 8 heads of an earlier token, and no repeat in the
 * first 512 rows (64 tokens), all a sample of the batch's start would see.
 * Every `every`-th token from token 64 on repeats an earlier one. */
enum { BIG_EPR = 1 << 18, BIG_EPT = 8, BIG_TOKENS = 1024, BIG_ROWS = BIG_TOKENS * BIG_EPT };

static int make_late_repeats(int64_t *idx, int every, bool one_source)
{
    const uint64_t total = (uint64_t)RANKS * BIG_EPR;
    int repeats = 0;
    for (int tok = 0; tok < BIG_TOKENS; tok++) {
        bool repeat = tok >= 64 && tok % every == 0;
        /* any earlier token, or token 0 every time (8 indices behind
         * every repeat: what a sample by value mostly misses) */
        int from = repeat && !one_source ? (int)((((uint64_t)tok * 2654435761u) >> 8) % (uint64_t)tok) : 0;
        for (int e = 0; e < BIG_EPT; e++) {
            int row = tok * BIG_EPT + e;
            idx[row] = repeat ? idx[from * BIG_EPT + e] : (int64_t)(((uint64_t)row * 40503u + 17) % total);
        }
        repeats += repeat ? BIG_EPT : 0;
    }
    return repeats;
}

/* Gets a fetch of idx hands the transport. */
static int gets_of(engram_table_t *t, const int64_t *idx)
{
    recording_log.num_ops = 0;
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(t, idx, BIG_TOKENS, 0, &f));
    int gets = 0;
    for (int i = 0; i < recording_log.num_ops; i++)
        gets += recording_log.ops[i].kind == 'g';
    CHECK_OK(engram_wait(f, NULL, NULL));
    engram_fetch_release(f);
    return gets;
}

/* auto decides from the whole batch, with the get's cost on this
 * transport: repeats past the first 512 rows are seen; where a get is
 * served by its owner's CPU (UCX over TCP) 3% repeats pay, where it is
 * one-sided they do not, and 30% do. */
static void check_auto_sees_the_batch(engram_group_t *g, bool owner_cpu)
{
    if (owner_cpu)
        recording_caps.flags |= ENGRAM_CAP_OWNER_PROGRESS;
    const char *settings[] = {"num_qps", "2", "dedup", "auto", NULL};
    engram_context_t *ctx;
    CHECK_OK(test_context_open(g, "recording", settings, &ctx));
    engram_table_t *t;
    CHECK_OK(test_host_table_open(ctx, BIG_EPR, ROW, BIG_EPT, BIG_TOKENS, &t));
    static int64_t idx[BIG_ROWS];

    int repeats = make_late_repeats(idx, 32, false); /* 3% of the rows */
    CHECK(repeats == 30 * BIG_EPT);
    int gets = gets_of(t, idx);
    if (owner_cpu ? gets != BIG_ROWS - repeats : gets != BIG_ROWS) {
        fprintf(stderr, "%s gets, 3%% repeats past row 512: %d gets, want %d\n", owner_cpu ? "owner-CPU" : "one-sided",
                gets, owner_cpu ? BIG_ROWS - repeats : BIG_ROWS);
        exit(1);
    }
    repeats = make_late_repeats(idx, 3, false); /* 32% */
    gets = gets_of(t, idx);
    if (gets != BIG_ROWS - repeats) {
        fprintf(stderr, "30%% repeats past row 512: %d gets, want %d\n", gets, BIG_ROWS - repeats);
        exit(1);
    }
    CHECK_OK(engram_table_destroy(t));
    CHECK_OK(engram_context_destroy(ctx));
    recording_caps_reset();
}

/* The estimate itself: the sample's repeat fraction is the batch's, the
 * sample about ENGRAM_DEDUP_SAMPLE rows whatever the batch's size. */
static void check_estimate(void)
{
    engram_dedup_t *d;
    CHECK_OK(engram_dedup_create(ENGRAM_DEDUP_AUTO, BIG_ROWS, &d));
    static int64_t idx[BIG_ROWS];
    const uint64_t total = (uint64_t)RANKS * BIG_EPR;
    for (int every = 2; every <= 32; every *= 2) {
        for (int one_source = 0; one_source < 2; one_source++) {
            int repeats = make_late_repeats(idx, every, one_source);
            engram_dedup_estimate_t e;
            (void)engram_dedup_pays(d, idx, BIG_ROWS, total, &e);
            CHECK(e.rate_log2 == 4);
            CHECK(e.by_value_rows > ENGRAM_DEDUP_SAMPLE / 2 && e.by_value_rows < 2 * ENGRAM_DEDUP_SAMPLE);
            CHECK(e.by_position_rows == BIG_ROWS / 16);
            double want = (double)repeats / BIG_ROWS, by_value = (double)e.by_value_repeats / e.by_value_rows,
                   by_position = (double)e.by_position_repeats / e.by_position_rows;
            double got = by_value > by_position ? by_value : by_position;
            /* Spread repeats: the sample by value sees their fraction. One
             * source: the sample by position sees most of it. */
            if (got < want * (one_source ? 0.4 : 0.5) || got > want * 1.5 + 0.01) {
                fprintf(stderr, "1 in %d tokens repeated%s: %.4f of the rows repeat, the samples say %.4f by value, "
                        "%.4f by position\n", every, one_source ? " (all from token 0)" : "", want, by_value,
                        by_position);
                exit(1);
            }
        }
    }
    /* Bad indices are never sampled. */
    for (int i = 0; i < BIG_ROWS; i++)
        idx[i] = i % 2 ? -1 : (int64_t)total;
    engram_dedup_estimate_t e;
    CHECK(!engram_dedup_pays(d, idx, BIG_ROWS, total, &e));
    CHECK(e.by_value_rows == 0 && e.by_position_rows == 0);
    engram_dedup_destroy(d);
}

/* A slot too large for dedup's 32-bit positions is refused at create with
 * the key to change; dedup=off creates the same table's slots. */
static void check_too_large(void)
{
    engram_dedup_t *d = (engram_dedup_t *)&d;
    CHECK_STATUS(engram_dedup_create(ENGRAM_DEDUP_ON, (1ull << 30) + 1, &d), ENGRAM_ERR_OVERFLOW);
    CHECK(strstr(engram_last_error(), "exceed the 1073741824 its table holds; set dedup=off") != NULL);
    CHECK(d == (engram_dedup_t *)&d); /* untouched on failure */
    CHECK_OK(engram_dedup_create(ENGRAM_DEDUP_AUTO, (1ull << 30) + 1, &d)); /* auto: off for such a table */
    CHECK(d == NULL);
    CHECK_OK(engram_dedup_create(ENGRAM_DEDUP_OFF, 1ull << 10, &d));
    CHECK(d == NULL);
    CHECK_OK(engram_dedup_create(ENGRAM_DEDUP_ON, 1ull << 10, &d));
    CHECK(d != NULL && d->capacity == 2048);
    engram_dedup_destroy(d);
    engram_dedup_destroy(NULL);
}

int main(void)
{
    engram_group_t *g;
    CHECK_OK(replicated_group_create(1, RANKS, 2, &g));
    check_mode(g, "off");
    check_mode(g, "on");
    check_mode(g, "auto");
    check_auto_sees_the_batch(g, true);
    check_auto_sees_the_batch(g, false);
    check_estimate();
    check_too_large();
    engram_group_destroy(g);
    puts("engram_dedup_test: ok");
    return 0;
}
