/* Fault: a rank is SIGKILLed in the middle of a fetch (argv[1] names the
 * transport; argv[2], default 1, how many times the whole run repeats,
 * alternating 4 and 2 ranks; every repetition must pass). Every surviving rank keeps fetching: each wait returns within
 * the configured timeout_ms (2000), with OK (loopback: the dead rank's shard
 * stays mapped through its fd) or ENGRAM_ERR_PEER / ENGRAM_ERR_TIMEOUT
 * (ucx: ENGRAM_ERR_PEER only, and a survivor never aborts, e.g. inside UCX
 * serving the dead rank's gets);
 * then its next collective (table destroy) returns PEER or TIMEOUT within
 * the timeout, and teardown completes. The launcher reports the victim
 * killed (137) and every survivor exiting 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engram/plugin/deadline.h"
#include "tests/check.h"
#include "tests/engram_harness.h"

#define MAX_RANKS 4
#define TIMEOUT_MS 2000
#define SLACK_MS 1000 /* scheduling on a loaded CI machine with few cores */
#define FETCH_MS 500  /* how long survivors fetch across the kill (20 repetitions must fit a small test) */
#define EPR 1024u
#define EPT 4u
#define MAX_TOKENS 32u

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = 128, .entries_per_token = EPT, .max_tokens = MAX_TOKENS,
                                             .scale_packs = 0, .recv = ENGRAM_RECV_HOST};

static long long now_ms(void)
{
    return (long long)engram_now_ms();
}

static bool peer_failure(engram_status_t st)
{
    return st == ENGRAM_ERR_PEER || st == ENGRAM_ERR_TIMEOUT;
}

/* Indices on every rank, the victim's included. */
static void fill_indices(int64_t *idx, unsigned round, int ranks)
{
    for (uint32_t i = 0; i < MAX_TOKENS * EPT; i++)
        idx[i] = (int64_t)(((uint64_t)i * 131 + round * 17) % (EPR * (uint64_t)ranks));
}

static int rank_main(engram_group_t *g, void *arg)
{
    const char *transport = arg;
    harness_t h;
    CHECK_OK(harness_open(&h, g, transport, false, &params));
    CHECK_OK(harness_write(&h));
    int64_t idx[MAX_TOKENS * EPT];
    int ranks = engram_group_size(g);
    fill_indices(idx, 0, ranks);
    engram_fetch_t *f;
    if (engram_group_rank(g) == ranks - 1) { /* the victim */
        CHECK_OK(engram_fetch(h.table, idx, MAX_TOKENS, 0, &f));
        raise(SIGKILL); /* gets in flight, peers mid-fetch */
    }
    /* Survivors: fetch for FETCH_MS across the kill (or until a wait fails). */
    unsigned failed_waits = 0, rounds = 0;
    engram_status_t wait_st = ENGRAM_OK;
    long long start = now_ms();
    while (now_ms() - start < FETCH_MS && failed_waits == 0) {
        fill_indices(idx, ++rounds, ranks);
        CHECK_OK(engram_fetch(h.table, idx, MAX_TOKENS, 0, &f));
        long long t0 = now_ms();
        const void *rows;
        engram_status_t st = engram_wait(f, &rows, NULL);
        long long took = now_ms() - t0;
        CHECK(took <= TIMEOUT_MS + SLACK_MS);
        if (st == ENGRAM_OK)
            CHECK(harness_check(&h, idx, MAX_TOKENS, false, rows, NULL)); /* nothing wrong delivered */
        else {
            /* ucx knows a dead peer (UCX's report or its pidfd): no timeout */
            CHECK(strcmp(transport, "ucx") == 0 ? st == ENGRAM_ERR_PEER : peer_failure(st));
            wait_st = st;
            failed_waits++;
        }
        engram_fetch_release(f);
    }
    long long t0 = now_ms();
    engram_status_t st = engram_table_destroy(h.table);
    long long destroy_ms = now_ms() - t0;
    printf("rank %d (%s): %u fetch rounds, %u waits failed (%s); table destroy returned %s after %lld ms: %s\n",
           engram_group_rank(g), transport, rounds, failed_waits, engram_status_str(wait_st), engram_status_str(st),
           destroy_ms, engram_last_error());
    fflush(stdout);
    CHECK(peer_failure(st));
    CHECK(destroy_ms <= TIMEOUT_MS + SLACK_MS);
    t0 = now_ms();
    st = engram_context_destroy(h.ctx);
    CHECK(st == ENGRAM_OK || peer_failure(st));
    CHECK(now_ms() - t0 <= TIMEOUT_MS + SLACK_MS);
    return 0;
}

/* One run of `ranks` ranks, the last one killed. */
static void run_once(const char *transport, int ranks, int rep)
{
    int codes[MAX_RANKS];
    long long t0 = now_ms();
    engram_status_t st = engram_group_fork_run(ranks, 0, rank_main, (void *)transport, codes);
    long long took = now_ms() - t0;
    printf("repetition %d, %d ranks: fork_run %s after %lld ms; exit codes", rep, ranks, engram_status_str(st),
           took);
    for (int r = 0; r < ranks; r++)
        printf(" %d", codes[r]);
    printf("\n");
    fflush(stdout);
    CHECK(st != ENGRAM_OK);
    for (int r = 0; r < ranks; r++)
        CHECK(codes[r] == (r == ranks - 1 ? 128 + SIGKILL : 0));
}

int main(int argc, char **argv)
{
    const char *transport = argc > 1 ? argv[1] : "loopback";
    int reps = argc > 2 ? atoi(argv[2]) : 1;
    CHECK(reps >= 1);
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", TIMEOUT_MS);
    CHECK(setenv("ENGRAM_TIMEOUT_MS", timeout, 1) == 0);
    for (int rep = 0; rep < reps; rep++)
        run_once(transport, rep % 2 == 0 ? MAX_RANKS : 2, rep);
    printf("engram_peer_kill_test: ok (%d repetitions)\n", reps);
    return 0;
}
