/* The fd-passing primitives on one process's socket pair: a listener under
 * a random prefixed name, the peer's pid, fds across with their payload,
 * extra fds closed, oversized messages refused with no fd left open,
 * EAGAIN when nothing waits, and the errors named by errno. */
#include "memory/fd_pass.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/check.h"

static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

static void one_type(int type)
{
    int before = open_fds();
    char name[ENGRAM_FD_PASS_NAME_LEN];
    int l = -1, c = -1;
    CHECK(engram_fd_pass_listen(type, "engram-test-", 4, &l, name) == 0);
    CHECK(strncmp(name, "engram-test-", 12) == 0 && strlen(name) == 12 + 32);
    CHECK(engram_fd_pass_connect(type, name, &c) == 0);
    int a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK(a >= 0);
    CHECK(engram_fd_pass_peer_pid(a) == getpid() && engram_fd_pass_peer_pid(c) == getpid());
    CHECK(engram_fd_pass_peer_pid(-1) == -1);

    /* Nothing sent yet: EAGAIN, nothing set but *nfds. */
    int got[2] = {-1, -1}, nfds = 7;
    size_t len = 99;
    char buf[16];
    CHECK(engram_fd_pass_recv(a, buf, sizeof(buf), &len, got, 2, &nfds, MSG_DONTWAIT) == EAGAIN);
    CHECK(nfds == 0 && len == 99);

    /* Two fds with a payload; the receiver takes one, the other is closed. */
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK(engram_fd_pass_send(c, "hello", 5, p, 2, 0) == 0);
    CHECK(engram_fd_pass_recv(a, buf, sizeof(buf), &len, got, 1, &nfds, 0) == 0);
    CHECK(len == 5 && memcmp(buf, "hello", 5) == 0 && nfds == 1);
    CHECK(fcntl(got[0], F_GETFD) & FD_CLOEXEC);
    CHECK(write(p[1], "x", 1) == 1); /* got[0] is the pipe's read end */
    char x = 0;
    CHECK(read(got[0], &x, 1) == 1 && x == 'x');
    close(got[0]);

    /* Larger than the buffer (a message socket): EMSGSIZE, its fd not left open. */
    if (type == SOCK_SEQPACKET) {
        CHECK(engram_fd_pass_send(c, "0123456789abcdef-too-long", 25, p, 1, 0) == 0);
        CHECK(engram_fd_pass_recv(a, buf, sizeof(buf), &len, got, 2, &nfds, 0) == EMSGSIZE && nfds == 0);
    }
    close(p[0]);
    close(p[1]);

    /* Too many fds for one message: refused before sending. */
    int many[ENGRAM_FD_PASS_MAX_FDS + 1] = {0};
    CHECK(engram_fd_pass_send(c, "x", 1, many, ENGRAM_FD_PASS_MAX_FDS + 1, 0) == EINVAL);

    /* The peer gone: a zero-length message (closed). */
    close(c);
    CHECK(engram_fd_pass_recv(a, buf, sizeof(buf), &len, got, 2, &nfds, 0) == 0 && len == 0 && nfds == 0);
    close(a);
    close(l);
    /* Nobody listens under the name now. */
    CHECK(engram_fd_pass_connect(type, name, &c) == ECONNREFUSED);
    CHECK(open_fds() == before);
}

int main(void)
{
    one_type(SOCK_STREAM);
    one_type(SOCK_SEQPACKET);
    char name[ENGRAM_FD_PASS_NAME_LEN];
    int l = -1;
    CHECK(engram_fd_pass_listen(SOCK_STREAM, "a-prefix-far-too-long", 4, &l, name) == ENAMETOOLONG && l == -1);
    printf("fd_pass_test: ok\n");
    return 0;
}
