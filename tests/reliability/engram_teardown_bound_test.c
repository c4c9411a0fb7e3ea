/* Teardown is bounded on every rank: one rank of three vanishes without a
 * word (SIGSTOP: alive, its sockets open, answering nothing) at one point
 * of a table's life, and each survivor's engram_table_destroy and
 * engram_context_destroy together return within timeout_ms (plus slack
 * for a loaded machine) with ENGRAM_ERR_PEER naming the vanished rank;
 * the survivors then exit.
 *
 * The points: mid-fetch (the victim stops with a fetch of its own in
 * flight while the survivors fetch rows of every rank, its rows included),
 * and on entering each collective of engram_write, engram_table_destroy
 * (its agreement and, over ucx, the transport's barrier before it
 * deregisters the shard) and engram_context_destroy, one run each. A
 * first run without a fault counts those collectives. Where one destroy
 * call makes two collectives, the victim also comes late to the first
 * (LATE_MS, alive) and then stops: the call's collectives share one
 * timeout_ms, so the survivors' call still returns within it.
 *
 * The context's group is a callbacks group over the fork launcher's, as a
 * framework's process group is wrapped: its callbacks count the
 * collectives (the victim stops on entering the chosen one), hand the
 * group's current bound (engram_group_timeout) on to the launcher's group,
 * and serve the progress hook while they wait. Then the same on the fork
 * launcher's own group, the victim stopping mid-fetch or before it calls
 * engram_write, engram_table_destroy or engram_context_destroy.
 * Usage: engram_teardown_bound_test loopback|ucx */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "tests/check.h"
#include "tests/engram_harness.h"

enum { RANKS = 3, VICTIM = RANKS - 1, EPR = 1024, EPT = 4, TOKENS = 32 };
#define TIMEOUT_MS 2000
#define SLACK_MS 1000 /* scheduling on a loaded CI machine with few cores */
#define FETCH_MS 300  /* how long survivors fetch across the victim's stop */
#define LATE_MS 1500  /* how late the victim comes to a collective before the one it stops in */

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = 128, .entries_per_token = EPT, .max_tokens = TOKENS,
                                             .recv = ENGRAM_RECV_HOST};

/* Collective counts of the fault-free run (shared with the children). */
typedef struct counts {
    int write_first, table_first, context_first, last;
} counts_t;

typedef struct run {
    const char *transport;
    int stop_at; /* the victim stops on entering this collective; 0: never */
    int late_at; /* the victim enters this collective LATE_MS late; 0: none */
    bool fetch;  /* the victim stops mid-fetch instead */
    bool direct; /* the context on the launcher's group itself; stop_at counts calls, not collectives */
    counts_t *counts;
} run_t;

/* The wrapped group: the launcher's group below a callbacks group. */
typedef struct wrap {
    engram_group_t *inner, *outer;
    int entered; /* collectives entered so far */
    int stop_at, late_at;
    bool victim;
} wrap_t;

static void serve_outer(void *arg)
{
    (void)engram_group_progress(arg);
}

/* What a framework adapter does before each collective: bound it by the
 * engram group's current timeout and serve its progress hook meanwhile. */
static void enter(wrap_t *w)
{
    ++w->entered;
    if (w->victim && w->entered == w->late_at) {
        const struct timespec late = {.tv_sec = LATE_MS / 1000, .tv_nsec = LATE_MS % 1000 * 1000000L};
        nanosleep(&late, NULL);
    }
    if (w->victim && w->entered == w->stop_at)
        raise(SIGSTOP);
    engram_group_set_timeout(w->inner, engram_group_timeout(w->outer));
    bool hook = engram_group_progress(w->outer) == 1;
    engram_group_set_progress(w->inner, hook ? serve_outer : NULL, w->outer);
}

static int wrap_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    wrap_t *w = ctx;
    enter(w);
    return engram_group_allgather(w->inner, send, recv, bytes) != ENGRAM_OK;
}

static int wrap_barrier(void *ctx)
{
    wrap_t *w = ctx;
    enter(w);
    return engram_group_barrier(w->inner) != ENGRAM_OK;
}

static void fill_indices(int64_t *idx, unsigned round)
{
    for (uint32_t i = 0; i < TOKENS * EPT; i++)
        idx[i] = (int64_t)(((uint64_t)i * 131 + round * 17) % ((uint64_t)EPR * RANKS));
}

/* Survivors fetch for FETCH_MS (or until a wait fails), each wait bounded. */
static void fetch_across(harness_t *h)
{
    int64_t idx[TOKENS * EPT];
    unsigned round = 0;
    long long start = (long long)engram_now_ms();
    bool failed = false;
    while (!failed && (long long)engram_now_ms() - start < FETCH_MS) {
        fill_indices(idx, ++round);
        engram_fetch_t *f;
        CHECK_OK(engram_fetch(h->table, idx, TOKENS, 0, &f));
        long long t0 = (long long)engram_now_ms();
        const void *rows;
        engram_status_t st = engram_wait(f, &rows, NULL);
        CHECK((long long)engram_now_ms() - t0 <= TIMEOUT_MS + SLACK_MS);
        if (st == ENGRAM_OK)
            CHECK(harness_check(h, idx, TOKENS, false, rows, NULL));
        else
            CHECK(st == ENGRAM_ERR_TIMEOUT || st == ENGRAM_ERR_PEER);
        failed = st != ENGRAM_OK;
        engram_fetch_release(f);
    }
}

static int rank_main(engram_group_t *g, void *arg)
{
    const run_t *run = arg;
    int rank = engram_group_rank(g);
    int32_t pid = (int32_t)getpid(), pids[RANKS];
    CHECK_OK(engram_group_allgather(g, &pid, pids, sizeof(pid)));
    wrap_t w = {.inner = g, .stop_at = run->stop_at, .late_at = run->late_at, .victim = rank == VICTIM};
    engram_group_callbacks_t cb = {.size = sizeof(cb), .rank = rank, .nranks = RANKS, .ctx = &w,
                                   .allgather = wrap_allgather, .barrier = wrap_barrier};
    CHECK_OK(engram_group_callbacks_create(&cb, &w.outer));
    harness_t h;
    CHECK_OK(harness_open(&h, run->direct ? g : w.outer, run->transport, false, &params));
    counts_t seen = {.write_first = w.entered + 1};
    /* direct: the victim stops before its stop_at-th call (write, table destroy, context destroy) */
    bool stop_before[4] = {false};
    if (run->direct && w.victim && run->stop_at > 0)
        stop_before[run->stop_at] = true;
    if (stop_before[1])
        raise(SIGSTOP);
    long long t0 = (long long)engram_now_ms();
    engram_status_t write_st = harness_write(&h);
    long long write_ms = (long long)engram_now_ms() - t0;
    if (run->fetch && write_st == ENGRAM_OK) {
        if (w.victim) {
            int64_t idx[TOKENS * EPT];
            engram_fetch_t *f;
            fill_indices(idx, 0);
            CHECK_OK(engram_fetch(h.table, idx, TOKENS, 0, &f));
            raise(SIGSTOP); /* its gets in flight, the survivors mid-fetch */
        }
        fetch_across(&h);
    }
    seen.table_first = w.entered + 1;
    if (stop_before[2])
        raise(SIGSTOP);
    t0 = (long long)engram_now_ms();
    engram_status_t table_st = engram_table_destroy(h.table);
    long long table_ms = (long long)engram_now_ms() - t0;
    char table_err[ENGRAM_LAST_ERROR_BYTES];
    snprintf(table_err, sizeof(table_err), "%s", engram_last_error());
    seen.context_first = w.entered + 1;
    if (stop_before[3])
        raise(SIGSTOP);
    t0 = (long long)engram_now_ms();
    engram_status_t context_st = engram_context_destroy(h.ctx);
    long long context_ms = (long long)engram_now_ms() - t0;
    seen.last = w.entered;
    engram_group_destroy(w.outer);

    if (run->stop_at == 0 && !run->fetch) { /* the fault-free run: every collective counted */
        CHECK_OK(write_st);
        CHECK_OK(table_st);
        CHECK_OK(context_st);
        if (rank == 0)
            *run->counts = seen;
        return 0;
    }
    printf("rank %d: write %s after %lld ms; table destroy %s after %lld ms (%s); context destroy %s after %lld ms\n",
           rank, engram_status_str(write_st), write_ms, engram_status_str(table_st), table_ms, table_err,
           engram_status_str(context_st), context_ms);
    fflush(stdout);
    /* The write's wait is bounded as well; once it failed the group stays
     * failed, and teardown does not wait again. */
    CHECK(write_ms <= TIMEOUT_MS + SLACK_MS);
    /* where the fault is, by collective count (wrapped) or by call (direct) */
    int first[3] = {run->counts->write_first, run->counts->table_first, run->counts->context_first};
    if (run->direct)
        first[0] = 1, first[1] = 2, first[2] = 3;
    if (run->stop_at >= first[0] && run->stop_at < first[1])
        CHECK(write_st == ENGRAM_ERR_TIMEOUT || write_st == ENGRAM_ERR_PEER);
    else
        CHECK_OK(write_st);
    /* The bound: each destroy within one timeout_ms; both together too,
     * unless the victim came late to the first, which is waited for. */
    CHECK(table_ms <= TIMEOUT_MS + SLACK_MS && context_ms <= TIMEOUT_MS + SLACK_MS);
    if (run->late_at == 0)
        CHECK(table_ms + context_ms <= TIMEOUT_MS + SLACK_MS);
    if (run->stop_at >= first[2]) {
        CHECK_OK(table_st);
    } else {
        CHECK(table_st == ENGRAM_ERR_PEER);
        CHECK(strstr(table_err, "torn down on this rank without the other ranks' agreement") != NULL);
        CHECK(strstr(table_err, "rank 2") != NULL);
    }
    CHECK(context_st == ENGRAM_ERR_PEER);
    kill((pid_t)pids[VICTIM], SIGKILL); /* stopped for good: the launcher can reap it */
    return 0;
}

static void run_once(run_t *run, const char *what)
{
    int codes[RANKS];
    long long t0 = (long long)engram_now_ms();
    engram_status_t st = engram_group_fork_run(RANKS, 0, rank_main, run, codes);
    printf("%s: fork_run %s after %lld ms; exit codes %d %d %d\n", what, engram_status_str(st),
           (long long)engram_now_ms() - t0, codes[0], codes[1], codes[2]);
    fflush(stdout);
    bool fault = run->fetch || run->stop_at != 0;
    for (int r = 0; r < RANKS; r++)
        CHECK(codes[r] == (fault && r == VICTIM ? 128 + SIGKILL : 0));
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", TIMEOUT_MS);
    CHECK(setenv("ENGRAM_TIMEOUT_MS", timeout, 1) == 0);
    counts_t *counts = mmap(NULL, sizeof(*counts), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(counts != MAP_FAILED);
    run_t run = {.transport = argv[1], .counts = counts};
    run_once(&run, "no fault");
    printf("collectives: write %d..%d, table destroy %d..%d, context destroy %d..%d\n", counts->write_first,
           counts->table_first - 1, counts->table_first, counts->context_first - 1, counts->context_first,
           counts->last);
    CHECK(counts->write_first < counts->table_first && counts->table_first < counts->context_first &&
          counts->context_first <= counts->last);
    run.fetch = true;
    run_once(&run, "rank 2 stops mid-fetch");
    run.fetch = false;
    for (run.stop_at = counts->write_first; run.stop_at <= counts->last; run.stop_at++) {
        char what[96];
        snprintf(what, sizeof(what), "rank 2 stops entering collective %d (%s)", run.stop_at,
                 run.stop_at < counts->table_first     ? "engram_write"
                 : run.stop_at < counts->context_first ? "engram_table_destroy"
                                                       : "engram_context_destroy");
        run_once(&run, what);
        /* two collectives of one destroy call: late to the first, then gone */
        if (run.stop_at > counts->table_first && run.stop_at < counts->context_first) {
            run.late_at = run.stop_at - 1;
            snprintf(what, sizeof(what), "rank 2 comes %d ms late to collective %d, stops entering %d", LATE_MS,
                     run.late_at, run.stop_at);
            run_once(&run, what);
            run.late_at = 0;
        }
    }
    /* The launcher's own group: the victim stops mid-fetch, or before a call. */
    run.direct = true;
    run.stop_at = 0;
    run.fetch = true;
    run_once(&run, "launcher's group: rank 2 stops mid-fetch");
    run.fetch = false;
    static const char *const calls[] = {"", "engram_write", "engram_table_destroy", "engram_context_destroy"};
    for (run.stop_at = 1; run.stop_at <= 3; run.stop_at++) {
        char what[96];
        snprintf(what, sizeof(what), "launcher's group: rank 2 stops before %s", calls[run.stop_at]);
        run_once(&run, what);
    }
    munmap(counts, sizeof(*counts));
    printf("engram_teardown_bound_test: ok\n");
    return 0;
}
