/* The group services a transport may use, beside the public collectives of
 * <engram/group.h> (rank and size, local rank and size, allgather, barrier,
 * agree, timeout): agreement on a named step, the failed-peer convention
 * for exchanges that carry more than a status, and where the ranks run. */
#ifndef ENGRAM_PLUGIN_GROUP_H
#define ENGRAM_PLUGIN_GROUP_H

#include <stdbool.h>
#include <stdint.h>
#include "engram/group.h"
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* engram_group_agree for one named step of a collective: a peer's failure
 * comes back as that peer's own status, with a message naming the rank and
 * `what` it failed to do ("register its segment"); NULL: "the collective
 * call". Every agreement of the library and its transports goes through
 * here, so a failed step reads the same from every layer. */
ENGRAM_PLUGIN_API engram_status_t engram_group_agree_step(engram_group_t *group, engram_status_t local,
                                                          const char *what);

/* The status of a rank's failed step that the others learnt from an
 * exchanged record: the same convention, for exchanges that carry more
 * than the status. */
ENGRAM_PLUGIN_API engram_status_t engram_group_peer_failed(int rank, engram_status_t status, const char *what);

/* Where the ranks run, gathered once per group: which ranks share a host,
 * and for messages why they do not. The same text on every rank: each is
 * built from the gathered records in rank order. */
typedef struct engram_group_hosts {
    int count;        /* distinct hosts */
    int *first;       /* per rank: the lowest rank on its host */
    char spread[320]; /* "" on one host, else the first rank not on rank 0's host and why */
    char nodes[448];  /* "" when each node's ranks share a host, else the first node that does not */
} engram_group_hosts_t;

/* Collective on the first call, then cached (valid while the group lives):
 * where the group's ranks run. One host is one running kernel (boot id)
 * and one network and pid namespace. */
ENGRAM_PLUGIN_API engram_status_t engram_group_hosts(engram_group_t *group, const engram_group_hosts_t **out);

#define ENGRAM_BOOT_ID_LEN 37 /* 36 characters of a UUID + NUL */

/* A process's host identity. Plain data of a fixed layout: ranks
 * allgather it as bytes. */
typedef struct engram_host_id {
    char boot_id[ENGRAM_BOOT_ID_LEN];
    char pad[3];
    uint64_t ns_dev;       /* the device of the namespace files (nsfs) */
    uint64_t netns, pidns; /* their inode numbers */
} engram_host_id_t;

/* This process's identity. On failure (no /proc) *out is zeroed and the
 * error returned, not logged, as callers use it inside collectives and
 * report after all ranks agree; *why (may be NULL) says what could not be
 * read. */
ENGRAM_PLUGIN_API engram_status_t engram_host_id_self(engram_host_id_t *out, const char **why);

/* Whether a pid of b's names the same process in a (one kernel and one pid
 * namespace, whatever the network): weaker than one host, and what watching
 * a peer by pid needs. */
ENGRAM_PLUGIN_API bool engram_host_id_pids_shared(const engram_host_id_t *a, const engram_host_id_t *b);

#ifdef __cplusplus
}
#endif
#endif
