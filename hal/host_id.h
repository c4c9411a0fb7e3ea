/* Identity of the host this process runs on (internal): the one definition
 * of "same host" every layer uses (the group's host map, fd sharing, a
 * transport's peer watch).
 *
 * Two processes are on one host when they share the running kernel (boot
 * id), the network namespace and the pid namespace: only then can they pass
 * fds over abstract Unix sockets (those are per network namespace) and name
 * each other by pid. Two containers on one machine, each with its own
 * namespaces, are two hosts; the hostname (UTS namespace) plays no part. */
#ifndef ENGRAM_HAL_HOST_ID_H
#define ENGRAM_HAL_HOST_ID_H

#include <stdbool.h>
#include <stdint.h>

#include "engram/plugin/group.h"
#include "hal/status.h"

/* engram_host_id_t, engram_host_id_self and engram_host_id_pids_shared are
 * plugin services (<engram/plugin/group.h>). */

/* Whether a and b are one host (see above). */
bool engram_host_id_same(const engram_host_id_t *a, const engram_host_id_t *b);

/* Why b is not on a's host ("another kernel", "another network namespace
 * of the same kernel", ...); NULL when they are one host. */
const char *engram_host_id_difference(const engram_host_id_t *a, const engram_host_id_t *b);

#endif
