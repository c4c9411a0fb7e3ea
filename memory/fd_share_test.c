/* fd sharing among forked ranks: every rank maps every other rank's page
 * and sees its pattern; a failing rank fails all of them without leaking
 * fds; a process outside the group is refused. */
#include <dirent.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "hal/group.h"
#include "engram/plugin/segment.h"
#include "tests/check.h"

#define PAGE 4096
#define MAX_RANKS 8

static int64_t now_ms(void)
{
    return engram_now_ms();
}

static int open_fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static uint8_t pattern(int rank, size_t i)
{
    return (uint8_t)(rank * 37 + i * 13 + 1);
}

static int rank_page(int rank)
{
    int fd = memfd_create("fd_share_test", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, PAGE) == 0);
    uint8_t *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    for (size_t i = 0; i < PAGE; i++)
        p[i] = pattern(rank, i);
    munmap(p, PAGE);
    return fd;
}

static void check_shared(engram_group_t *g, int my_fd)
{
    int n = engram_group_size(g);
    int fds[MAX_RANKS];
    CHECK_OK(engram_fd_allgather(g, my_fd, fds));
    for (int r = 0; r < n; r++) {
        CHECK(fds[r] >= 0 && fds[r] != my_fd);
        const uint8_t *p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fds[r], 0);
        CHECK(p != MAP_FAILED);
        for (size_t i = 0; i < PAGE; i++)
            CHECK(p[i] == pattern(r, i));
        munmap((void *)p, PAGE);
        close(fds[r]);
    }
}

static int share_main(engram_group_t *g, void *arg)
{
    (void)arg;
    int my_fd = rank_page(engram_group_rank(g));
    int before = open_fd_count();
    for (int round = 0; round < 20; round++)
        check_shared(g, my_fd);
    CHECK(open_fd_count() == before);
    close(my_fd);
    return 0;
}

/* Rank 1 brings a bad fd (or no fds array): every rank gets an error at
 * once, none keeps an fd. */
static int bad_rank_main(engram_group_t *g, void *arg)
{
    int no_array = *(const int *)arg;
    int me = engram_group_rank(g);
    int my_fd = rank_page(me);
    int before = open_fd_count();
    int fds[MAX_RANKS];
    for (int i = 0; i < MAX_RANKS; i++)
        fds[i] = -7;
    int64_t t0 = now_ms();
    engram_status_t st;
    if (me == 1)
        st = engram_fd_allgather(g, no_array ? my_fd : -1, no_array ? NULL : fds);
    else
        st = engram_fd_allgather(g, my_fd, fds);
    CHECK(st == ENGRAM_ERR_INVALID); /* the peer's own status, everywhere */
    if (me != 1)
        CHECK(strstr(engram_last_error(), "rank 1 failed to take part in the fd share") != NULL);
    CHECK(now_ms() - t0 < 2000);
    CHECK(open_fd_count() == before);
    for (int i = 0; i < MAX_RANKS; i++)
        CHECK(fds[i] == -7); /* out-parameter untouched on failure */
    /* The group is still good for the next exchange. */
    check_shared(g, my_fd);
    close(my_fd);
    return 0;
}

/* A process outside the group: finds the exchange's abstract sockets in
 * /proc/net/unix, connects, and must never be handed an fd.
 * Exit 0: connected and refused; 1: got an fd; 2: never connected. */
static _Noreturn void intruder_run(void)
{
    int socks[64], ns = 0;
    int64_t end = now_ms() + 3000;
    while (ns == 0 && now_ms() < end) {
        FILE *f = fopen("/proc/net/unix", "re");
        char line[512];
        while (f != NULL && fgets(line, sizeof(line), f) != NULL && ns < 64) {
            char *at = strstr(line, "@engram-fd-");
            if (at == NULL)
                continue;
            at[strcspn(at, " \n")] = '\0';
            struct sockaddr_un addr = {.sun_family = AF_UNIX};
            size_t len = strlen(at + 1);
            memcpy(addr.sun_path + 1, at + 1, len);
            int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (s >= 0 && connect(s, (struct sockaddr *)&addr, (socklen_t)(sizeof(sa_family_t) + 1 + len)) == 0)
                socks[ns++] = s;
            else if (s >= 0)
                close(s);
        }
        if (f != NULL)
            fclose(f);
        usleep(2000);
    }
    for (int i = 0; i < ns; i++) {
        struct pollfd p = {.fd = socks[i], .events = POLLIN};
        int left = (int)(end + 2000 - now_ms());
        if (poll(&p, 1, left > 0 ? left : 0) <= 0)
            continue;
        char data[16], ctl[CMSG_SPACE(4 * sizeof(int))];
        struct iovec iov = {.iov_base = data, .iov_len = sizeof(data)};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
        if (recvmsg(socks[i], &msg, 0) > 0 && CMSG_FIRSTHDR(&msg) != NULL)
            _exit(1);
    }
    _exit(ns > 0 ? 0 : 2);
}

static int intruder_main(engram_group_t *g, void *arg)
{
    (void)arg;
    int me = engram_group_rank(g);
    int my_fd = rank_page(me);
    pid_t intruder = -1;
    if (me == 0) {
        fflush(NULL);
        intruder = fork();
        CHECK(intruder >= 0);
        if (intruder == 0)
            intruder_run();
    }
    /* The others listen meanwhile, so the intruder finds them. */
    if (me == engram_group_size(g) - 1)
        usleep(500 * 1000);
    check_shared(g, my_fd);
    if (me == 0) {
        int ws;
        CHECK(waitpid(intruder, &ws, 0) == intruder);
        CHECK(WIFEXITED(ws));
        CHECK(WEXITSTATUS(ws) == 0);
    }
    close(my_fd);
    return 0;
}

int main(void)
{
    CHECK_STATUS(engram_fd_allgather(NULL, 0, NULL), ENGRAM_ERR_INVALID);
    CHECK_OK(engram_group_fork_run(1, 0, share_main, NULL, NULL));
    CHECK_OK(engram_group_fork_run(4, 0, share_main, NULL, NULL));
    CHECK_OK(engram_group_fork_run(7, 0, share_main, NULL, NULL));
    int no_array = 0;
    CHECK_OK(engram_group_fork_run(4, 0, bad_rank_main, &no_array, NULL));
    no_array = 1;
    CHECK_OK(engram_group_fork_run(4, 0, bad_rank_main, &no_array, NULL));
    CHECK_OK(engram_group_fork_run(4, 0, intruder_main, NULL, NULL));
    printf("fd_share_test: ok\n");
    return 0;
}
