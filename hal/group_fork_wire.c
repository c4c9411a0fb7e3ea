#include "hal/group_fork_wire.h"

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <time.h>

const char *fork_op_name(uint32_t op)
{
    switch (op) {
    case FORK_OP_ALLGATHER: return "allgather";
    case FORK_OP_BARRIER: return "barrier";
    }
    return "unknown collective";
}

/* Pieces handed to one sendmsg/recvmsg: a relay reply is one piece per
 * rank plus its header; more than this go in the next call. */
#define FORK_IOV_BATCH 64

/* The pieces of iov[0..cnt) from byte `done` on, at most FORK_IOV_BATCH. */
static int remaining_iov(struct iovec out[FORK_IOV_BATCH], const struct iovec *iov, int cnt, size_t done)
{
    int n = 0;
    for (int i = 0; i < cnt && n < FORK_IOV_BATCH; i++) {
        if (done >= iov[i].iov_len) {
            done -= iov[i].iov_len;
            continue;
        }
        out[n].iov_base = (char *)iov[i].iov_base + done;
        out[n++].iov_len = iov[i].iov_len - done;
        done = 0;
    }
    return n;
}

static engram_status_t move_iov(int fd, int sending, const struct iovec *iov, int cnt, size_t *done)
{
    struct iovec part[FORK_IOV_BATCH];
    struct msghdr msg = {.msg_iov = part};
    msg.msg_iovlen = (size_t)remaining_iov(part, iov, cnt, *done);
    if (msg.msg_iovlen == 0)
        return ENGRAM_OK;
    ssize_t n = sending ? sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) : recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n == 0 && !sending)
        return ENGRAM_ERR_PEER;
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? ENGRAM_OK
               : errno == EPIPE || errno == ECONNRESET ? ENGRAM_ERR_PEER
                                                        : ENGRAM_ERR_IO;
    *done += (size_t)n;
    return ENGRAM_OK;
}

engram_status_t fork_send_iov(int fd, const struct iovec *iov, int cnt, size_t *done)
{
    return move_iov(fd, 1, iov, cnt, done);
}

engram_status_t fork_send_some(int fd, const void *head, size_t head_len, const void *body, size_t body_len,
                               size_t *done)
{
    struct iovec iov[2] = {{(void *)head, head_len}, {(void *)body, body_len}};
    return move_iov(fd, 1, iov, 2, done);
}

engram_status_t fork_recv_some(int fd, void *head, size_t head_len, void *body, size_t body_len, size_t *done)
{
    struct iovec iov[2] = {{head, head_len}, {body, body_len}};
    return move_iov(fd, 0, iov, 2, done);
}
