/* Loopback transport: the ranks of one host map each other's segments
 * read-only and a get is a memcpy. Like a NIC, a queue holds AGGREGATE gets
 * back until a doorbell (a get without the flag, a flush, or a full queue)
 * and then copies the batch: recording a get costs a few stores and no
 * cache miss, and the batch is copied in one tight loop that prefetches the
 * rows ahead, so a fetch is not slower than a plain memcpy gather. A flush
 * copies everything its queue holds, so its request is complete at once. */
#include "transports/loopback/loopback.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/plugin/group.h"
#include "engram/log.h"
#include "engram/plugin/segment.h"
#include "engram/plugin/free_list.h"
#include "engram/plugin/held_copy.h"

#define LOOPBACK_MAX_QUEUES 64
#define REQUEST_BLOCK 64 /* flush requests allocated at a time */
/* Gets held per queue (its gets in flight, max_outstanding): more than the
 * engram layer's default flush depth, so its batches are not split. */
#define QUEUE_DEPTH 1024

struct engram_request {
    int queue;
};

/* One cache line apart, so queues driven by different threads share none. */
typedef struct loopback_queue {
    engram_held_copy_t *held; /* QUEUE_DEPTH entries: gets issued since the last doorbell */
    uint32_t nheld;
    engram_free_list_t reqs; /* flush requests */
} __attribute__((aligned(64))) loopback_queue_t;

struct engram_region {
    /* Read by every get. */
    char **peer_base; /* symmetric: where peer p's region starts; NULL for local regions */
    char *dst;        /* local: the writable destination; NULL for symmetric regions */
    uint64_t size;    /* bytes addressable per peer, or of the local destination */
    int npeers;       /* 0 for local regions */
    /* Teardown. */
    engram_region_t *next;
    engram_segment_t **imports;  /* ENGRAM_REG_RANK: per rank, NULL for the own one */
    engram_segment_span_t *spans; /* ENGRAM_REG_NODE_SPAN: per node */
    int nimports, nspans;
};

struct engram_transport {
    engram_group_t *group;
    int nqueues, npeers;
    loopback_queue_t *queues;
    engram_region_t *regions; /* every live region, released by close */
};

/* Its ranks map each other's segments by fd: one host (hal/host_id.h). */
static bool loopback_available(engram_group_t *group, const char **why)
{
    const engram_group_hosts_t *hosts = NULL;
    if (group != NULL && engram_group_hosts(group, &hosts) == ENGRAM_OK && hosts->count == 1)
        return true;
    if (why != NULL)
        *why = hosts != NULL ? hosts->spread : "could not tell whether all ranks share this host";
    return false;
}

static void queues_free(engram_transport_t *t)
{
    for (int q = 0; q < t->nqueues; q++) {
        free(t->queues[q].held);
        engram_free_list_destroy(&t->queues[q].reqs);
    }
    free(t->queues);
}

static engram_status_t loopback_open(engram_group_t *group, const engram_config_view_t *cfg, engram_transport_t **out)
{
    (void)cfg;
    if (group == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback open: group and out must not be NULL");
    const char *why = NULL;
    if (!loopback_available(group, &why))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "loopback open: %s", why);
    engram_transport_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "loopback open: out of memory");
    t->group = group;
    t->npeers = engram_group_size(group);
    t->queues = aligned_alloc(_Alignof(loopback_queue_t), LOOPBACK_MAX_QUEUES * sizeof(loopback_queue_t));
    if (t->queues == NULL)
        goto free_t;
    memset(t->queues, 0, LOOPBACK_MAX_QUEUES * sizeof(loopback_queue_t));
    for (; t->nqueues < LOOPBACK_MAX_QUEUES; t->nqueues++) {
        engram_free_list_init(&t->queues[t->nqueues].reqs, sizeof(engram_request_t), REQUEST_BLOCK);
        t->queues[t->nqueues].held = malloc(QUEUE_DEPTH * sizeof(engram_held_copy_t));
        if (t->queues[t->nqueues].held == NULL)
            goto free_queues;
    }
    *out = t;
    return ENGRAM_OK;
free_queues:
    queues_free(t);
free_t:
    free(t);
    return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "loopback open: out of memory for %d queues of %d gets",
                        LOOPBACK_MAX_QUEUES, QUEUE_DEPTH);
}

static void loopback_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    (void)t;
    *caps = (engram_transport_caps_t){
        .flags = ENGRAM_CAP_HOST_INITIATED | ENGRAM_CAP_HYBRID,
        .read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST),
        .write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST),
        .max_queues = LOOPBACK_MAX_QUEUES,
        .max_outstanding = QUEUE_DEPTH,
    };
}

static void region_free(engram_region_t *r)
{
    for (int i = 0; i < r->nimports; i++)
        if (r->imports[i] != NULL)
            r->imports[i]->ops->free(r->imports[i]);
    for (int i = 0; i < r->nspans; i++)
        engram_segment_span_unmap(&r->spans[i]);
    free(r->imports);
    free(r->spans);
    free(r->peer_base);
    free(r);
}

static void region_link(engram_transport_t *t, engram_region_t *r)
{
    r->next = t->regions;
    t->regions = r;
}

/* Maps every rank's segment on its own (the own one is used as is). */
static engram_status_t map_ranks(engram_region_t *r, engram_segment_t *seg, const int *fds, int rank, int size)
{
    r->npeers = size;
    r->size = seg->size;
    r->imports = calloc((size_t)size, sizeof(*r->imports));
    if (r->imports == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "loopback reg_symmetric: out of memory for %d imports", size);
    r->nimports = size;
    for (int p = 0; p < size; p++) {
        if (p == rank) {
            r->peer_base[p] = seg->addr;
            continue;
        }
        engram_status_t st = seg->ops->import_fd(fds[p], seg->size, true, NULL, &r->imports[p]);
        if (st != ENGRAM_OK)
            return st;
        r->peer_base[p] = r->imports[p]->addr;
    }
    return ENGRAM_OK;
}

/* Maps each node's local segments back to back, so a get may run from one
 * local rank's segment into the next as one contiguous copy. */
static engram_status_t map_nodes(engram_region_t *r, engram_segment_t *seg, const int *fds, int size, int local)
{
    int nodes = size / local;
    if (seg->size > UINT64_MAX / (uint64_t)local)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "loopback reg_symmetric: %d segments of %zu bytes overflow a span",
                            local, seg->size);
    r->npeers = nodes;
    r->size = (uint64_t)seg->size * (uint64_t)local;
    r->spans = calloc((size_t)nodes, sizeof(*r->spans));
    if (r->spans == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "loopback reg_symmetric: out of memory for %d spans", nodes);
    for (int p = 0; p < nodes; p++) {
        engram_status_t st = engram_segment_span_map(seg->ops, fds + (size_t)p * (size_t)local, local, seg->size,
                                                     true, &r->spans[p]);
        if (st != ENGRAM_OK)
            return st;
        r->nspans = p + 1;
        r->peer_base[p] = r->spans[p].base;
    }
    return ENGRAM_OK;
}

/* This rank's half of registration after the fds are shared: the region,
 * or an error with nothing left mapped. */
static engram_status_t region_map(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                  const int *fds, engram_region_t **out)
{
    int rank = engram_group_rank(t->group), size = engram_group_size(t->group);
    for (int p = 0; p < size; p++)
        if (fds[p] < 0)
            return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "loopback reg_symmetric: rank %d is on another host", p);
    engram_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "loopback reg_symmetric: out of memory");
    engram_status_t st = ENGRAM_ERR_NOMEM;
    r->peer_base = calloc((size_t)size, sizeof(*r->peer_base));
    if (r->peer_base == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "loopback reg_symmetric: out of memory for %d peers", size);
        goto free_region;
    }
    st = span == ENGRAM_REG_RANK ? map_ranks(r, seg, fds, rank, size)
                                 : map_nodes(r, seg, fds, size, engram_group_local_size(t->group));
    if (st != ENGRAM_OK)
        goto free_region;
    *out = r;
    return ENGRAM_OK;
free_region:
    region_free(r);
    return st;
}

typedef struct reg_info {
    uint64_t bytes;
    int32_t span;
    int32_t pad;
} reg_info_t;

/* Checks that every rank registers the same span and segment size. */
static engram_status_t check_infos(engram_group_t *group, const reg_info_t *info, engram_reg_span_t span,
                                   size_t bytes)
{
    for (int p = 0; p < engram_group_size(group); p++) {
        if (info[p].span != (int32_t)span)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback reg_symmetric: rank %d registers span %d, this rank "
                                "(%d) span %d", p, info[p].span, engram_group_rank(group), (int)span);
        if (info[p].bytes != bytes)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback reg_symmetric: segment sizes differ: rank %d has %llu "
                                "bytes, this rank (%d) %zu; every rank must register the same size", p,
                                (unsigned long long)info[p].bytes, engram_group_rank(group), bytes);
    }
    return ENGRAM_OK;
}

/* This rank's fd to share, or the local reason it cannot take part. */
static engram_status_t check_args(engram_segment_t *seg, engram_reg_span_t span, engram_region_t **out, int *fd)
{
    if (seg == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback reg_symmetric: seg and out must not be NULL");
    if (seg->kind != ENGRAM_MEM_HOST || seg->ops == NULL || seg->ops->export_fd == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "loopback reg_symmetric: only exportable host segments can be "
                            "registered (kind %d)", (int)seg->kind);
    if (span != ENGRAM_REG_RANK && span != ENGRAM_REG_NODE_SPAN)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback reg_symmetric: unknown span %d", (int)span);
    return seg->ops->export_fd(seg, fd);
}

static engram_status_t loopback_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                              engram_region_t **out)
{
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback reg_symmetric: transport is NULL");
    engram_group_t *group = t->group;
    int size = engram_group_size(group);
    reg_info_t *info = malloc((size_t)size * sizeof(*info));
    int *fds = malloc((size_t)size * sizeof(*fds));
    engram_status_t st;
    if (info == NULL || fds == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "loopback reg_symmetric: out of memory for %d ranks", size);
        goto free_arrays;
    }
    /* A rank with bad arguments still takes part in the agreement, so the
     * others fail at once (naming it) instead of waiting for it. */
    int my_fd = -1;
    st = engram_group_agree_step(group, check_args(seg, span, out, &my_fd), "register its segment");
    if (st != ENGRAM_OK)
        goto free_arrays;
    reg_info_t mine = {.bytes = seg->size, .span = (int32_t)span};
    st = engram_group_allgather(group, &mine, info, sizeof(mine));
    if (st == ENGRAM_OK)
        st = check_infos(group, info, span, seg->size);
    if (st != ENGRAM_OK)
        goto free_arrays;
    st = engram_fd_allgather(group, my_fd, fds);
    if (st != ENGRAM_OK)
        goto free_arrays;
    engram_region_t *r = NULL;
    engram_status_t mapped = region_map(t, seg, span, fds, &r);
    for (int p = 0; p < size; p++)
        if (fds[p] >= 0)
            close(fds[p]); /* the mappings keep the memory */
    st = engram_group_agree_step(group, mapped, "map its peers' segments");
    if (mapped != ENGRAM_OK || st != ENGRAM_OK) {
        if (r != NULL)
            region_free(r);
        st = mapped != ENGRAM_OK ? mapped : st;
        goto free_arrays;
    }
    region_link(t, r);
    *out = r;
free_arrays:
    free(fds);
    free(info);
    return st;
}

static engram_status_t loopback_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    if (t == NULL || seg == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback reg_local: transport, seg and out must not be NULL");
    if (seg->kind != ENGRAM_MEM_HOST)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "loopback reg_local: gets write host memory only (kind %d)",
                            (int)seg->kind);
    if (seg->read_only)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback reg_local: a read-only segment cannot receive gets");
    engram_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "loopback reg_local: out of memory");
    r->dst = seg->addr;
    r->size = seg->size;
    region_link(t, r);
    *out = r;
    return ENGRAM_OK;
}

/* The doorbell: copies every held get of the queue, in issue order. */
static void queue_ring(loopback_queue_t *q)
{
    engram_held_copy_run(q->held, q->nheld);
    q->nheld = 0;
}

static void loopback_dereg(engram_transport_t *t, engram_region_t *region)
{
    if (t == NULL || region == NULL)
        return;
    for (engram_region_t **link = &t->regions; *link != NULL; link = &(*link)->next)
        if (*link == region) {
            /* Held gets may read or write the region: copy them while it is mapped. */
            for (int q = 0; q < t->nqueues; q++)
                queue_ring(&t->queues[q]);
            *link = region->next;
            region_free(region);
            return;
        }
    ENGRAM_WARN("loopback dereg: region %p is not registered with this transport", (void *)region);
}

/* Says which check a refused get failed; kept out of line so the get
 * itself stays a handful of compares and three stores. */
static __attribute__((cold, noinline)) engram_status_t get_refused(const engram_transport_t *t, int queue, int peer,
                                                                   const engram_region_t *remote,
                                                                   uint64_t remote_off, const engram_region_t *local,
                                                                   uint64_t local_off, size_t len)
{
    engram_status_t st = engram_get_args_status("loopback", queue, t->nqueues, remote != NULL && local != NULL,
                                                remote != NULL && remote->peer_base != NULL,
                                                local != NULL && local->dst != NULL, peer,
                                                remote != NULL ? remote->npeers : 0);
    if (st != ENGRAM_OK)
        return st;
    return engram_get_bounds_status("loopback", remote_off, remote->size, local_off, local->size, len);
}

static engram_status_t loopback_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                                    uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                                    unsigned flags)
{
    /* Unsigned compares fold the negative cases in. */
    if (__builtin_expect((unsigned)queue >= (unsigned)t->nqueues || remote == NULL || local == NULL ||
                             local->dst == NULL || (unsigned)peer >= (unsigned)remote->npeers ||
                             ENGRAM_DEBUG_CHECK(!engram_range_inside(remote_off, len, remote->size) ||
                                                !engram_range_inside(local_off, len, local->size)),
                         0))
        return get_refused(t, queue, peer, remote, remote_off, local, local_off, len);
    loopback_queue_t *q = &t->queues[queue];
    engram_held_copy_t *h = &q->held[q->nheld++];
    h->dst = local->dst + local_off;
    h->src = remote->peer_base[peer] + remote_off;
    h->len = len;
    if (!(flags & ENGRAM_GET_AGGREGATE) || q->nheld == QUEUE_DEPTH)
        queue_ring(q);
    return ENGRAM_OK;
}

static engram_status_t loopback_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    if (t == NULL || req == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback flush: transport and req must not be NULL");
    if (queue < 0 || queue >= t->nqueues || peer < 0 || peer >= t->npeers)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback flush: queue %d / peer %d out of range [0, %d) / [0, %d)",
                            queue, peer, t->nqueues, t->npeers);
    loopback_queue_t *q = &t->queues[queue];
    engram_request_t *r = engram_free_list_take(&q->reqs);
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "loopback flush: out of memory for requests on queue %d", queue);
    r->queue = queue;
    /* Gets to other peers of the queue are copied too: completing more
     * than asked is within the contract and keeps one list per queue. */
    queue_ring(q);
    *req = r;
    return ENGRAM_OK;
}

static engram_status_t loopback_test(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    if (req == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "loopback test: req is NULL");
    return ENGRAM_OK;
}

static void loopback_request_free(engram_transport_t *t, engram_request_t *req)
{
    if (t == NULL || req == NULL)
        return;
    engram_free_list_put(&t->queues[req->queue].reqs, req);
}

static void loopback_describe(const engram_transport_t *t, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    snprintf(buf, len, "loopback: %d queues of %d held gets; %d ranks on this host map each other's segments "
             "read-only, gets are copied at the doorbell", t->nqueues, QUEUE_DEPTH, t->npeers);
}

static void loopback_close(engram_transport_t *t)
{
    if (t == NULL)
        return;
    while (t->regions != NULL) {
        engram_region_t *r = t->regions;
        t->regions = r->next;
        region_free(r);
    }
    queues_free(t);
    free(t);
}

const engram_transport_ops_t engram_loopback_ops = {
    .name = "loopback",
    .available = loopback_available,
    .open = loopback_open,
    .caps = loopback_caps,
    .reg_symmetric = loopback_reg_symmetric,
    .reg_local = loopback_reg_local,
    .dereg = loopback_dereg,
    .get = loopback_get,
    .flush = loopback_flush,
    .test = loopback_test,
    .request_free = loopback_request_free,
    .describe = loopback_describe,
    .close = loopback_close,
};
