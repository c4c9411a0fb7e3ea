/* Internal name of the public <engram/group.h> and the group services of
 * <engram/plugin/group.h>, and what only the library itself uses. */
#ifndef ENGRAM_HAL_GROUP_H
#define ENGRAM_HAL_GROUP_H

#include "engram/group.h"
#include "engram/plugin/group.h"

/* ENGRAM_ERR_UNSUPPORTED, its message starting with `what` ("mode=hybrid"),
 * when some node's ranks are not all on one host, for what maps a node's
 * memory in each of its ranks (hybrid regions, GPU tables); OK otherwise.
 * Collective unless the map is cached. */
engram_status_t engram_group_check_nodes(engram_group_t *group, const char *what);

/* One bound for a sequence of collectives (a teardown): from begin until
 * the matching end, every collective of the group waits at most what is
 * left of one timeout_ms counted from begin (a provider bounding time
 * without progress stops there as well), and one begun when that is spent
 * fails at once with ENGRAM_ERR_TIMEOUT. A bound begun inside another
 * keeps the earlier end. Returns what engram_group_bound_end restores. */
int64_t engram_group_bound_begin(engram_group_t *group);
void engram_group_bound_end(engram_group_t *group, int64_t saved);

/* The status of the collective that failed this group, or ENGRAM_OK;
 * *why (may be NULL) gets its message. */
engram_status_t engram_group_failed(const engram_group_t *group, const char **why);

/* Frees the cached map (engram_group_destroy does). */
void engram_group_hosts_free(engram_group_t *group);

#endif
