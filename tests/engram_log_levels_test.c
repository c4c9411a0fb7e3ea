/* Results the caller receives as expected outcomes are not also logged as
 * errors: a full fetch (every receive slot in flight), and write, table
 * destroy and context destroy while a fetch is in flight (ENGRAM_ERR_BUSY,
 * on the rank holding it and on its peers through the agreement), go to
 * the log at debug only, with the text still in engram_last_error(); a
 * failure is still an error line. 2 forked ranks on loopback, each with a
 * log handler that keeps what it is given (ENGRAM_LOG_LEVEL=debug). */
#include <stdlib.h>
#include <string.h>

#include "hal/log.h"
#include "tests/check.h"
#include "tests/engram_harness.h"

#define EPR 64u
#define EPT 2u
#define TOKENS 4u
#define SLOTS 4 /* fetch_slots' default */

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = 32, .entries_per_token = EPT, .max_tokens = TOKENS,
                                             .recv = ENGRAM_RECV_HOST};

enum { KEPT = 64 };
static struct {
    int errors, lines;
    char first_error[256];
    engram_log_level_t level[KEPT];
    char msg[KEPT][256];
} seen;

static void keep(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg, (void)file, (void)line;
    if (level == ENGRAM_LOG_LEVEL_ERROR && seen.errors++ == 0)
        snprintf(seen.first_error, sizeof(seen.first_error), "%s", msg);
    int i = seen.lines++ % KEPT;
    seen.level[i] = level;
    snprintf(seen.msg[i], sizeof(seen.msg[i]), "%s", msg);
}

static void forget(void)
{
    memset(&seen, 0, sizeof(seen));
}

static void check_no_error_line(const char *what)
{
    if (seen.errors != 0) {
        fprintf(stderr, "%s: %d lines at error level, the first: %s\n", what, seen.errors, seen.first_error);
        exit(1);
    }
}

/* A line at `level` containing `text` among the last KEPT. */
static bool logged(engram_log_level_t level, const char *text)
{
    for (int i = 0; i < KEPT && i < seen.lines; i++)
        if (seen.level[i] == level && strstr(seen.msg[i], text) != NULL)
            return true;
    return false;
}

static void indices(int64_t *idx)
{
    for (uint32_t i = 0; i < TOKENS * EPT; i++)
        idx[i] = (int64_t)((i * 7) % (2 * EPR));
}

/* Every slot in flight: the next fetch is BUSY, a hundred times over. */
static void full_fetch(harness_t *h)
{
    int64_t idx[TOKENS * EPT];
    indices(idx);
    engram_fetch_t *f[SLOTS];
    for (int s = 0; s < SLOTS; s++)
        CHECK_OK(engram_fetch(h->table, idx, TOKENS, 0, &f[s]));
    forget();
    for (int i = 0; i < 100; i++) {
        engram_fetch_t *extra = NULL;
        CHECK_STATUS(engram_fetch(h->table, idx, TOKENS, 0, &extra), ENGRAM_ERR_BUSY);
        CHECK(extra == NULL);
    }
    check_no_error_line("engram_fetch with every slot in flight");
    CHECK(strstr(engram_last_error(), "receive slots are in flight") != NULL);
    CHECK(logged(ENGRAM_LOG_LEVEL_DEBUG, "receive slots are in flight"));
    for (int s = 0; s < SLOTS; s++) {
        CHECK_OK(engram_wait(f[s], NULL, NULL));
        CHECK_OK(engram_fetch_release(f[s]));
    }
}

/* Rank 0 holds a fetch: write and both destroys are BUSY on every rank. */
static void busy_collectives(harness_t *h)
{
    int64_t idx[TOKENS * EPT];
    indices(idx);
    bool holder = engram_group_rank(h->g) == 0;
    engram_fetch_t *f = NULL;
    if (holder)
        CHECK_OK(engram_fetch(h->table, idx, TOKENS, 0, &f));
    forget();
    CHECK_STATUS(harness_write(h), ENGRAM_ERR_BUSY);
    if (!holder) /* the peer's status, named */
        CHECK(strstr(engram_last_error(), "rank 0 failed to") != NULL);
    CHECK_STATUS(engram_table_destroy(h->table), ENGRAM_ERR_BUSY);
    CHECK_STATUS(engram_context_destroy(h->ctx), ENGRAM_ERR_BUSY);
    check_no_error_line(holder ? "write/destroy with a fetch in flight" : "write/destroy while a peer holds a fetch");
    if (holder) {
        CHECK(logged(ENGRAM_LOG_LEVEL_DEBUG, "engram_table_destroy: 1 fetches of this table are in flight"));
    } else {
        CHECK(logged(ENGRAM_LOG_LEVEL_DEBUG, "rank 0 failed to"));
    }
    if (holder) {
        CHECK_OK(engram_wait(f, NULL, NULL));
        CHECK_OK(engram_fetch_release(f));
    }
    CHECK_OK(harness_write(h));
}

/* A failure is still reported at error, once. */
static void real_error(harness_t *h)
{
    int64_t idx[TOKENS * EPT];
    indices(idx);
    engram_fetch_t *f = NULL;
    forget();
    CHECK_STATUS(engram_fetch(h->table, idx, TOKENS, 0x80, &f), ENGRAM_ERR_INVALID);
    CHECK(seen.errors == 1 && strstr(seen.first_error, "unknown flags") != NULL);
}

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    engram_log_set_handler(keep, NULL);
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &params));
    CHECK_OK(harness_write(&h));
    full_fetch(&h);
    busy_collectives(&h);
    real_error(&h);
    harness_close(&h);
    engram_log_set_handler(NULL, NULL);
    return 0;
}

int main(void)
{
    setenv("ENGRAM_LOG_LEVEL", "debug", 1); /* read once, at the first line */
    CHECK(engram_log_level() == ENGRAM_LOG_LEVEL_DEBUG);
    CHECK_OK(engram_group_fork_run(2, 0, rank_main, NULL, NULL));
    puts("engram_log_levels_test: ok");
    return 0;
}
