/* A process's exit watched through a pidfd (Linux >= 5.3). A pid alone
 * cannot say whether its process is gone: once the process is reaped the
 * pid may name another one, and /proc/<pid> then looks alive. A pidfd
 * names the process itself; it turns readable when the process exits
 * (a zombie counts as exited). */
#ifndef ENGRAM_TRANSPORTS_UCX_PID_WATCH_H
#define ENGRAM_TRANSPORTS_UCX_PID_WATCH_H

#include <stdbool.h>

/* The watch of a live `pid` (a descriptor, close-on-exec), or -errno
 * (ESRCH: no such process now; ENOSYS: the kernel has no pidfd_open). The
 * caller must know the process was alive when this returned, e.g. from a
 * message it sent afterwards: a pid reused before the call is not told
 * apart. */
int engram_pid_watch_open(int pid);
/* Whether the watched process has exited (never blocks). */
bool engram_pid_watch_exited(int watch);
void engram_pid_watch_close(int watch);

#endif
