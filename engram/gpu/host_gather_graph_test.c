/* Captured host_gather fetches (engram_gather_job_capture) against the host
 * fake of the stream operations and a fake graph (host_gather_fake.h):
 * replays with new indices each time, back to back, with and without a
 * cache, bad indices tallied per replay, two graphs of one pool beside a
 * fetch that is not captured, the job's return to plain fetches after it
 * is uncaptured (idle, or with a replay armed), every capture error, and
 * what an idle pool with a captured fetch costs in CPU. Every replay's rows
 * are compared with the table indexed on the host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sched.h>
#include <time.h>

#include "engram/gpu/host_gather_fake.h"
#include "hal/log.h"
#include "tests/check.h"

static const shape_t SHAPE = {.ranks = 4, .entries_per_rank = 1000, .row_bytes = 72, .packs = 2,
                              .local_peers = 4, .chunk_bytes = 72 * 40};

/* A slot with its fork and join events (what capture needs). */
typedef struct gslot {
    slot_t s;
    fake_event_t fork, join;
} gslot_t;

static void gslot_make(gslot_t *g, engram_gather_pool_t *pool, const table_t *t, uint32_t tokens, uint32_t ept)
{
    memset(g, 0, sizeof(*g));
    slot_make(&g->s, pool, t, tokens, ept);
    /* events are in the buffers the job copied at create: make the job again with them */
    engram_gather_job_destroy(g->s.job);
    g->s.buf.fork_event = &g->fork;
    g->s.buf.join_event = &g->join;
    CHECK_OK(engram_gather_job_create(pool, &t->src, &g->s.buf, t->sh.chunk_bytes, &g->s.job));
}

static void fill(const table_t *t, int64_t *idx, uint64_t n, int bad)
{
    const uint64_t total = (uint64_t)t->sh.ranks * t->sh.entries_per_rank;
    for (uint64_t r = 0; r < n; r++)
        idx[r] = (int64_t)(next_rand() % total);
    for (int b = 0; b < bad && (uint64_t)b < n; b++)
        idx[next_rand() % n] = b % 2 ? -1 - b : (int64_t)(total + (uint64_t)b);
}

/* Captures one fetch of idx on st into g (the join included, as the
 * driver queues it at the call). */
static void capture(fake_graph_t *g, gslot_t *gs, fake_stream_t *st, const int64_t *idx, uint32_t tokens,
                    uint32_t ept, bool col, const cache_t *cache)
{
    fake_graph_begin(g, st);
    CHECK_OK(engram_gather_job_capture(gs->s.job, &fake_ops, st, idx, tokens, ept, col, cache ? &cache->dev : NULL,
                                       gs->s.rows, gs->s.scales_out));
    CHECK_OK(engram_gather_job_join(gs->s.job, &fake_ops, st));
    fake_graph_end(g);
    CHECK(g->num_streams == 2); /* the copy stream was drawn in, and joined */
}

/* A replay, run to its end (the fetch stream follows the join). */
static void replay_sync(const fake_graph_t *g, fake_stream_t *st)
{
    fake_graph_replay(g);
    stream_sync(st);
}

static void check_hits(const cache_t *cache, const int64_t *idx, uint64_t n, slot_t *s)
{
    uint64_t hits = 0;
    for (uint64_t r = 0; cache != NULL && r < n; r++)
        hits += engram_hot_find(&cache->dev.hash, idx[r]) != ENGRAM_HOT_MISS;
    CHECK(engram_gather_job_hits(s->job) == hits);
}

/* Replays with new indices (some bad) each time, each checked; then a run
 * back to back, checked at its end; with and without a cache, both scale
 * layouts. */
static void test_replays(bool with_cache, bool col)
{
    fixture_t fx;
    fixture_open(&fx, SHAPE, 3, 64, 3);
    gslot_t gs;
    gslot_make(&gs, fx.pool, &fx.t, 64, 3);
    cache_t cache;
    if (with_cache)
        cache_make(&cache, &fx.t, 3);
    const uint32_t tokens = 50, ept = 3;
    const uint64_t n = (uint64_t)tokens * ept;
    int64_t idx[64 * 3]; /* the captured tensor: each replay reads it */
    fill(&fx.t, idx, n, 0);
    fake_graph_t g;
    capture(&g, &gs, &fx.st, idx, tokens, ept, col, with_cache ? &cache : NULL);
    CHECK(engram_gather_job_replays(gs.s.job) == 0); /* the capture ran nothing */
    for (int rep = 0; rep < 40; rep++) {
        fill(&fx.t, idx, n, rep % 4); /* 0..3 bad rows */
        memset(gs.s.rows, 0xee, n * SHAPE.row_bytes);
        replay_sync(&g, &fx.st);
        wait_finished(&gs.s);
        check_fetch(&fx.t, &gs.s, idx, tokens, ept, col); /* rows, scales, this replay's tally */
        check_hits(with_cache ? &cache : NULL, idx, n, &gs.s);
        CHECK(engram_gather_job_replays(gs.s.job) == (uint64_t)rep + 1);
    }
    fill(&fx.t, idx, n, 1);
    for (int rep = 0; rep < 25; rep++) /* queued back to back on one stream */
        fake_graph_replay(&g);
    stream_sync(&fx.st);
    wait_finished(&gs.s);
    check_fetch(&fx.t, &gs.s, idx, tokens, ept, col);
    CHECK(engram_gather_job_replays(gs.s.job) == 65);
    engram_gather_job_uncapture(gs.s.job);
    fake_graph_free(&g);
    /* the slot serves plain fetches again */
    run_fetch_cached(&fx.t, &gs.s, &fx.st, 40, ept, col, true, with_cache ? &cache : NULL);
    if (with_cache)
        cache_free(&cache);
    slot_free(&gs.s);
    fixture_close(&fx);
}

/* Two graphs of one pool, replayed alternately and concurrently (each on
 * its own stream), beside plain fetches of a third slot. */
static void test_two_graphs(void)
{
    fixture_t fx;
    fixture_open(&fx, SHAPE, 2, 32, 4);
    gslot_t a, b;
    gslot_make(&a, fx.pool, &fx.t, 32, 4);
    gslot_make(&b, fx.pool, &fx.t, 32, 4);
    fake_stream_t st2;
    stream_start(&st2);
    int64_t ia[32 * 4], ib[32 * 4];
    fill(&fx.t, ia, 32 * 4, 0);
    fill(&fx.t, ib, 20 * 4, 0);
    fake_graph_t ga, gb;
    capture(&ga, &a, &fx.st, ia, 32, 4, false, NULL);
    capture(&gb, &b, &st2, ib, 20, 4, true, NULL);
    fake_stream_t st3;
    stream_start(&st3);
    for (int rep = 0; rep < 20; rep++) {
        fill(&fx.t, ia, 32 * 4, rep % 2);
        fill(&fx.t, ib, 20 * 4, rep % 3);
        fake_graph_replay(&ga);
        fake_graph_replay(&gb);
        /* a plain fetch in flight on the fixture's slot meanwhile */
        run_fetch(&fx.t, &fx.s, &st3, 17, 4, rep % 2 == 0, rep % 2 == 1);
        stream_sync(&fx.st);
        stream_sync(&st2);
        wait_finished(&a.s);
        wait_finished(&b.s);
        check_fetch(&fx.t, &a.s, ia, 32, 4, false);
        check_fetch(&fx.t, &b.s, ib, 20, 4, true);
    }
    CHECK(engram_gather_job_replays(a.s.job) == 20 && engram_gather_job_replays(b.s.job) == 20);
    /* one graph ends while the other goes on */
    engram_gather_job_uncapture(a.s.job);
    fill(&fx.t, ib, 20 * 4, 2);
    replay_sync(&gb, &st2);
    wait_finished(&b.s);
    check_fetch(&fx.t, &b.s, ib, 20, 4, true);
    engram_gather_job_uncapture(b.s.job);
    engram_gather_job_uncapture(b.s.job); /* again: nothing */
    fake_graph_free(&ga);
    fake_graph_free(&gb);
    stream_stop(&st2);
    stream_stop(&st3);
    slot_free(&a.s);
    slot_free(&b.s);
    fixture_close(&fx);
}

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000}, NULL);
}

/* Uncaptured with a replay armed and not begun (the watcher asleep for
 * long): the replay passes, its stream drains, and the slot serves plain
 * fetches; a replay the pool had begun ends first. Either way no hang. */
static void test_uncapture_armed(void)
{
    fixture_t fx;
    fixture_open(&fx, SHAPE, 2, 16, 2);
    CHECK_OK(engram_gather_pool_set_wake(fx.pool, 10000000, false)); /* the watcher only, every 10 ms */
    gslot_t gs;
    gslot_make(&gs, fx.pool, &fx.t, 16, 2);
    int64_t idx[32];
    fill(&fx.t, idx, 32, 0);
    fake_graph_t g;
    capture(&g, &gs, &fx.st, idx, 16, 2, false, NULL);
    for (int round = 0; round < 3; round++) {
        sleep_ms(2); /* past the pool's spin: the watcher sleeps */
        const uint32_t before = __atomic_load_n(gs.s.ready, __ATOMIC_ACQUIRE);
        fake_graph_replay(&g);
        /* armed (the caller of uncapture sees every replay it launched
         * arm its word: the GPU path synchronizes the device first) */
        while (__atomic_load_n(gs.s.ready, __ATOMIC_ACQUIRE) == before)
            sched_yield();
        engram_gather_job_uncapture(gs.s.job);
        stream_sync(&fx.st); /* the replay ended: taken and done, or let pass */
        run_fetch(&fx.t, &gs.s, &fx.st, 16, 2, false, true);
        if (round < 2) { /* captured again on the same slot */
            fake_graph_free(&g);
            capture(&g, &gs, &fx.st, idx, 16, 2, false, NULL);
        }
    }
    fake_graph_free(&g);
    slot_free(&gs.s);
    fixture_close(&fx);
}

/* Every way a capture is refused or fails: the job is left idle (a plain
 * fetch then runs), nothing watched. */
static void test_capture_errors(void)
{
    fixture_t fx;
    fixture_open(&fx, SHAPE, 2, 16, 2);
    int64_t idx[32];
    fill(&fx.t, idx, 32, 0);
    fake_graph_t g;
    /* a job without events */
    fake_graph_begin(&g, &fx.st);
    CHECK_STATUS(engram_gather_job_capture(fx.s.job, &fake_ops, &fx.st, idx, 16, 2, false, NULL, fx.s.rows,
                                           fx.s.scales_out),
                 ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "no fork and join events") != NULL);
    fake_graph_end(&g);
    fake_graph_free(&g);
    gslot_t gs;
    gslot_make(&gs, fx.pool, &fx.t, 16, 2);
    /* too many rows */
    CHECK_STATUS(engram_gather_job_capture(gs.s.job, &fake_ops, &fx.st, idx, 17, 2, false, NULL, gs.s.rows,
                                           gs.s.scales_out),
                 ENGRAM_ERR_OVERFLOW);
    /* no rows: nothing captured, nothing watched */
    CHECK_OK(engram_gather_job_capture(gs.s.job, &fake_ops, &fx.st, idx, 0, 2, false, NULL, gs.s.rows,
                                       gs.s.scales_out));
    CHECK(fx.st.queued == 0);
    /* a failure at each op the capture queues: on the fetch's stream the
     * fork's record, the indices' copy, the ready write, the second fork's
     * record; on the copy stream the fork's wait, the pool's wake-up, the
     * second fork's wait, the wait for the pool, a chunk's wait and copy,
     * the scales' copy */
    for (int at = 1; at <= 12; at++) {
        fake_stream_t *fail = at <= 4 ? &fx.st : &gs.s.copy;
        fx.st.queued = gs.s.copy.queued = 0;
        fail->fail_at = at <= 4 ? at : at - 4;
        fake_graph_begin(&g, &fx.st);
        engram_status_t st = engram_gather_job_capture(gs.s.job, &fake_ops, &fx.st, idx, 16, 2, false, NULL,
                                                       gs.s.rows, gs.s.scales_out);
        fake_graph_end(&g);
        fail->fail_at = 0;
        fake_graph_free(&g);
        if (st == ENGRAM_OK) { /* past the ops it queues: a good capture */
            CHECK(at == 12);
            engram_gather_job_uncapture(gs.s.job);
            break;
        }
        CHECK(st == ENGRAM_ERR_UNSUPPORTED);
        CHECK(strstr(engram_last_error(), "injected failure") != NULL);
        CHECK(engram_gather_job_finished(gs.s.job));
        stream_sync(&gs.s.copy);
        run_fetch(&fx.t, &gs.s, &fx.st, 16, 2, false, false); /* the job is idle and whole */
    }
    /* a captured job refuses a second capture and a plain fetch */
    capture(&g, &gs, &fx.st, idx, 16, 2, false, NULL);
    CHECK_STATUS(engram_gather_job_capture(gs.s.job, &fake_ops, &fx.st, idx, 16, 2, false, NULL, gs.s.rows,
                                           gs.s.scales_out),
                 ENGRAM_ERR_STATE);
    CHECK(strstr(engram_last_error(), "belongs to a captured fetch") != NULL);
    CHECK_STATUS(engram_gather_job_queue(gs.s.job, &fake_ops, &fx.st, idx, 16, 2, false, NULL, gs.s.rows,
                                         gs.s.scales_out),
                 ENGRAM_ERR_STATE);
    /* the join's link fails: reported */
    gs.s.copy.queued = 0;
    gs.s.copy.fail_at = 1;
    CHECK_STATUS(engram_gather_job_join(gs.s.job, &fake_ops, &fx.st), ENGRAM_ERR_UNSUPPORTED);
    gs.s.copy.fail_at = 0;
    /* abandon of a captured job (a table's destroy) uncaptures it */
    engram_gather_job_abandon(gs.s.job);
    run_fetch(&fx.t, &gs.s, &fx.st, 16, 2, false, false);
    fake_graph_free(&g);
    /* the watch period's bounds */
    CHECK_STATUS(engram_gather_pool_set_wake(fx.pool, 999, true), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "outside 1000..10000000") != NULL);
    CHECK_STATUS(engram_gather_pool_set_wake(fx.pool, 10000001, true), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_gather_pool_set_wake(NULL, 50000, true), ENGRAM_ERR_INVALID);
    CHECK_OK(engram_gather_pool_set_wake(fx.pool, 1000, false));
    slot_free(&gs.s);
    fixture_close(&fx);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* CPU an idle pool of 4 threads costs over `ms`, as a share of one core. */
static double idle_share(long ms)
{
    sleep_ms(5); /* past the spin after the last job */
    const double c0 = cpu_seconds();
    sleep_ms(ms);
    return (cpu_seconds() - c0) / (ms * 1e-3);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A replay's time from an idle pool (past its spin), median of 9. */
static int64_t idle_replay_ns(const fake_graph_t *g, fake_stream_t *st, slot_t *s)
{
    int64_t t[9];
    for (int i = 0; i < 9; i++) {
        sleep_ms(3);
        const int64_t t0 = now_ns();
        replay_sync(g, st);
        t[i] = now_ns() - t0;
        wait_finished(s);
    }
    qsort(t, 9, sizeof(t[0]), cmp_i64);
    return t[4];
}

/* What an idle table with a captured fetch costs, and what a replay waits
 * for its pool: with no captured fetch every thread sleeps; with one, the
 * watcher wakes once per period; a replay's host function wakes the pool
 * at once, where the watcher alone takes up to its period. */
static void test_idle_cost(void)
{
    fixture_t fx;
    fixture_open(&fx, SHAPE, 4, 16, 2);
    gslot_t gs;
    gslot_make(&gs, fx.pool, &fx.t, 16, 2);
    const double none = idle_share(300);
    int64_t idx[32];
    fill(&fx.t, idx, 32, 0);
    fake_graph_t g;
    capture(&g, &gs, &fx.st, idx, 16, 2, false, NULL); /* with the host node (the default) */
    const double by_default = idle_share(300);         /* the default period */
    double watched[2];
    const int64_t periods[2] = {200000, 50000};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(engram_gather_pool_set_wake(fx.pool, periods[i], true));
        watched[i] = idle_share(300);
    }
    CHECK_OK(engram_gather_pool_set_wake(fx.pool, 10000000, true)); /* the watcher all but off */
    const int notified = gs.s.copy.notified;
    const int64_t woken = idle_replay_ns(&g, &fx.st, &gs.s);
    CHECK(gs.s.copy.notified == notified + 9); /* one host function per replay */
    fake_graph_free(&g);
    engram_gather_job_uncapture(gs.s.job);
    CHECK_OK(engram_gather_pool_set_wake(fx.pool, 10000000, false)); /* no host node: the watcher's period */
    capture(&g, &gs, &fx.st, idx, 16, 2, false, NULL);
    const int64_t watched_only = idle_replay_ns(&g, &fx.st, &gs.s);
    printf("host_gather_graph_test: idle pool of 4 threads, share of one core: %.4f with no captured fetch; "
           "watching one: %.4f at the default period, %.4f at 200 us, %.4f at 50 us; a replay from idle: "
           "%.3f ms woken by its host function, %.3f ms by a watcher of 10 ms alone\n",
           none, by_default, watched[0], watched[1], woken * 1e-6, watched_only * 1e-6);
    CHECK(none < 0.02);         /* every thread asleep */
    CHECK(by_default < 0.1);    /* one short wake-up a period */
    CHECK(watched[1] < 0.8);    /* never a spinning core */
    CHECK(watched_only > 1000000); /* the watcher's period, about half of it on average */
    CHECK(woken * 2 < watched_only && woken < 8000000); /* woken by the host function, not the watcher */
    wait_finished(&gs.s);
    check_fetch(&fx.t, &gs.s, idx, 16, 2, false);
    engram_gather_job_uncapture(gs.s.job);
    fake_graph_free(&g);
    slot_free(&gs.s);
    fixture_close(&fx);
}

int main(void)
{
    test_replays(false, false);
    test_replays(false, true);
    test_replays(true, false);
    test_replays(true, true);
    test_two_graphs();
    test_uncapture_armed();
    test_capture_errors();
    test_idle_cost();
    printf("host_gather_graph_test: ok\n");
    return 0;
}
