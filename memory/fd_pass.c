#include "memory/fd_pass.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A name collision needs two equal draws of 128 random bits; a few tries
 * only guard against a squatter. */
#define BIND_ATTEMPTS 8
#define PREFIX_MAX (ENGRAM_FD_PASS_NAME_LEN - 1 - 32)

typedef union {
    char buf[CMSG_SPACE(sizeof(int) * ENGRAM_FD_PASS_MAX_FDS)];
    struct cmsghdr align;
} fd_ctrl_t;

/* The abstract address of `name`: a leading NUL, then the name unterminated. */
static socklen_t abstract_addr(struct sockaddr_un *addr, const char *name)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    size_t len = strnlen(name, ENGRAM_FD_PASS_NAME_LEN - 1);
    memcpy(addr->sun_path + 1, name, len);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

int engram_fd_pass_listen(int type, const char *prefix, int backlog, int *out, char name[ENGRAM_FD_PASS_NAME_LEN])
{
    if (strlen(prefix) > PREFIX_MAX)
        return ENAMETOOLONG;
    int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int err = EADDRINUSE;
    for (int attempt = 0; attempt < BIND_ATTEMPTS && err == EADDRINUSE; attempt++) {
        uint64_t rnd[2];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
            err = errno ? errno : EIO;
            break;
        }
        snprintf(name, ENGRAM_FD_PASS_NAME_LEN, "%s%016llx%016llx", prefix, (unsigned long long)rnd[0],
                 (unsigned long long)rnd[1]);
        struct sockaddr_un addr;
        socklen_t len = abstract_addr(&addr, name);
        err = bind(fd, (struct sockaddr *)&addr, len) == 0 ? 0 : errno;
    }
    if (err == 0 && listen(fd, backlog) != 0)
        err = errno;
    if (err != 0) {
        close(fd);
        return err;
    }
    *out = fd;
    return 0;
}

int engram_fd_pass_connect(int type, const char *name, int *out)
{
    int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    struct sockaddr_un addr;
    socklen_t len = abstract_addr(&addr, name);
    if (connect(fd, (struct sockaddr *)&addr, len) != 0) {
        int err = errno;
        close(fd);
        return err;
    }
    *out = fd;
    return 0;
}

pid_t engram_fd_pass_peer_pid(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : -1;
}

int engram_fd_pass_send(int fd, const void *buf, size_t len, const int *fds, int nfds, int flags)
{
    if (nfds < 0 || nfds > ENGRAM_FD_PASS_MAX_FDS)
        return EINVAL;
    fd_ctrl_t ctrl;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&ctrl, 0, sizeof(ctrl));
        msg.msg_control = ctrl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t n;
    do
        n = sendmsg(fd, &msg, MSG_NOSIGNAL | flags);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno;
    return (size_t)n == len ? 0 : EMSGSIZE;
}

int engram_fd_pass_recv(int fd, void *buf, size_t cap, size_t *len, int *fds, int max_fds, int *nfds, int flags)
{
    fd_ctrl_t ctrl;
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl.buf, .msg_controllen = sizeof(ctrl)};
    *nfds = 0;
    ssize_t n;
    do
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | flags);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno;
    int got = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int in;
            memcpy(&in, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (got < max_fds)
                fds[got++] = in;
            else
                close(in);
        }
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        for (int i = 0; i < got; i++)
            close(fds[i]);
        return EMSGSIZE;
    }
    *len = (size_t)n;
    *nfds = got;
    return 0;
}
