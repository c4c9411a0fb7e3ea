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

/* Frees the cached map (engram_group_destroy does). */
void engram_group_hosts_free(engram_group_t *group);

#endif
