/* Peer liveness beyond what UCX reports. Shared-memory transports cannot
 * report a peer's failure (UCX refuses UCP_ERR_HANDLING_MODE_PEER for
 * them), and even where UCX can, keepalive takes seconds; a peer on this
 * kernel whose pid names it here (hal/host_id.h: one pid namespace, a
 * network namespace of its own or not) is watched through a pidfd
 * (pid_watch.h: a pid alone is fooled by its reuse) while a wait is slow. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/plugin/group.h"
#include "engram/log.h"
#include "transports/ucx/pid_watch.h"
#include "transports/ucx/ucx_internal.h"

typedef struct identity {
    engram_host_id_t host;
    int32_t pid;
    int32_t known; /* its host could be told */
} identity_t;

/* Each peer whose pid names it here gets a watch; the barrier after them
 * means every peer was alive after its watch was opened, so no watch names
 * a process that took a dead peer's pid in between. */
engram_status_t engram_ucx_liveness_init(engram_transport_t *t)
{
    identity_t mine = {.pid = (int32_t)getpid()};
    /* A rank that cannot tell its host leaves the peers unwatched: UCX's
     * own failure reports and the timeouts still bound every wait. */
    mine.known = engram_host_id_self(&mine.host, NULL) == ENGRAM_OK;
    identity_t *all = calloc((size_t)t->shape.size, sizeof(*all));
    t->peer_watch = malloc((size_t)t->shape.size * sizeof(*t->peer_watch));
    if (all == NULL || t->peer_watch == NULL) {
        free(all);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx: out of memory for %d peer identities", t->shape.size);
    }
    for (int r = 0; r < t->shape.size; r++)
        t->peer_watch[r] = -1;
    engram_status_t st = engram_group_allgather(t->group, &mine, all, sizeof(mine));
    int unwatched = 0, why = 0;
    for (int r = 0; st == ENGRAM_OK && r < t->shape.size; r++) {
        if (r == t->shape.rank || !mine.known || !all[r].known || !engram_host_id_pids_shared(&all[r].host, &mine.host))
            continue;
        t->peer_watch[r] = engram_pid_watch_open(all[r].pid);
        if (t->peer_watch[r] < 0) {
            why = -t->peer_watch[r];
            unwatched++;
        }
    }
    free(all);
    if (unwatched > 0)
        ENGRAM_INFO("ucx: %d peers on this host are not watched (pidfd_open: %s); their failures are found by "
                    "UCX or the timeout", unwatched, strerror(why));
    if (st == ENGRAM_OK)
        st = engram_group_barrier(t->group);
    return st;
}

void engram_ucx_liveness_close(engram_transport_t *t)
{
    for (int r = 0; t->peer_watch != NULL && r < t->shape.size; r++)
        engram_pid_watch_close(t->peer_watch[r]);
    free(t->peer_watch);
    t->peer_watch = NULL;
}

bool engram_ucx_check_peer(engram_transport_t *t, int rank)
{
    if (engram_ucx_peer_is_dead(t, rank))
        return true;
    if (t->peer_watch[rank] < 0 || !engram_pid_watch_exited(t->peer_watch[rank]))
        return false;
    if (__atomic_exchange_n(&t->peer_dead[rank], 1, __ATOMIC_RELAXED) == 0)
        ENGRAM_WARN("ucx: peer rank %d has exited; its gets and flushes now fail", rank);
    return true;
}

int engram_ucx_failed_peer(engram_transport_t *t)
{
    for (int r = 0; r < t->shape.size; r++) {
        if (engram_ucx_check_peer(t, r))
            return r;
    }
    return -1;
}
