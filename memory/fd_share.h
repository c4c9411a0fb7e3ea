/* Passing segment fds among the processes of a group, over Unix sockets.
 *
 * Each rank opens a listening socket in the abstract namespace (no path on
 * any filesystem) under a random name, the names and pids are allgathered,
 * every rank connects to each other rank on its host, and the fds travel
 * with SCM_RIGHTS. A connecting process is accepted only if SO_PEERCRED
 * shows a pid that is a member of the group, so no process outside the
 * group can obtain a segment. */
#ifndef ENGRAM_MEMORY_FD_SHARE_H
#define ENGRAM_MEMORY_FD_SHARE_H

#include "hal/group.h"
#include "hal/status.h"

/* Collective over the whole group. fds[r] receives an fd referring to rank
 * r's `my_fd` for every rank r on this host (fds[own rank] is a dup of
 * my_fd) and -1 for ranks on other hosts. The caller closes the fds. On
 * failure no fd is left open and every rank returns an error (bounded by
 * the group's timeout without progress: a connection made or an fd
 * received or served restarts it, so an exchange among many ranks may
 * take longer in all, while a stalled peer fails it). */
engram_status_t engram_fd_allgather(engram_group_t *group, int my_fd, int *fds);

#endif
