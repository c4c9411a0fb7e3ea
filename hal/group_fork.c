/* The fork launcher: the embedded default group, all ranks on this host. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hal/group.h"
#include "hal/group_fork_wire.h"
#include "hal/log.h"

/* Exit code of a child whose group could not even be set up. */
#define FORK_CHILD_SETUP_FAILED 127
/* Exit code of a child that leaked (LeakSanitizer's own default). */
#define FORK_CHILD_LEAKED 23

/* Present only when LeakSanitizer is linked in (sanitizer builds). */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

/* Runs in the child: keeps only its own end of its socket pair, runs the
 * rank and leaves with _exit so the parent's atexit handlers and stdio
 * buffers (flushed before the fork) are not run or written twice. */
static _Noreturn void child_run(fork_child_t *kids, int *child_ends, int nranks, int rank, int local_size,
                                engram_rank_main_fn rank_main, void *arg)
{
    int fd = child_ends[rank];
    for (int i = 0; i < nranks; i++) {
        close(kids[i].fd);
        if (i > rank) /* the parent closed earlier children's ends already */
            close(child_ends[i]);
    }
    free(kids);
    free(child_ends);
    engram_group_t *g;
    int rc = FORK_CHILD_SETUP_FAILED;
    if (fork_rank_group_create(fd, rank, nranks, local_size, &g) == ENGRAM_OK) {
        rc = rank_main(g, arg);
        engram_group_destroy(g);
    }
    /* _exit skips LeakSanitizer's exit-time check; run it here so that
     * leaks in a rank's code fail sanitizer builds as they would in main. */
    if (__lsan_do_recoverable_leak_check != NULL && __lsan_do_recoverable_leak_check() != 0 && rc == 0)
        rc = FORK_CHILD_LEAKED;
    fflush(NULL);
    _exit(rc);
}

static engram_status_t validate(int nranks, int local_size, engram_rank_main_fn rank_main)
{
    if (nranks < 1)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "fork launcher: nranks %d must be >= 1", nranks);
    if (rank_main == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "fork launcher: rank_main is NULL");
    if (local_size < 0 || local_size > nranks || (local_size > 0 && nranks % local_size != 0))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                            "fork launcher: local_size %d must be 0 or a divisor of nranks %d", local_size, nranks);
    return ENGRAM_OK;
}

/* AF_UNIX stream data waiting in the receiver counts against the sender's
 * SO_SNDBUF (SO_RCVBUF plays no part), so a big send buffer on both ends
 * lets large payloads move in few calls and few wakeups. Best effort: the
 * kernel caps it at net.core.wmem_max, and a smaller one costs only speed. */
static void size_buffers(const int sv[2])
{
    int bytes = FORK_SOCKET_BUFFER;
    for (int i = 0; i < 2; i++)
        setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

/* Socket pairs for every rank up front, so a failure here costs no fork. */
static engram_status_t make_pairs(fork_child_t *kids, int *child_ends, int nranks)
{
    for (int i = 0; i < nranks; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            engram_status_t st = ENGRAM_ERROR(ENGRAM_ERR_IO, "fork launcher: socketpair for rank %d of %d: %s", i,
                                              nranks, strerror(errno));
            for (int j = 0; j < i; j++) {
                close(kids[j].fd);
                close(child_ends[j]);
            }
            return st;
        }
        size_buffers(sv);
        kids[i] = (fork_child_t){.pid = -1, .fd = sv[0], .exit_code = -1};
        child_ends[i] = sv[1];
    }
    return ENGRAM_OK;
}

/* fork() failed for rank `failed`: end the ranks already started (they
 * would wait for it forever) and release every socket. */
static void abandon_spawn(fork_child_t *kids, int *child_ends, int nranks, int failed)
{
    for (int i = 0; i < failed; i++) {
        kill(kids[i].pid, SIGKILL);
        waitpid(kids[i].pid, NULL, 0);
    }
    for (int i = 0; i < nranks; i++) {
        close(kids[i].fd);
        if (i >= failed)
            close(child_ends[i]);
    }
}

static engram_status_t report_exits(const fork_child_t *kids, int nranks, int *exit_codes)
{
    engram_status_t st = ENGRAM_OK;
    for (int i = 0; i < nranks; i++) {
        if (exit_codes != NULL)
            exit_codes[i] = kids[i].exit_code;
        if (kids[i].exit_code != 0 && st == ENGRAM_OK) {
            if (kids[i].exit_code > 128)
                st = ENGRAM_ERROR(ENGRAM_ERR_PEER, "fork launcher: rank %d of %d was killed by signal %d", i, nranks,
                                  kids[i].exit_code - 128);
            else
                st = ENGRAM_ERROR(ENGRAM_ERR_PEER, "fork launcher: rank %d of %d exited with code %d", i, nranks,
                                  kids[i].exit_code);
        }
    }
    return st;
}

engram_status_t engram_group_fork_run(int nranks, int local_size, engram_rank_main_fn rank_main, void *arg,
                                      int *exit_codes)
{
    engram_status_t st = validate(nranks, local_size, rank_main);
    if (st != ENGRAM_OK)
        return st;
    fork_child_t *kids = calloc((size_t)nranks, sizeof(*kids));
    int *child_ends = calloc((size_t)nranks, sizeof(*child_ends));
    if (kids == NULL || child_ends == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "fork launcher: no memory for %d ranks", nranks);
        goto free_arrays;
    }
    st = make_pairs(kids, child_ends, nranks);
    if (st != ENGRAM_OK)
        goto free_arrays;

    fflush(NULL);
    for (int i = 0; i < nranks; i++) {
        pid_t pid = fork();
        if (pid == 0)
            child_run(kids, child_ends, nranks, i, local_size, rank_main, arg);
        if (pid < 0) {
            st = ENGRAM_ERROR(ENGRAM_ERR_IO, "fork launcher: fork for rank %d of %d: %s", i, nranks,
                              strerror(errno));
            abandon_spawn(kids, child_ends, nranks, i);
            goto free_arrays;
        }
        kids[i].pid = pid;
        close(child_ends[i]);
    }

    fork_relay_run(kids, nranks);
    for (int i = 0; i < nranks; i++)
        if (kids[i].fd >= 0)
            close(kids[i].fd);
    st = report_exits(kids, nranks, exit_codes);
free_arrays:
    free(child_ends);
    free(kids);
    return st;
}
