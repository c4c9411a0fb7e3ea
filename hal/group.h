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

#endif
