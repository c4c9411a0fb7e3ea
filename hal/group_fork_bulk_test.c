/* The fork launcher relaying large allgathers: contents checked, and the
 * throughput printed: the first round's (receive buffers never touched
 * before, as in a program's one big exchange) and the median round's.
 * Then an allgather slowed far past the timeout still completes, because
 * it keeps moving.
 *
 * Usage: group_fork_bulk_test [MiB per rank [ranks [rounds]]]
 * (defaults 64, 4, 3), so the same binary serves as the benchmark. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "hal/group.h"
#include "hal/group_fork_wire.h"
#include "hal/group_provider.h"
#include "hal/testdata/check_error.h"

#define MAX_ROUNDS 15

typedef struct bulk {
    size_t bytes; /* per rank, a multiple of 8 */
    int rounds;
} bulk_t;

static double now_s(void)
{
    return (double)engram_now_ns() * 1e-9;
}

/* Word i of rank r's contribution in round `round`: distinct for every
 * (round, rank, i), so a misplaced or stale word is caught. */
static uint64_t word(int round, int rank, size_t i)
{
    return ((uint64_t)round << 56) ^ ((uint64_t)rank << 48) ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull >> 16);
}

static void fill(uint64_t *buf, size_t words, int round, int rank)
{
    for (size_t i = 0; i < words; i++)
        buf[i] = word(round, rank, i);
}

static void check_gathered(const uint64_t *recv, size_t words, int round, int n)
{
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < words; i++)
            CHECK(recv[(size_t)r * words + i] == word(round, r, i));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bulk_main(engram_group_t *g, void *arg)
{
    const bulk_t *b = arg;
    int n = engram_group_size(g), me = engram_group_rank(g);
    size_t words = b->bytes / sizeof(uint64_t);
    uint64_t *send = malloc(b->bytes), *recv = malloc(b->bytes * (size_t)n);
    CHECK(send != NULL && recv != NULL);
    double secs[MAX_ROUNDS];
    for (int round = 0; round < b->rounds; round++) {
        fill(send, words, round, me);
        /* Everyone starts together, so the time is the transfer's only. */
        CHECK_OK(engram_group_barrier(g));
        double t0 = now_s();
        CHECK_OK(engram_group_allgather(g, send, recv, b->bytes));
        CHECK_OK(engram_group_barrier(g));
        secs[round] = now_s() - t0;
        check_gathered(recv, words, round, n);
    }
    if (me == 0) {
        double first = secs[0];
        qsort(secs, (size_t)b->rounds, sizeof(secs[0]), cmp_double);
        double median = secs[b->rounds / 2];
        /* Delivered: every rank receives n contributions. */
        double mb = (double)b->bytes * n * n / 1e6;
        printf("group_fork_bulk_test: %d ranks x %zu MiB: first round %.3f s (%.0f MB/s delivered), "
               "median of %d %.3f s (%.0f MB/s; min %.3f, max %.3f)\n",
               n, b->bytes >> 20, first, mb / first, b->rounds, median, mb / median, secs[0], secs[b->rounds - 1]);
    }
    free(send);
    free(recv);
    return 0;
}

/* The slow case: the last rank plays its part by hand and trickles its
 * SLOW_CHUNKS pieces in SLOW_GAP_MS apart, several timeouts in all. The
 * others have sent theirs and see nothing move on their own sockets: only
 * the launcher's progress notes keep their collective alive. */
#define SLOW_TIMEOUT_MS 1000
#define SLOW_CHUNKS 12
#define SLOW_GAP_MS 250
#define SLOW_CHUNK_BYTES ((size_t)256 << 10)

static void write_all(int fd, const void *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);
        CHECK(n > 0);
        done += (size_t)n;
    }
}

static void read_all(int fd, void *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = read(fd, (char *)buf + done, len - done);
        CHECK(n > 0);
        done += (size_t)n;
    }
}

/* Rank n-1's allgather, sent slowly over the group's socket. */
static void trickle_allgather(engram_group_t *g, const uint64_t *send, uint64_t *recv, size_t bytes)
{
    int fd = ((const fork_rank_t *)g->provider)->fd, n = engram_group_size(g);
    fork_request_t req = {.op = FORK_OP_ALLGATHER, .rank = n - 1, .bytes = bytes, .timeout_ms = SLOW_TIMEOUT_MS};
    write_all(fd, &req, sizeof(req));
    for (int c = 0; c < SLOW_CHUNKS; c++) {
        usleep(SLOW_GAP_MS * 1000);
        write_all(fd, (const char *)send + (size_t)c * SLOW_CHUNK_BYTES, SLOW_CHUNK_BYTES);
    }
    fork_reply_t rep;
    read_all(fd, &rep, sizeof(rep));
    CHECK(rep.status == ENGRAM_OK && rep.bytes == (uint64_t)bytes * (uint64_t)n);
    read_all(fd, recv, (size_t)rep.bytes);
}

static int slow_main(engram_group_t *g, void *arg)
{
    (void)arg;
    int n = engram_group_size(g), me = engram_group_rank(g);
    size_t bytes = SLOW_CHUNKS * SLOW_CHUNK_BYTES, words = bytes / sizeof(uint64_t);
    uint64_t *send = malloc(bytes), *recv = malloc(bytes * (size_t)n);
    CHECK(send != NULL && recv != NULL);
    fill(send, words, 0, me);
    engram_group_set_timeout(g, SLOW_TIMEOUT_MS);
    CHECK_OK(engram_group_barrier(g));
    double t0 = now_s();
    if (me == n - 1) {
        trickle_allgather(g, send, recv, bytes);
    } else {
        CHECK_OK(engram_group_allgather(g, send, recv, bytes));
        CHECK(now_s() - t0 > (double)SLOW_CHUNKS * SLOW_GAP_MS / 1000 * 0.9);
    }
    check_gathered(recv, words, 0, n);
    /* The stream is where the group expects it: it goes on working. */
    CHECK_OK(engram_group_barrier(g));
    free(send);
    free(recv);
    return 0;
}

int main(int argc, char **argv)
{
    int mib = argc > 1 ? atoi(argv[1]) : 64;
    int ranks = argc > 2 ? atoi(argv[2]) : 4;
    bulk_t b = {.bytes = (size_t)mib << 20, .rounds = argc > 3 ? atoi(argv[3]) : 3};
    CHECK(mib > 0 && ranks > 0 && b.rounds > 0 && b.rounds <= MAX_ROUNDS);
    CHECK_OK(engram_group_fork_run(ranks, 0, bulk_main, &b, NULL));
    CHECK_OK(engram_group_fork_run(4, 0, slow_main, NULL, NULL));
    printf("group_fork_bulk_test: ok\n");
    return 0;
}
