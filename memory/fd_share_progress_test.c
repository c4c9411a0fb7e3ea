/* The fd share's timeout bounds time without progress, not the exchange:
 * slow ranks that keep moving finish although the exchange takes longer
 * than the group's timeout in all (as a thousand ranks on one loaded host
 * do), while a rank that stalls still fails the others within about the
 * timeout. The slowness is put into the fd passing itself: this program
 * links with --wrap=engram_fd_pass_send, so fd_share.c's sends go through
 * __wrap_engram_fd_pass_send below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "hal/group.h"
#include "memory/fd_pass.h"
#include "engram/plugin/segment.h"
#include "tests/check.h"

#define MAX_RANKS 8

/* Set in each rank before its exchange (the children are forked). */
static int slow_send_ms;  /* every send of every rank waits this long first */
static int stall_rank = -1, stall_ms; /* this rank's first send waits stall_ms */
static int my_rank;

int __real_engram_fd_pass_send(int fd, const void *buf, size_t len, const int *fds, int nfds, int flags);

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int __wrap_engram_fd_pass_send(int fd, const void *buf, size_t len, const int *fds, int nfds, int flags)
{
    static int sends;
    if (my_rank == stall_rank && sends == 0)
        sleep_ms(stall_ms);
    else if (slow_send_ms > 0)
        sleep_ms(slow_send_ms);
    sends++;
    return __real_engram_fd_pass_send(fd, buf, len, fds, nfds, flags);
}

static int page_fd(void)
{
    int fd = memfd_create("fd_share_progress_test", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 4096) == 0);
    return fd;
}

enum { SLOW_RANKS = 6, SLOW_TIMEOUT_MS = 800, SLOW_SEND_MS = 200 };

/* Each rank serves its fd to 5 peers, 200 ms a send: about 1 s in all, past
 * the 800 ms timeout, but every rank sees a send or a receive of its own
 * every 200 ms. */
static int slow_main(engram_group_t *g, void *arg)
{
    (void)arg;
    my_rank = engram_group_rank(g);
    engram_group_set_timeout(g, SLOW_TIMEOUT_MS);
    int my_fd = page_fd(), fds[MAX_RANKS];
    slow_send_ms = SLOW_SEND_MS;
    int64_t t0 = engram_now_ms();
    engram_status_t st = engram_fd_allgather(g, my_fd, fds);
    int64_t took = engram_now_ms() - t0;
    slow_send_ms = 0;
    if (st != ENGRAM_OK) {
        fprintf(stderr, "rank %d: a slow exchange that kept moving failed after %lld ms: %s\n", my_rank,
                (long long)took, engram_last_error());
        return 1;
    }
    /* It really took longer than one timeout in all. */
    CHECK(took > SLOW_TIMEOUT_MS);
    for (int r = 0; r < engram_group_size(g); r++) {
        CHECK(fds[r] >= 0);
        close(fds[r]);
    }
    close(my_fd);
    return 0;
}

enum { STALL_RANKS = 4, STALL_TIMEOUT_MS = 1000, STALL_MS = 1500 };

/* Rank 0 stops for 1.5 s in its first send, after connecting to the
 * others: they have nothing left to do but wait for its fd, and give up
 * 1 s after their last step. Its own send then finds them gone, and it
 * joins their agreement well within its timeout. */
static int stall_main(engram_group_t *g, void *arg)
{
    (void)arg;
    my_rank = engram_group_rank(g);
    engram_group_set_timeout(g, STALL_TIMEOUT_MS);
    stall_rank = 0;
    stall_ms = STALL_MS;
    int my_fd = page_fd(), fds[MAX_RANKS];
    for (int i = 0; i < MAX_RANKS; i++)
        fds[i] = -7;
    int64_t t0 = engram_now_ms();
    engram_status_t st = engram_fd_allgather(g, my_fd, fds);
    int64_t took = engram_now_ms() - t0;
    CHECK(st != ENGRAM_OK);
    if (my_rank != 0) {
        CHECK_STATUS(st, ENGRAM_ERR_TIMEOUT);
        const char *e = engram_last_error();
        if (strstr(e, "1000 ms without progress") == NULL || strstr(e, "rank 0 (receive") == NULL) {
            fprintf(stderr, "rank %d: unexpected message: %s\n", my_rank, e);
            return 1;
        }
    }
    /* Bounded: the others' timeout, then the agreement with rank 0. */
    CHECK(took < STALL_MS + 2 * STALL_TIMEOUT_MS);
    for (int i = 0; i < MAX_RANKS; i++)
        CHECK(fds[i] == -7);
    close(my_fd);
    return 0;
}

int main(void)
{
    CHECK_OK(engram_group_fork_run(SLOW_RANKS, 0, slow_main, NULL, NULL));
    CHECK_OK(engram_group_fork_run(STALL_RANKS, 0, stall_main, NULL, NULL));
    printf("fd_share_progress_test: ok\n");
    return 0;
}
