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

#include "hal/status.h"

#define ENGRAM_BOOT_ID_LEN 37 /* 36 characters of a UUID + NUL */

/* Plain data of a fixed layout: ranks allgather it as bytes. */
typedef struct engram_host_id {
    char boot_id[ENGRAM_BOOT_ID_LEN];
    char pad[3];
    uint64_t ns_dev;       /* the device of the namespace files (nsfs) */
    uint64_t netns, pidns; /* their inode numbers */
} engram_host_id_t;

/* This process's identity: the kernel's boot id (equal on two processes
 * iff they share a running kernel) and its namespaces. On failure (no
 * /proc) *out is zeroed and the error returned, not logged, as callers use
 * it inside collectives and report after all ranks agree; *why (may be
 * NULL) says what could not be read. */
engram_status_t engram_host_id_self(engram_host_id_t *out, const char **why);

/* Whether a and b are one host (see above). */
bool engram_host_id_same(const engram_host_id_t *a, const engram_host_id_t *b);

/* Whether a pid of b's names the same process in a (one kernel and one pid
 * namespace, whatever the network): weaker than one host, and what watching
 * a peer by pid needs. */
bool engram_host_id_pids_shared(const engram_host_id_t *a, const engram_host_id_t *b);

/* Why b is not on a's host ("another kernel", "another network namespace
 * of the same kernel", ...); NULL when they are one host. */
const char *engram_host_id_difference(const engram_host_id_t *a, const engram_host_id_t *b);

#endif
