/* The fork launcher's internals: the frames a rank and the launcher (its
 * parent, which relays every collective) exchange over their socket pair,
 * and the nonblocking I/O both sides use. Not a public interface. */
#ifndef ENGRAM_HAL_GROUP_FORK_WIRE_H
#define ENGRAM_HAL_GROUP_FORK_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "hal/group.h"

enum { FORK_OP_ALLGATHER = 1, FORK_OP_BARRIER = 2 };

/* rank -> launcher, followed by `bytes` of payload. timeout_ms is the
 * rank's group timeout: how often a waiting rank must hear of progress. */
typedef struct fork_request {
    uint32_t op;
    int32_t rank;
    uint64_t bytes;
    uint64_t timeout_ms;
} fork_request_t;

/* launcher -> rank, followed by `bytes` of payload: the gathered data when
 * status is OK, else a reason text (no NUL) naming the rank at fault.
 * Before its reply a waiting rank may get any number of progress notes
 * (status ENGRAM_INPROGRESS, no payload): other ranks' payloads are still
 * arriving, so its collective is moving although its own socket is idle. */
typedef struct fork_reply {
    int32_t status;
    int32_t culprit;
    uint64_t bytes;
} fork_reply_t;

#define FORK_REASON_MAX 256

/* One forked rank as the launcher sees it. */
typedef struct fork_child {
    pid_t pid;
    int fd;        /* launcher's end of the socket pair, -1 once closed */
    int exit_code; /* -1 until reaped; 128 + signal when killed */
} fork_child_t;

const char *fork_op_name(uint32_t op);


/* Socket buffer size of both ends: large payloads move in few calls. */
#define FORK_SOCKET_BUFFER (4 << 20)

/* Move what a nonblocking socket takes/gives right now of a message made of
 * the `cnt` pieces of `iov` (or of `head` then `body`), continuing from
 * *done. OK with *done advanced (maybe not at all); ENGRAM_ERR_PEER when
 * the other end is gone (EOF, EPIPE, ECONNRESET); ENGRAM_ERR_IO on any
 * other failure. Nothing is logged. */
engram_status_t fork_send_iov(int fd, const struct iovec *iov, int cnt, size_t *done);
engram_status_t fork_send_some(int fd, const void *head, size_t head_len, const void *body, size_t body_len,
                               size_t *done);
engram_status_t fork_recv_some(int fd, void *head, size_t head_len, void *body, size_t body_len, size_t *done);

/* The group a forked rank gets, speaking to the launcher over `fd` (owned
 * by the group from then on, even on failure). */
engram_status_t fork_rank_group_create(int fd, int rank, int size, int local_size, engram_group_t **out);
/* Such a group's provider state (g->provider); tests that play a rank by
 * hand take the socket from it. */
typedef struct fork_rank {
    int fd;
    engram_status_t failed;
    char reason[FORK_REASON_MAX + 64];
} fork_rank_t;

/* Relays the children's collectives until every child has been reaped;
 * fills their exit codes. A child that leaves while others need it fails
 * the group for everyone; survivors that do not exit within the grace
 * period after that are killed, so the launcher never waits forever. */
void fork_relay_run(fork_child_t *kids, int n);

#endif
