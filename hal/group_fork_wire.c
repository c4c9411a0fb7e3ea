#include "hal/group_fork_wire.h"

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

const char *fork_op_name(uint32_t op)
{
    switch (op) {
    case FORK_OP_ALLGATHER: return "allgather";
    case FORK_OP_BARRIER: return "barrier";
    }
    return "unknown collective";
}

int64_t fork_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int fork_ms_left(int64_t deadline)
{
    int64_t left = deadline - fork_now_ms();
    if (left < 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

/* The part of head+body from `done` on, as at most two iovecs. */
static int remaining_iov(struct iovec iov[2], const void *head, size_t head_len, const void *body, size_t body_len,
                         size_t done)
{
    int n = 0;
    if (done < head_len) {
        iov[n].iov_base = (char *)head + done;
        iov[n++].iov_len = head_len - done;
        done = 0;
    } else {
        done -= head_len;
    }
    if (done < body_len) {
        iov[n].iov_base = (char *)body + done;
        iov[n++].iov_len = body_len - done;
    }
    return n;
}

static engram_status_t errno_status(int err)
{
    return err == EPIPE || err == ECONNRESET ? ENGRAM_ERR_PEER : ENGRAM_ERR_IO;
}

engram_status_t fork_send_some(int fd, const void *head, size_t head_len, const void *body, size_t body_len,
                               size_t *done)
{
    struct iovec iov[2];
    struct msghdr msg = {.msg_iov = iov};
    msg.msg_iovlen = (size_t)remaining_iov(iov, head, head_len, body, body_len, *done);
    if (msg.msg_iovlen == 0)
        return ENGRAM_OK;
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? ENGRAM_OK : errno_status(errno);
    *done += (size_t)n;
    return ENGRAM_OK;
}

engram_status_t fork_recv_some(int fd, void *head, size_t head_len, void *body, size_t body_len, size_t *done)
{
    struct iovec iov[2];
    struct msghdr msg = {.msg_iov = iov};
    msg.msg_iovlen = (size_t)remaining_iov(iov, head, head_len, body, body_len, *done);
    if (msg.msg_iovlen == 0)
        return ENGRAM_OK;
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n == 0)
        return ENGRAM_ERR_PEER;
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? ENGRAM_OK : errno_status(errno);
    *done += (size_t)n;
    return ENGRAM_OK;
}
