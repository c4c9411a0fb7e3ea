#include "hal/group.h"

#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
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
    g->bound_end_ns = 0;
    g->failed = ENGRAM_OK;
    g->failed_why[0] = '\0';
    g->hosts = NULL;
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
    engram_group_hosts_free(group);
    free(group);
}

int engram_group_rank(const engram_group_t *group) { return group->rank; }
int engram_group_size(const engram_group_t *group) { return group->size; }
int engram_group_local_rank(const engram_group_t *group) { return group->local_rank; }
int engram_group_local_size(const engram_group_t *group) { return group->local_size; }
int engram_group_timeout(const engram_group_t *group) { return engram_group_wait_ms(group); }

int engram_group_bound_left_ms(const engram_group_t *g)
{
    if (g->bound_end_ns == 0)
        return INT_MAX;
    int64_t left = g->bound_end_ns - engram_now_ns();
    if (left <= 0)
        return 0;
    int64_t ms = (left + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

int engram_group_wait_ms(const engram_group_t *g)
{
    int left = engram_group_bound_left_ms(g);
    int ms = left < g->timeout_ms ? left : g->timeout_ms;
    return ms > 0 ? ms : 1;
}

int64_t engram_group_bound_begin(engram_group_t *group)
{
    int64_t saved = group->bound_end_ns;
    int64_t end = engram_now_ns() + (int64_t)group->timeout_ms * 1000000;
    if (saved == 0 || end < saved)
        group->bound_end_ns = end;
    return saved;
}

void engram_group_bound_end(engram_group_t *group, int64_t saved)
{
    group->bound_end_ns = saved;
}

engram_status_t engram_group_failed(const engram_group_t *group, const char **why)
{
    if (why != NULL)
        *why = group->failed_why;
    return group->failed;
}

/* A collective is refused once the group has failed (the ranks may no
 * longer agree on which collective comes next), or when the running bound
 * is spent (then it fails the group: the others may be waiting in it). */
static engram_status_t collective_refused(engram_group_t *g, const char *what)
{
    if (g->failed != ENGRAM_OK)
        return ENGRAM_ERROR(g->failed, "rank %d %s: the group failed earlier: %s", g->rank, what, g->failed_why);
    if (g->bound_end_ns != 0 && engram_now_ns() >= g->bound_end_ns) {
        engram_status_t st = ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT, "rank %d: %s not started: the bound of timeout_ms=%d "
                                          "on this teardown's collectives is spent", g->rank, what, g->timeout_ms);
        g->failed = st;
        snprintf(g->failed_why, sizeof(g->failed_why), "%s", engram_last_error());
        return st;
    }
    return ENGRAM_OK;
}

/* The provider's outcome; a failure is the group's from now on. */
static engram_status_t collective_done(engram_group_t *g, engram_status_t st)
{
    if (st != ENGRAM_OK && g->failed == ENGRAM_OK) {
        g->failed = st;
        snprintf(g->failed_why, sizeof(g->failed_why), "%s", engram_last_error());
    }
    return st;
}

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
    engram_status_t st = collective_refused(group, "allgather");
    if (st != ENGRAM_OK)
        return st;
    return collective_done(group, group->ops->allgather(group, send, recv, bytes));
}

engram_status_t engram_group_barrier(engram_group_t *group)
{
    if (group == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "barrier on a NULL group");
    engram_status_t st = collective_refused(group, "barrier");
    if (st != ENGRAM_OK)
        return st;
    return collective_done(group, group->ops->barrier(group));
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

/* What each rank contributes to the host map: its identity, and its
 * hostname for the messages (the hostname decides nothing). */
typedef struct host_record {
    engram_host_id_t id;
    char hostname[HOST_NAME_MAX + 1];
    char known; /* 0: this rank could not tell its identity */
} host_record_t;

/* This rank's record; *why says what it could not read when !known. */
static void host_record_fill(host_record_t *rec, const char **why)
{
    memset(rec, 0, sizeof(*rec));
    rec->known = engram_host_id_self(&rec->id, why) == ENGRAM_OK;
    if (gethostname(rec->hostname, sizeof(rec->hostname) - 1) != 0)
        strcpy(rec->hostname, "?");
}

/* "rank R (hostname H) is not on rank Q's host (hostname G): another ..." */
static void describe_apart(char *buf, size_t len, const host_record_t *all, int r, int q)
{
    snprintf(buf, len, "rank %d (hostname %.64s) is not on rank %d's host (hostname %.64s): %s", r,
             all[r].hostname, q, all[q].hostname, engram_host_id_difference(&all[q].id, &all[r].id));
}

/* The map from the gathered records, the same on every rank. */
static engram_status_t hosts_build(const engram_group_t *group, const host_record_t *all, engram_group_hosts_t *h)
{
    int n = group->size, local = group->local_size;
    h->first = malloc((size_t)n * sizeof(*h->first));
    int *reps = malloc((size_t)n * sizeof(*reps)); /* the first rank of each host seen so far */
    if (h->first == NULL || reps == NULL) {
        free(reps);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "no memory for the hosts of %d ranks", n);
    }
    h->count = 0;
    for (int r = 0; r < n; r++) {
        int k = 0;
        while (k < h->count && !engram_host_id_same(&all[reps[k]].id, &all[r].id))
            k++;
        if (k == h->count)
            reps[h->count++] = r;
        h->first[r] = reps[k];
    }
    free(reps);
    for (int r = 1; r < n && h->spread[0] == '\0'; r++)
        if (h->first[r] != 0)
            describe_apart(h->spread, sizeof(h->spread), all, r, 0);
    for (int r = 0; r < n && h->nodes[0] == '\0'; r++) {
        int base = r - r % local;
        if (h->first[r] != h->first[base]) {
            char apart[sizeof(h->spread)];
            describe_apart(apart, sizeof(apart), all, r, base);
            snprintf(h->nodes, sizeof(h->nodes), "node %d (ranks %d..%d) spans hosts: %s", base / local, base,
                     base + local - 1, apart);
        }
    }
    return ENGRAM_OK;
}

engram_status_t engram_group_hosts(engram_group_t *group, const engram_group_hosts_t **out)
{
    if (group == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "hosts of a NULL group");
    if (group->hosts != NULL) {
        *out = group->hosts;
        return ENGRAM_OK;
    }
    host_record_t mine;
    const char *why = NULL;
    host_record_fill(&mine, &why);
    host_record_t *all = calloc((size_t)group->size, sizeof(*all));
    engram_group_hosts_t *h = calloc(1, sizeof(*h));
    /* Leaving now makes the others' allgather fail by timeout: bounded. */
    engram_status_t st = all != NULL && h != NULL
                             ? engram_group_allgather(group, &mine, all, sizeof(mine))
                             : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "no memory for %d host records", group->size);
    for (int r = 0; st == ENGRAM_OK && r < group->size; r++)
        if (!all[r].known)
            st = ENGRAM_ERROR(ENGRAM_ERR_IO, "rank %d (hostname %.64s) cannot tell which host it is on: %s", r,
                              all[r].hostname, r == group->rank ? why : "it has no /proc/sys/kernel/random/boot_id "
                                                                        "or /proc/self/ns (see its log)");
    if (st == ENGRAM_OK)
        st = hosts_build(group, all, h);
    free(all);
    if (st != ENGRAM_OK) {
        if (h != NULL)
            free(h->first);
        free(h);
        return st;
    }
    if (h->count > 1)
        ENGRAM_DEBUG("the group's %d ranks run on %d hosts; %s", group->size, h->count, h->spread);
    group->hosts = h;
    *out = h;
    return ENGRAM_OK;
}

void engram_group_hosts_free(engram_group_t *group)
{
    if (group->hosts != NULL)
        free(group->hosts->first);
    free(group->hosts);
    group->hosts = NULL;
}

int engram_group_single_host(engram_group_t *group)
{
    const engram_group_hosts_t *h;
    engram_status_t st = engram_group_hosts(group, &h);
    return st == ENGRAM_OK ? h->count == 1 : (int)st;
}

engram_status_t engram_host_identity(char *buf, size_t len)
{
    engram_host_id_t id;
    const char *why = NULL;
    if (engram_host_id_self(&id, &why) != ENGRAM_OK)
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "engram_host_identity: %s", why);
    char text[ENGRAM_HOST_IDENTITY_MAX];
    int n = snprintf(text, sizeof(text), "%s/ns:%llu/net:%llu/pid:%llu", id.boot_id, (unsigned long long)id.ns_dev,
                     (unsigned long long)id.netns, (unsigned long long)id.pidns);
    if (buf == NULL || (size_t)n >= len)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "engram_host_identity: needs %d bytes, the buffer has %zu", n + 1,
                            buf == NULL ? 0 : len);
    memcpy(buf, text, (size_t)n + 1);
    return ENGRAM_OK;
}

engram_status_t engram_group_check_nodes(engram_group_t *group, const char *what)
{
    const engram_group_hosts_t *h;
    engram_status_t st = engram_group_hosts(group, &h);
    if (st != ENGRAM_OK || h->nodes[0] == '\0')
        return st;
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                        "%s: %s; the ranks of a node (local_size %d consecutive ranks) map each other's memory, so "
                        "they must share a host (one kernel, network and pid namespace): give the group a "
                        "local_size that groups its ranks by host",
                        what, h->nodes, group->local_size);
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
