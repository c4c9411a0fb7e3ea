/* pidfd_open through syscall(2): glibc before 2.36 has no wrapper. */
#include "transports/ucx/pid_watch.h"

#include <errno.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif

int engram_pid_watch_open(int pid)
{
    if (pid <= 0)
        return -EINVAL;
    long fd = syscall(SYS_pidfd_open, pid, 0);
    return fd >= 0 ? (int)fd : -errno;
}

bool engram_pid_watch_exited(int watch)
{
    struct pollfd p = {.fd = watch, .events = POLLIN};
    int n;
    do
        n = poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    return n > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

void engram_pid_watch_close(int watch)
{
    if (watch >= 0)
        close(watch);
}
