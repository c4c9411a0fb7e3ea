/* The fork launcher: collectives among 1..7 forked ranks, a rank that dies
 * or stalls, mismatched calls, the progress hook, argument checks. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "hal/group.h"
#include "hal/log.h"
#include "hal/testdata/check_error.h"

#define now_ms engram_now_ms

static uint8_t pattern(int rank, int round, size_t i)
{
    return (uint8_t)(rank * 131 + round * 17 + i * 7 + (i >> 8));
}

/* One allgather of `bytes` per rank, checked byte for byte. */
static void check_allgather(engram_group_t *g, int round, size_t bytes)
{
    int n = engram_group_size(g), me = engram_group_rank(g);
    uint8_t *send = malloc(bytes + 1), *recv = malloc(bytes * (size_t)n + 1);
    CHECK(send != NULL && recv != NULL);
    for (size_t i = 0; i < bytes; i++)
        send[i] = pattern(me, round, i);
    CHECK_OK(engram_group_allgather(g, send, recv, bytes));
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < bytes; i++)
            CHECK(recv[(size_t)r * bytes + i] == pattern(r, round, i));
    free(send);
    free(recv);
}

static int collectives_main(engram_group_t *g, void *arg)
{
    int local_size = *(const int *)arg;
    int n = engram_group_size(g), me = engram_group_rank(g);
    CHECK(me >= 0 && me < n);
    CHECK(engram_group_local_size(g) == local_size);
    CHECK(engram_group_local_rank(g) == me % local_size);
    CHECK(engram_group_single_host(g) == 1);
    CHECK(engram_group_single_host(g) == 1); /* cached: no collective, same answer */

    static const size_t sizes[] = {0, 1, 3, 8, 64, 4096, 65537, 300000};
    for (int round = 0; round < 40; round++) {
        check_allgather(g, round, sizes[round % (sizeof(sizes) / sizeof(sizes[0]))]);
        CHECK_OK(engram_group_barrier(g));
    }
    for (int round = 0; round < 500; round++)
        check_allgather(g, round, sizeof(int));
    return 0;
}

static void test_collectives(int nranks, int local_size)
{
    int want_local = local_size == 0 ? nranks : local_size;
    int codes[8];
    memset(codes, 0xff, sizeof(codes));
    CHECK_OK(engram_group_fork_run(nranks, local_size, collectives_main, &want_local, codes));
    for (int r = 0; r < nranks; r++)
        CHECK(codes[r] == 0);
}

/* Rank `victim` leaves (exit code 3) or is killed before the barrier; the
 * others must hear about it well before their (long) timeout. */
typedef struct early_exit {
    int victim;
    int killed;
} early_exit_t;

static int early_exit_main(engram_group_t *g, void *arg)
{
    const early_exit_t *e = arg;
    engram_group_set_timeout(g, 20000);
    CHECK_OK(engram_group_barrier(g));
    if (engram_group_rank(g) == e->victim) {
        if (e->killed)
            raise(SIGKILL);
        return 3;
    }
    int64_t t0 = now_ms();
    CHECK_ERROR(engram_group_barrier(g), ENGRAM_ERR_PEER, "rank 2 left the group");
    CHECK(now_ms() - t0 < 5000);
    /* The group stays failed, and says so without waiting. */
    CHECK_ERROR(engram_group_allgather(g, &t0, &t0, 0), ENGRAM_ERR_PEER, "failed earlier");
    return 0;
}

static void test_early_exit(int killed)
{
    early_exit_t e = {.victim = 2, .killed = killed};
    int codes[4];
    CHECK_ERROR(engram_group_fork_run(4, 0, early_exit_main, &e, codes), ENGRAM_ERR_PEER, "rank 2 of 4");
    CHECK(codes[0] == 0 && codes[1] == 0 && codes[3] == 0);
    CHECK(codes[2] == (killed ? 128 + SIGKILL : 3));
}

/* Rank 2 stalls past everyone's timeout (a rank cut off before its
 * destroy): the others' agreement fails by timeout within about the
 * timeout, not after the stall, naming rank 2 as the one that never came. */
static int stall_main(engram_group_t *g, void *arg)
{
    (void)arg;
    engram_group_set_timeout(g, 400);
    if (engram_group_rank(g) == 2) {
        usleep(1500 * 1000);
        return 0;
    }
    int64_t t0 = now_ms();
    engram_status_t st = engram_group_agree(g, ENGRAM_OK);
    int64_t took = now_ms() - t0;
    CHECK(st == ENGRAM_ERR_TIMEOUT);
    /* named by the launcher, whichever waiting rank's clock it read first */
    CHECK(strstr(engram_last_error(), "no answer from rank 2: it did not reach rank ") != NULL);
    CHECK(strstr(engram_last_error(), "'s allgather within 400 ms") != NULL);
    CHECK(took >= 300);
    CHECK(took < 1000);
    return 0;
}

/* Ranks arrive at an agreement one after another, 300 ms apart: 900 ms in
 * all against a 600 ms timeout, but each arrival is progress for the ranks
 * already waiting, so the agreement completes everywhere. */
static int staggered_main(engram_group_t *g, void *arg)
{
    (void)arg;
    engram_group_set_timeout(g, 600);
    int me = engram_group_rank(g);
    usleep((useconds_t)me * 300 * 1000);
    int64_t t0 = now_ms();
    CHECK_OK(engram_group_agree(g, ENGRAM_OK));
    if (me == 0)
        CHECK(now_ms() - t0 > 600); /* longer than the timeout in all */
    return 0;
}

/* Ranks disagree on the collective: every rank is told, none hangs. */
static int mismatch_main(engram_group_t *g, void *arg)
{
    (void)arg;
    int x = 1, all[2];
    engram_status_t st = engram_group_rank(g) == 0 ? engram_group_barrier(g) : engram_group_allgather(g, &x, all, sizeof(x));
    CHECK(st == ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "rank 1 called allgather with 4 bytes while rank 0 called barrier") != NULL);
    return 0;
}

static void count_progress(void *arg)
{
    ++*(int *)arg;
}

/* A rank waiting for a late one keeps calling the group's progress hook. */
static int progress_main(engram_group_t *g, void *arg)
{
    (void)arg;
    int calls = 0;
    engram_group_set_progress(g, count_progress, &calls);
    if (engram_group_rank(g) == 1)
        usleep(100 * 1000);
    CHECK_OK(engram_group_barrier(g));
    if (engram_group_rank(g) == 0)
        CHECK(calls > 0);
    engram_group_set_progress(g, NULL, NULL);
    calls = 0;
    CHECK_OK(engram_group_barrier(g));
    CHECK(calls == 0);
    return 0;
}

/* Agreement: every rank fails when any does; a rank's own failure comes
 * back unchanged, a peer's as the peer's own status naming rank and step. */
static int agree_main(engram_group_t *g, void *arg)
{
    (void)arg;
    int me = engram_group_rank(g);
    CHECK_OK(engram_group_agree_step(g, ENGRAM_OK, "open the widget"));
    CHECK_OK(engram_group_agree(g, ENGRAM_OK));

    /* Rank 1 fails locally: it keeps its own status and message. */
    engram_status_t local = me == 1 ? ENGRAM_ERROR(ENGRAM_ERR_INVALID, "widget size 0 on rank 1") : ENGRAM_OK;
    engram_status_t st = engram_group_agree_step(g, local, "open the widget");
    CHECK(st == ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), me == 1 ? "widget size 0 on rank 1" : "rank 1 failed to open the widget") !=
          NULL);
    st = engram_group_agree(g, me == 1 ? ENGRAM_ERR_INVALID : ENGRAM_OK);
    CHECK(st == ENGRAM_ERR_INVALID);
    if (me != 1)
        CHECK(strstr(engram_last_error(), "rank 1 failed to complete the collective call") != NULL);

    /* Two peers fail differently: each keeps its own; the others get the first. */
    local = me == 1 ? ENGRAM_ERR_NOMEM : me == 2 ? ENGRAM_ERR_IO : ENGRAM_OK;
    st = engram_group_agree_step(g, local, "map the widget");
    CHECK(st == (me == 2 ? ENGRAM_ERR_IO : ENGRAM_ERR_NOMEM));
    if (me == 0)
        CHECK(strstr(engram_last_error(), "rank 1 failed to map the widget") != NULL);
    return 0;
}

static int unused_main(engram_group_t *g, void *arg)
{
    (void)g;
    (void)arg;
    return 0;
}

static int invalid_calls_main(engram_group_t *g, void *arg)
{
    (void)arg;
    int x = 0;
    CHECK_ERROR(engram_group_allgather(g, NULL, &x, sizeof(x)), ENGRAM_ERR_INVALID, "NULL send");
    CHECK_ERROR(engram_group_allgather(g, &x, NULL, sizeof(x)), ENGRAM_ERR_INVALID, "NULL receive");
    CHECK_ERROR(engram_group_allgather(g, &x, &x, SIZE_MAX), ENGRAM_ERR_OVERFLOW, "overflows");
    engram_group_set_timeout(g, 1234);
    engram_group_set_timeout(g, 0);
    engram_group_set_timeout(g, -5);
    CHECK(engram_group_timeout(g) == 1234);
    /* Refused calls leave the group usable. */
    int all[2];
    CHECK_OK(engram_group_allgather(g, &x, all, sizeof(x)));
    return 0;
}

static void test_invalid_args(void)
{
    CHECK_ERROR(engram_group_fork_run(0, 0, unused_main, NULL, NULL), ENGRAM_ERR_INVALID, "nranks 0");
    CHECK_ERROR(engram_group_fork_run(-3, 0, unused_main, NULL, NULL), ENGRAM_ERR_INVALID, "nranks -3");
    CHECK_ERROR(engram_group_fork_run(2, 0, NULL, NULL, NULL), ENGRAM_ERR_INVALID, "rank_main");
    CHECK_ERROR(engram_group_fork_run(4, 3, unused_main, NULL, NULL), ENGRAM_ERR_INVALID, "local_size 3");
    CHECK_ERROR(engram_group_fork_run(4, -1, unused_main, NULL, NULL), ENGRAM_ERR_INVALID, "local_size -1");
    CHECK_ERROR(engram_group_fork_run(4, 8, unused_main, NULL, NULL), ENGRAM_ERR_INVALID, "local_size 8");
    CHECK_ERROR(engram_group_allgather(NULL, NULL, NULL, 0), ENGRAM_ERR_INVALID, "NULL group");
    CHECK_ERROR(engram_group_barrier(NULL), ENGRAM_ERR_INVALID, "NULL group");
    CHECK(engram_group_single_host(NULL) == ENGRAM_ERR_INVALID);
    engram_group_destroy(NULL);
    CHECK_OK(engram_group_fork_run(2, 0, invalid_calls_main, NULL, NULL));
}

int main(void)
{
    test_invalid_args();
    test_collectives(1, 0);
    test_collectives(2, 0);
    test_collectives(4, 0);
    test_collectives(4, 2);
    test_collectives(7, 0);
    test_collectives(7, 1);
    test_early_exit(0);
    test_early_exit(1);
    CHECK_OK(engram_group_fork_run(3, 0, stall_main, NULL, NULL));
    CHECK_OK(engram_group_fork_run(4, 0, staggered_main, NULL, NULL));
    CHECK_OK(engram_group_fork_run(2, 0, mismatch_main, NULL, NULL));
    CHECK_OK(engram_group_fork_run(2, 0, progress_main, NULL, NULL));
    CHECK_OK(engram_group_fork_run(3, 0, agree_main, NULL, NULL));
    printf("group_fork_test: ok\n");
    return 0;
}
