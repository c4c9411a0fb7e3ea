/* Internal name of the public <engram/group.h>. */
#ifndef ENGRAM_HAL_GROUP_H
#define ENGRAM_HAL_GROUP_H

#include "engram/group.h"

/* engram_group_agree for one named step of a collective: a peer's failure
 * comes back as that peer's own status, with a message naming the rank and
 * `what` it failed to do ("register its segment"); NULL: "the collective
 * call". Every in-tree agreement goes through here (docs/ARCHITECTURE.md). */
engram_status_t engram_group_agree_step(engram_group_t *group, engram_status_t local, const char *what);

/* The status of a rank's failed step that the others learnt from an
 * exchanged record: the same convention, for exchanges that carry more
 * than the status. */
engram_status_t engram_group_peer_failed(int rank, engram_status_t status, const char *what);

/* Where the ranks run (hal/host_id.h), gathered once per group by
 * engram_group_hosts: which ranks share a host, and for messages why they
 * do not. The same text on every rank: each is built from the gathered
 * records in rank order. */
typedef struct engram_group_hosts {
    int count;        /* distinct hosts */
    int *first;       /* per rank: the lowest rank on its host */
    char spread[320]; /* "" on one host, else the first rank not on rank 0's host and why */
    char nodes[448];  /* "" when each node's ranks share a host, else the first node that does not */
} engram_group_hosts_t;

/* Collective on the first call, then cached: where the group's ranks run.
 * Every layer's "same host" is this map's (hal/host_id.h). */
engram_status_t engram_group_hosts(engram_group_t *group, const engram_group_hosts_t **out);

/* ENGRAM_ERR_UNSUPPORTED, its message starting with `what` ("mode=hybrid"),
 * when some node's ranks are not all on one host, for what maps a node's
 * memory in each of its ranks (hybrid regions, GPU tables); OK otherwise.
 * Collective unless the map is cached. */
engram_status_t engram_group_check_nodes(engram_group_t *group, const char *what);

/* Frees the cached map (engram_group_destroy does). */
void engram_group_hosts_free(engram_group_t *group);

#endif
