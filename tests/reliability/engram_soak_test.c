/* Load: on each of 2 forked ranks (loopback), one thread per queue fetches
 * concurrently from one table with engram_fetch_on_queues, for SOAK_SECONDS
 * (argv[1]). Every fetch's rows and scales are checked against the
 * reference (a few deliberately out of range: zero rows, counted),
 * and the resident set, sampled from /proc/self/statm once a second after a
 * warm-up, must stay flat (growth under RSS_SLACK_KIB; not under ASan,
 * whose quarantine grows it by design). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "tests/check.h"
#include "tests/engram_harness.h"

#define RANKS 2
#define EPR 4096u
#define EPT 8u
#define MAX_TOKENS 64u
#define RSS_SLACK_KIB 4096

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = 192, .entries_per_token = EPT, .max_tokens = MAX_TOKENS,
                                             .scale_packs = 2, .recv = ENGRAM_RECV_HOST};

typedef struct worker {
    harness_t *h;
    int queue;
    double seconds;
    unsigned seed;
    atomic_bool *failed;
    uint64_t fetches, rows, bad_rows;
} worker_t;

static double now_s(void)
{
    return (double)engram_now_ns() * 1e-9;
}

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    if (f)
        fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One fetch: random tokens and indices; one fetch in 256 has about 1 in 8
 * indices out of range (each such fetch logs one error line). */
static bool fetch_once(worker_t *w, int64_t *idx)
{
    uint64_t total = (uint64_t)EPR * RANKS;
    uint32_t tokens = 1 + (uint32_t)(rand_r(&w->seed) % MAX_TOKENS);
    uint64_t expect_bad = 0;
    bool with_bad = rand_r(&w->seed) % 256 == 0;
    for (uint32_t i = 0; i < tokens * EPT; i++) {
        uint32_t r = (uint32_t)rand_r(&w->seed);
        bool bad = with_bad && r % 8 == 0;
        idx[i] = bad ? (r & 1 ? -1 - (int64_t)(r % 7) : (int64_t)(total + r % 1000)) : (int64_t)(r % total);
        expect_bad += bad;
    }
    bool col_major = rand_r(&w->seed) & 1;
    engram_fetch_t *f;
    engram_status_t st = engram_fetch_on_queues(w->h->table, w->queue, 1, idx, tokens,
                                                col_major ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0, &f);
    if (st != ENGRAM_OK) {
        fprintf(stderr, "queue %d: fetch failed: %s\n", w->queue, engram_last_error());
        return false;
    }
    const void *rows;
    const uint32_t *sf;
    st = engram_wait(f, &rows, &sf);
    uint64_t bad_count = 0;
    engram_fetch_bad_indices(f, &bad_count, NULL, NULL);
    bool ok = (st == (expect_bad ? ENGRAM_ERR_BAD_INDEX : ENGRAM_OK)) && bad_count == expect_bad &&
              harness_check(w->h, idx, tokens, col_major, rows, sf);
    engram_fetch_release(f);
    if (!ok)
        fprintf(stderr, "queue %d: wrong result (status %d, %llu bad, expected %llu)\n", w->queue, (int)st,
                (unsigned long long)bad_count, (unsigned long long)expect_bad);
    w->fetches++;
    w->rows += (uint64_t)tokens * EPT;
    w->bad_rows += expect_bad;
    return ok;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    int64_t *idx = malloc(sizeof(int64_t) * MAX_TOKENS * EPT);
    double end = now_s() + w->seconds;
    while (!atomic_load(w->failed) && now_s() < end)
        if (!fetch_once(w, idx))
            atomic_store(w->failed, true);
    free(idx);
    return NULL;
}

static int rank_main(engram_group_t *g, void *arg)
{
    double seconds = *(const double *)arg;
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &params));
    CHECK_OK(harness_write(&h));
    int queues = engram_table_queues(h.table);
    CHECK(queues >= 2);
    worker_t *w = calloc((size_t)queues, sizeof(*w));
    pthread_t *tid = calloc((size_t)queues, sizeof(*tid));
    atomic_bool failed = false;
    for (int q = 0; q < queues; q++) {
        w[q] = (worker_t){.h = &h, .queue = q, .seconds = seconds, .failed = &failed,
                          .seed = (unsigned)(engram_group_rank(g) * 1000 + q)};
        CHECK(pthread_create(&tid[q], NULL, worker_main, &w[q]) == 0);
    }
    /* RSS: baseline after a warm-up tenth of the run, then the maximum. */
    double start = now_s();
    long base = -1, peak = 0;
    while (now_s() - start < seconds && !atomic_load(&failed)) {
        sleep(1);
        long rss = rss_kib();
        CHECK(rss > 0);
        if (base < 0 && now_s() - start >= seconds / 10)
            base = rss;
        if (base >= 0 && rss > peak)
            peak = rss;
    }
    uint64_t fetches = 0, rows = 0, bad = 0;
    for (int q = 0; q < queues; q++) {
        CHECK(pthread_join(tid[q], NULL) == 0);
        fetches += w[q].fetches, rows += w[q].rows, bad += w[q].bad_rows;
    }
    CHECK(!atomic_load(&failed));
    CHECK(fetches > 0);
    printf("soak rank %d: %d threads, %.0f s: %llu fetches, %llu rows checked (%llu out of range, zero-filled), "
           "RSS %ld KiB after warm-up, peak %ld KiB\n",
           engram_group_rank(g), queues, seconds, (unsigned long long)fetches, (unsigned long long)rows,
           (unsigned long long)bad, base, peak);
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's quarantine holds freed blocks (up to 256 MiB), so RSS grows by
     * design; LeakSanitizer checks for leaks at exit instead. */
    puts("RSS flatness not asserted under ASan (quarantine); LeakSanitizer checks leaks");
#else
    CHECK(base > 0 && peak - base < RSS_SLACK_KIB);
#endif
    free(w);
    free(tid);
    harness_close(&h);
    return 0;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 60;
    CHECK(seconds >= 1);
    CHECK(setenv("ENGRAM_NUM_QPS", "4", 1) == 0);
    CHECK(setenv("ENGRAM_FETCH_SLOTS", "4", 1) == 0); /* one per thread: BUSY would be a slot leak */
    CHECK_OK(engram_group_fork_run(RANKS, 0, rank_main, &seconds, NULL));
    puts("engram_soak_test: ok");
    return 0;
}
