#include "hal/group.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/config.h"
#include "hal/group_provider.h"
#include "hal/host_id.h"
#include "hal/log.h"

engram_status_t engram_group_init(engram_group_t *g, const engram_group_ops_t *ops, void *provider, int rank,
                                  int size, int local_size)
{
    if (g == NULL || ops == NULL || ops->size < sizeof(*ops) || ops->allgather == NULL || ops->barrier == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "group provider ops missing or incomplete");
    if (size < 1 || rank < 0 || rank >= size)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "group rank %d / size %d out of range", rank, size);
    if (local_size < 0 || local_size > size)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "local_size %d must be in [0, size %d]", local_size, size);
    if (local_size == 0)
        local_size = size;
    if (size % local_size != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "group size %d is not a multiple of local_size %d", size,
                            local_size);
    g->ops = ops;
    g->provider = provider;
    g->rank = rank;
    g->size = size;
    g->local_rank = rank % local_size;
    g->local_size = local_size;
    g->timeout_ms = ENGRAM_DEFAULT_TIMEOUT_MS;
    g->single_host = -1;
    g->progress = NULL;
    g->progress_arg = NULL;
    return ENGRAM_OK;
}

void engram_group_destroy(engram_group_t *group)
{
    if (group == NULL)
        return;
    if (group->ops->destroy != NULL)
        group->ops->destroy(group);
    free(group);
}

int engram_group_rank(const engram_group_t *group) { return group->rank; }
int engram_group_size(const engram_group_t *group) { return group->size; }
int engram_group_local_rank(const engram_group_t *group) { return group->local_rank; }
int engram_group_local_size(const engram_group_t *group) { return group->local_size; }
int engram_group_timeout(const engram_group_t *group) { return group->timeout_ms; }

void engram_group_set_timeout(engram_group_t *group, int timeout_ms)
{
    if (timeout_ms <= 0) {
        ENGRAM_WARN("group timeout %d ms refused (must be > 0); keeping %d ms", timeout_ms, group->timeout_ms);
        return;
    }
    group->timeout_ms = timeout_ms;
}

engram_status_t engram_group_allgather(engram_group_t *group, const void *send, void *recv, size_t bytes)
{
    if (group == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "allgather on a NULL group");
    if (bytes > 0 && (send == NULL || recv == NULL))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "allgather of %zu bytes with a NULL %s buffer", bytes,
                            send == NULL ? "send" : "receive");
    if (bytes > SIZE_MAX / (size_t)group->size)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "allgather of %zu bytes x %d ranks overflows size_t", bytes,
                            group->size);
    return group->ops->allgather(group, send, recv, bytes);
}

engram_status_t engram_group_barrier(engram_group_t *group)
{
    if (group == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "barrier on a NULL group");
    return group->ops->barrier(group);
}

engram_status_t engram_group_peer_failed(int rank, engram_status_t status, const char *what)
{
    return ENGRAM_ERROR(status, "rank %d failed to %s (%s); abandoning the collective call", rank,
                        what ? what : "complete the collective call", engram_status_str(status));
}

engram_status_t engram_group_agree(engram_group_t *group, engram_status_t local)
{
    return engram_group_agree_step(group, local, NULL);
}

engram_status_t engram_group_agree_step(engram_group_t *group, engram_status_t local, const char *what)
{
    int n = engram_group_size(group);
    int32_t *all = calloc((size_t)n, sizeof(*all));
    if (all == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate %d statuses for agreement", n);
    int32_t mine = (int32_t)local;
    engram_status_t st = engram_group_allgather(group, &mine, all, sizeof(mine));
    if (st == ENGRAM_OK && local == ENGRAM_OK) {
        for (int r = 0; r < n; r++) {
            if (all[r] != ENGRAM_OK) {
                st = engram_group_peer_failed(r, (engram_status_t)all[r], what);
                break;
            }
        }
    }
    free(all);
    return local != ENGRAM_OK ? local : st;
}

/* Boot id alone identifies a kernel; the hostname is gathered too so the
 * error message for a mixed group can say where the ranks run. */
typedef struct host_record {
    char boot_id[ENGRAM_BOOT_ID_LEN];
    char hostname[HOST_NAME_MAX + 1];
    char ok;
} host_record_t;

static void host_record_fill(host_record_t *rec)
{
    memset(rec, 0, sizeof(*rec));
    rec->ok = engram_host_boot_id(rec->boot_id) == ENGRAM_OK;
    if (gethostname(rec->hostname, sizeof(rec->hostname) - 1) != 0)
        strcpy(rec->hostname, "?");
}

int engram_group_single_host(engram_group_t *group)
{
    if (group == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "single_host on a NULL group");
    if (group->single_host >= 0)
        return group->single_host;
    host_record_t mine;
    host_record_fill(&mine);
    host_record_t *all = calloc((size_t)group->size, sizeof(*all));
    if (all == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "no memory for %d host records", group->size);
    engram_status_t st = engram_group_allgather(group, &mine, all, sizeof(mine));
    if (st != ENGRAM_OK)
        goto free_all;
    int single = 1;
    for (int r = 0; r < group->size; r++) {
        if (!all[r].ok) {
            st = ENGRAM_ERROR(ENGRAM_ERR_IO, "rank %d (host %.64s) could not read its kernel boot id", r,
                              all[r].hostname);
            goto free_all;
        }
        if (strcmp(all[r].boot_id, mine.boot_id) != 0) {
            ENGRAM_DEBUG("rank %d runs on host %.64s, rank %d on %.64s: not a single host", r, all[r].hostname,
                         group->rank, mine.hostname);
            single = 0;
        }
    }
    group->single_host = single;
free_all:
    free(all);
    return st == ENGRAM_OK ? group->single_host : (int)st;
}

void engram_group_set_progress(engram_group_t *group, engram_group_progress_fn fn, void *arg)
{
    group->progress = fn;
    group->progress_arg = arg;
}

int engram_group_progress(engram_group_t *group)
{
    if (group == NULL || group->progress == NULL)
        return 0;
    group->progress(group->progress_arg);
    return 1;
}

int engram_group_waiting(engram_group_t *g, int left_ms)
{
    if (g->progress == NULL)
        return left_ms;
    g->progress(g->progress_arg);
    return 0; /* serving peers is a busy loop, as a NIC's target would be */
}
