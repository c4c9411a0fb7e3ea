/* Bad input and lifecycle errors on 4 forked ranks (loopback): each case
 * gets a clear error, writes nothing, and leaves the table usable. */
#include <signal.h>
#include <string.h>
#include <sys/resource.h>

#include "tests/check.h"
#include "tests/engram_harness.h"

#define EPR 256u
#define EPT 4u
#define MAX_TOKENS 8u

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = 64, .entries_per_token = EPT, .max_tokens = MAX_TOKENS,
                                             .scale_packs = 2, .recv = ENGRAM_RECV_HOST};

static void valid_indices(engram_group_t *g, int64_t *idx)
{
    uint64_t total = EPR * (uint64_t)engram_group_size(g);
    for (uint32_t i = 0; i < MAX_TOKENS * EPT; i++)
        idx[i] = (int64_t)((i * 97 + (uint64_t)engram_group_rank(g) * 13) % total);
}

static void check_usable(harness_t *h)
{
    int64_t idx[MAX_TOKENS * EPT];
    valid_indices(h->g, idx);
    bool match = false;
    CHECK_OK(harness_fetch_check(h, idx, MAX_TOKENS, false, &match));
    CHECK(match);
}

static void check_fetch_before_write(harness_t *h)
{
    int64_t idx[MAX_TOKENS * EPT] = {0};
    engram_fetch_t *f = NULL;
    CHECK_STATUS(engram_fetch(h->table, idx, 1, 0, &f), ENGRAM_ERR_STATE);
    CHECK(f == NULL);
    CHECK(strstr(engram_last_error(), "before any engram_write") != NULL);
}

static void check_bad_indices(harness_t *h)
{
    int64_t idx[MAX_TOKENS * EPT];
    valid_indices(h->g, idx);
    uint64_t total = EPR * (uint64_t)engram_group_size(h->g);
    idx[2 * EPT + 1] = -1; /* first: token 2, entry 1 */
    idx[3 * EPT + 0] = (int64_t)total;
    idx[5 * EPT + 3] = INT64_MAX;
    idx[7 * EPT + 2] = INT64_MIN;
    bool match = false;
    CHECK_STATUS(harness_fetch_check(h, idx, MAX_TOKENS, true, &match), ENGRAM_ERR_BAD_INDEX);
    CHECK(match); /* bad rows and scales zero, the rest correct */
    CHECK(strstr(engram_last_error(), "4 indices out of range") != NULL);
    CHECK(strstr(engram_last_error(), "token 2 entry 1") != NULL);
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(h->table, idx, MAX_TOKENS, 0, &f));
    CHECK_STATUS(engram_wait(f, NULL, NULL), ENGRAM_ERR_BAD_INDEX);
    uint64_t count;
    uint32_t tok, ent;
    engram_fetch_bad_indices(f, &count, &tok, &ent);
    CHECK(count == 4 && tok == 2 && ent == 1);
    engram_fetch_release(f);
    check_usable(h);
}

static void check_fetch_arguments(harness_t *h)
{
    int64_t idx[(MAX_TOKENS + 1) * EPT] = {0};
    engram_fetch_t *f = NULL;
    CHECK_STATUS(engram_fetch(h->table, idx, MAX_TOKENS + 1, 0, &f), ENGRAM_ERR_OVERFLOW);
    CHECK(strstr(engram_last_error(), "exceed the receive buffer") != NULL);
    CHECK_STATUS(engram_fetch(h->table, NULL, 1, 0, &f), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_fetch(h->table, (const int64_t *)((const char *)idx + 4), 1, 0, &f), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "not 8-byte aligned") != NULL);
    CHECK_STATUS(engram_fetch(h->table, idx, 1, 0x80, &f), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "unknown flags 0x80") != NULL);
    CHECK_STATUS(engram_fetch(h->table, idx, 1, ENGRAM_FETCH_ORDER_AT_WAIT, &f), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "engram_fetch has no stream") != NULL);
    CHECK_STATUS(engram_fetch(NULL, idx, 1, 0, &f), ENGRAM_ERR_INVALID);
    CHECK(f == NULL);
    CHECK_STATUS(engram_wait(NULL, NULL, NULL), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_test(NULL), ENGRAM_ERR_INVALID);
    check_usable(h);
}

/* Rank 0 keeps a fetch in flight: write and destroy fail on every rank. */
static void check_busy(harness_t *h)
{
    engram_fetch_t *f = NULL;
    int64_t idx[MAX_TOKENS * EPT];
    valid_indices(h->g, idx);
    bool holder = engram_group_rank(h->g) == 0;
    if (holder)
        CHECK_OK(engram_fetch(h->table, idx, MAX_TOKENS, 0, &f));
    CHECK_STATUS(harness_write(h), ENGRAM_ERR_BUSY);
    CHECK_STATUS(engram_table_destroy(h->table), ENGRAM_ERR_BUSY);
    CHECK_STATUS(engram_context_destroy(h->ctx), ENGRAM_ERR_BUSY);
    if (holder) {
        CHECK_OK(engram_wait(f, NULL, NULL));
        engram_fetch_release(f);
    }
    CHECK_OK(harness_write(h));
    check_usable(h);
}

static void check_write_arguments(harness_t *h)
{
    static uint8_t rows[EPR * 64];
    static uint32_t scales[EPR * 16 * 2];
    /* every rank passes a wrong row size: all fail, nothing written */
    CHECK_STATUS(engram_write(h->table, rows, 32, scales), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "rows of 32 bytes, table rows are 64 bytes") != NULL);
    /* one rank forgets the scales: every rank fails */
    bool bad = engram_group_rank(h->g) == 1;
    engram_status_t st = engram_write(h->table, rows, 64, bad ? NULL : scales);
    CHECK(st == ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_write(NULL, rows, 64, scales), ENGRAM_ERR_INVALID);
    check_usable(h); /* the zero rows above were never written */
}

/* Rank 1 cannot allocate its shard (file size limit on its memfd): every
 * rank's create fails, and a create afterwards succeeds. */
static void check_partial_init_failure(engram_group_t *g)
{
    bool victim = engram_group_rank(g) == 1;
    struct rlimit old;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    if (victim) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit small = {.rlim_cur = 4096, .rlim_max = old.rlim_max};
        CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    }
    harness_t h;
    engram_status_t st = harness_open(&h, g, "loopback", false, &params);
    CHECK(st != ENGRAM_OK);
    CHECK(h.table == NULL);
    CHECK_OK(engram_context_destroy(h.ctx));
    if (victim)
        CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    CHECK_OK(harness_open(&h, g, "loopback", false, &params));
    CHECK_OK(harness_write(&h));
    check_usable(&h);
    harness_close(&h);
}

static void check_mismatched_params(engram_group_t *g)
{
    engram_table_params_t p = params;
    if (engram_group_rank(g) == 2)
        p.row_bytes = 128;
    harness_t h;
    CHECK_STATUS(harness_open(&h, g, "loopback", false, &p), ENGRAM_ERR_INVALID);
    CHECK_OK(engram_context_destroy(h.ctx));
    engram_table_params_t bad = params;
    bad.entries_per_token = 0;
    CHECK_STATUS(harness_open(&h, g, "loopback", false, &bad), ENGRAM_ERR_INVALID);
    CHECK_OK(engram_context_destroy(h.ctx));
    bad = params;
    bad.recv = ENGRAM_RECV_CUDA;
    CHECK_STATUS(harness_open(&h, g, "loopback", false, &bad), ENGRAM_ERR_UNSUPPORTED);
    CHECK_OK(engram_context_destroy(h.ctx));
}

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &params));
    check_fetch_before_write(&h);
    CHECK_OK(harness_write(&h));
    check_bad_indices(&h);
    check_fetch_arguments(&h);
    check_busy(&h);
    check_write_arguments(&h);
    harness_close(&h);
    check_partial_init_failure(g);
    check_mismatched_params(g);
    return 0;
}

int main(void)
{
    CHECK_OK(engram_group_fork_run(4, 0, rank_main, NULL, NULL));
    puts("engram_errors_test: ok");
    return 0;
}
