/* A forked rank's side of the fork launcher: every collective is one
 * request to the launcher and one reply from it. The group's timeout bounds
 * each wait without progress: bytes of this rank's request or reply moving,
 * or a progress note from the launcher while the other ranks' payloads
 * arrive. After a failure the group stays failed: the launcher and this
 * rank may no longer agree on where the stream is. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "hal/group_fork_wire.h"
#include "hal/group_provider.h"
#include "hal/log.h"

typedef engram_status_t (*io_fn)(int fd, void *head, size_t head_len, void *body, size_t body_len, size_t *done);

static engram_status_t send_adapter(int fd, void *head, size_t head_len, void *body, size_t body_len, size_t *done)
{
    return fork_send_some(fd, head, head_len, body, body_len, done);
}

/* Moves a whole message through `io`, waiting for the socket in between
 * (and serving the group's progress hook while it waits);
 * ENGRAM_ERR_TIMEOUT once timeout_ms pass without a byte moving, or the
 * group's running bound (a teardown's) is spent. */
static engram_status_t move_all(engram_group_t *g, io_fn io, short events, void *head, size_t head_len, void *body,
                                size_t body_len, int timeout_ms)
{
    int fd = ((fork_rank_t *)g->provider)->fd;
    size_t done = 0;
    engram_deadline_t deadline = engram_deadline_start(timeout_ms);
    for (;;) {
        size_t before = done;
        engram_status_t st = io(fd, head, head_len, body, body_len, &done);
        if (st != ENGRAM_OK || done == head_len + body_len)
            return st;
        if (done != before)
            engram_deadline_progress(&deadline);
        struct pollfd p = {.fd = fd, .events = events};
        int left = engram_deadline_remaining_ms(&deadline), bound = engram_group_bound_left_ms(g);
        if (bound < left)
            left = bound;
        if (left == 0)
            return ENGRAM_ERR_TIMEOUT;
        if (poll(&p, 1, engram_group_waiting(g, left)) < 0 && errno != EINTR)
            return ENGRAM_ERR_IO;
    }
}

/* The reply's header, past any progress notes (each restarts the bound). */
static engram_status_t recv_reply_head(engram_group_t *g, fork_reply_t *rep, int timeout_ms)
{
    engram_status_t st;
    do
        st = move_all(g, fork_recv_some, POLLIN, rep, sizeof(*rep), NULL, 0, timeout_ms);
    while (st == ENGRAM_OK && rep->status == ENGRAM_INPROGRESS && rep->bytes == 0);
    return st;
}

/* Receive buffers from this size on are prefaulted. */
#define RANK_PREFAULT_MIN ((size_t)2 << 20)

/* Maps in the receive buffer's pages in one call while the other ranks'
 * payloads arrive, instead of a fault per 4 KiB page during the socket
 * copy (in a VM those faults cost more than the copy). Only whole pages
 * inside the buffer, and best effort: without it the copy faults them. */
static void prefault(void *buf, size_t len)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t)buf + page - 1) & ~(page - 1), end = ((uintptr_t)buf + len) & ~(page - 1);
    if (len >= RANK_PREFAULT_MIN && end > start)
        madvise((void *)start, end - start, MADV_POPULATE_WRITE);
}

static engram_status_t rank_fail(engram_group_t *g, const char *op, engram_status_t st, const char *reason)
{
    fork_rank_t *self = g->provider;
    self->failed = st;
    snprintf(self->reason, sizeof(self->reason), "%s", reason);
    /* Tells the launcher at once that this rank left the collective, so the
     * other ranks fail now instead of each waiting out its own timeout. */
    shutdown(self->fd, SHUT_RDWR);
    return ENGRAM_ERROR(st, "rank %d %s: %s", g->rank, op, reason);
}

static engram_status_t fork_collective(engram_group_t *g, uint32_t op, const void *send, void *recv, size_t bytes)
{
    fork_rank_t *self = g->provider;
    const char *name = fork_op_name(op);
    if (self->failed != ENGRAM_OK)
        return ENGRAM_ERROR(self->failed, "rank %d %s: the group failed earlier: %s", g->rank, name, self->reason);
    int timeout = engram_group_wait_ms(g);
    char reason[FORK_REASON_MAX + 64];

    fork_request_t req = {.op = op, .rank = g->rank, .bytes = bytes, .timeout_ms = (uint64_t)timeout};
    engram_status_t st = move_all(g, send_adapter, POLLOUT, &req, sizeof(req), (void *)send, bytes, timeout);
    /* A launcher that refused the request may still have left a reply
     * saying why; read it before giving up. */
    if (st != ENGRAM_OK && st != ENGRAM_ERR_PEER) {
        if (st == ENGRAM_ERR_TIMEOUT)
            snprintf(reason, sizeof(reason), "timed out: %d ms without progress sending %zu bytes", timeout, bytes);
        else
            snprintf(reason, sizeof(reason), "socket error sending %zu bytes", bytes);
        return rank_fail(g, name, st, reason);
    }

    if (st == ENGRAM_OK)
        prefault(recv, bytes * (size_t)g->size);
    fork_reply_t rep;
    st = recv_reply_head(g, &rep, timeout);
    if (st == ENGRAM_OK && rep.status != ENGRAM_OK) {
        char text[FORK_REASON_MAX + 1] = {0};
        size_t len = rep.bytes < FORK_REASON_MAX ? (size_t)rep.bytes : FORK_REASON_MAX;
        if (move_all(g, fork_recv_some, POLLIN, NULL, 0, text, len, timeout) != ENGRAM_OK)
            strcpy(text, "(reason lost)");
        return rank_fail(g, name, (engram_status_t)rep.status, text);
    }
    if (st == ENGRAM_OK && rep.bytes != (uint64_t)bytes * (uint64_t)g->size)
        return rank_fail(g, name, ENGRAM_ERR_IO, "launcher replied with a payload of the wrong size");
    if (st == ENGRAM_OK)
        st = move_all(g, fork_recv_some, POLLIN, NULL, 0, recv, (size_t)rep.bytes, timeout);
    if (st == ENGRAM_ERR_TIMEOUT) {
        snprintf(reason, sizeof(reason), "timed out: %d ms without progress waiting for the other ranks", timeout);
        return rank_fail(g, name, st, reason);
    }
    if (st != ENGRAM_OK)
        return rank_fail(g, name, st, st == ENGRAM_ERR_PEER ? "the launcher closed the connection"
                                                            : "socket error talking to the launcher");
    return ENGRAM_OK;
}

static engram_status_t fork_allgather(engram_group_t *g, const void *send, void *recv, size_t bytes)
{
    return fork_collective(g, FORK_OP_ALLGATHER, send, recv, bytes);
}

static engram_status_t fork_barrier(engram_group_t *g)
{
    return fork_collective(g, FORK_OP_BARRIER, NULL, NULL, 0);
}

static void fork_destroy(engram_group_t *g)
{
    fork_rank_t *self = g->provider;
    close(self->fd);
    free(self);
}

static const engram_group_ops_t fork_ops = {
    .size = sizeof(engram_group_ops_t),
    .name = "fork",
    .allgather = fork_allgather,
    .barrier = fork_barrier,
    .destroy = fork_destroy,
};

engram_status_t fork_rank_group_create(int fd, int rank, int size, int local_size, engram_group_t **out)
{
    engram_group_t *g = calloc(1, sizeof(*g));
    fork_rank_t *self = calloc(1, sizeof(*self));
    if (g == NULL || self == NULL) {
        free(g);
        free(self);
        close(fd);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "no memory for rank %d's group", rank);
    }
    self->fd = fd;
    engram_status_t st = engram_group_init(g, &fork_ops, self, rank, size, local_size);
    if (st != ENGRAM_OK) {
        close(fd);
        free(self);
        free(g);
        return st;
    }
    *out = g;
    return ENGRAM_OK;
}
