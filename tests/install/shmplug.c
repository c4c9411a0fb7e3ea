/* shmplug: an out-of-tree transport for the ranks of one host, built against
 * the installed <engram/...> headers alone and linked against libengram.so.0
 * (tests/install/plugin_conformance_test.sh), so that the conformance tests
 * the in-tree transports pass run on a plugin exactly as a third party
 * builds one.
 *
 * Every rank's segment reaches the others through the library's services:
 * the fd exchange (engram_fd_allgather), imports by the segment's own ops,
 * and the node span for hybrid regions (engram_segment_span_map). A get is a
 * memcpy from the peer's mapping, done when it is issued, so a flush's
 * request is complete at once. Each collective step is agreed on with
 * engram_group_agree_step, so a rank that fails one is named to the others. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <engram/log.h>
#include <engram/plugin/plugin.h>

struct engram_transport {
    engram_group_t *group;
    engram_transport_shape_t shape;
    int nqueues;
};

struct engram_region {
    bool symmetric;
    engram_segment_t *seg;     /* this rank's segment */
    int npeers;                /* symmetric: the span's peers */
    const char **base;         /* symmetric: where peer p's memory is mapped here */
    engram_segment_t **imports; /* RANK span: peer p's imported segment (NULL for this rank's own) */
    engram_segment_span_t *spans; /* NODE_SPAN: node p's segments back to back */
    uint64_t bytes;            /* readable bytes per peer */
};

struct engram_request {
    int done;
};

enum { SHM_MAX_QUEUES = 8 };

static bool shm_available(engram_group_t *group, const char **why)
{
    const engram_group_hosts_t *hosts;
    if (engram_group_hosts(group, &hosts) != ENGRAM_OK) {
        *why = "shmplug: cannot tell where the ranks run";
        return false;
    }
    if (hosts->count != 1) {
        *why = "shmplug maps its peers' memory, so every rank must be on this host";
        return false;
    }
    return true;
}

static engram_status_t shm_open(engram_group_t *group, const engram_config_view_t *cfg, engram_transport_t **out)
{
    int64_t mode = ENGRAM_MODE_DIRECT, num_qps = 0;
    engram_status_t st = cfg->get_int(cfg, "mode", &mode);
    if (st == ENGRAM_OK)
        st = cfg->get_int(cfg, "num_qps", &num_qps);
    engram_transport_t *t = st == ENGRAM_OK ? calloc(1, sizeof(*t)) : NULL;
    if (st == ENGRAM_OK && t == NULL)
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "shmplug: out of memory");
    st = engram_group_agree_step(group, st, "open shmplug");
    if (st != ENGRAM_OK) {
        free(t);
        return st;
    }
    t->group = group;
    t->shape = engram_transport_shape_of(group, mode);
    t->nqueues = num_qps == 0 || num_qps > SHM_MAX_QUEUES ? SHM_MAX_QUEUES : (int)num_qps;
    *out = t;
    return ENGRAM_OK;
}

static void shm_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    caps->flags = ENGRAM_CAP_HOST_INITIATED | ENGRAM_CAP_HYBRID;
    caps->read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST);
    caps->write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST);
    caps->max_queues = t->nqueues;
    caps->max_outstanding = 0;
}

static void region_free(engram_region_t *r)
{
    for (int p = 0; r->imports != NULL && p < r->npeers; p++)
        if (r->imports[p] != NULL)
            r->imports[p]->ops->free(r->imports[p]);
    for (int p = 0; r->spans != NULL && p < r->npeers; p++)
        engram_segment_span_unmap(&r->spans[p]);
    free(r->imports);
    free(r->spans);
    free(r->base);
    free(r);
}

/* Maps every peer's segment (fds from the exchange) as the span says. */
static engram_status_t region_map(const engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                  const int *fds, engram_region_t *r)
{
    const engram_transport_shape_t *s = &t->shape;
    r->npeers = span == ENGRAM_REG_NODE_SPAN ? s->size / s->local_size : s->size;
    r->bytes = span == ENGRAM_REG_NODE_SPAN ? (uint64_t)seg->size * (uint64_t)s->local_size : seg->size;
    r->base = calloc((size_t)r->npeers, sizeof(*r->base));
    if (span == ENGRAM_REG_NODE_SPAN)
        r->spans = calloc((size_t)r->npeers, sizeof(*r->spans));
    else
        r->imports = calloc((size_t)r->npeers, sizeof(*r->imports));
    if (r->base == NULL || (r->spans == NULL && r->imports == NULL))
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "shmplug: out of memory for %d peers", r->npeers);
    for (int p = 0; p < r->npeers; p++) {
        engram_status_t st = ENGRAM_OK;
        if (span == ENGRAM_REG_NODE_SPAN) {
            st = engram_segment_span_map(seg->ops, fds + (size_t)p * (size_t)s->local_size, s->local_size,
                                         seg->size, true, &r->spans[p]);
            r->base[p] = r->spans[p].base;
        } else if (p == s->rank) {
            r->base[p] = seg->addr;
        } else {
            st = seg->ops->import_fd(fds[p], seg->size, true, NULL, &r->imports[p]);
            r->base[p] = st == ENGRAM_OK ? r->imports[p]->addr : NULL;
        }
        if (st != ENGRAM_OK)
            return st;
    }
    return ENGRAM_OK;
}

/* This rank's fd to share, or why it cannot take part. */
static engram_status_t segment_fd(engram_segment_t *seg, int *fd)
{
    if (seg == NULL || seg->kind != ENGRAM_MEM_HOST || seg->ops == NULL || seg->ops->export_fd == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "shmplug reg_symmetric: only exportable host segments");
    return seg->ops->export_fd(seg, fd);
}

static engram_status_t shm_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                         engram_region_t **out)
{
    int n = t->shape.size, fd = -1;
    uint64_t *sizes = calloc((size_t)n, sizeof(*sizes));
    int *fds = calloc((size_t)n, sizeof(*fds));
    engram_status_t st = sizes != NULL && fds != NULL ? segment_fd(seg, &fd)
                                                      : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "shmplug: out of memory");
    st = engram_group_agree_step(t->group, st, "export its segment");
    uint64_t mine = st == ENGRAM_OK ? seg->size : 0;
    if (st == ENGRAM_OK)
        st = engram_group_allgather(t->group, &mine, sizes, sizeof(mine));
    for (int p = 0; st == ENGRAM_OK && p < n; p++)
        if (sizes[p] != mine)
            st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "shmplug reg_symmetric: rank %d's segment has %llu bytes, this "
                              "rank's %llu; every rank must register the same size",
                              p, (unsigned long long)sizes[p], (unsigned long long)mine);
    if (st == ENGRAM_OK)
        st = engram_fd_allgather(t->group, fd, fds);
    if (st != ENGRAM_OK) {
        free(fds);
        free(sizes);
        return st;
    }
    engram_region_t *r = calloc(1, sizeof(*r));
    engram_status_t mapped = r != NULL ? region_map(t, seg, span, fds, r)
                                       : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "shmplug: out of memory");
    for (int p = 0; p < n; p++)
        if (fds[p] >= 0)
            close(fds[p]); /* the mappings keep the memory */
    free(fds);
    free(sizes);
    st = engram_group_agree_step(t->group, mapped, "map its peers' segments");
    if (st != ENGRAM_OK) {
        if (r != NULL)
            region_free(r);
        return st;
    }
    r->symmetric = true;
    r->seg = seg;
    *out = r;
    return ENGRAM_OK;
}

static engram_status_t shm_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    (void)t;
    if (seg == NULL || seg->kind != ENGRAM_MEM_HOST)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "shmplug reg_local: only host segments");
    engram_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "shmplug: out of memory");
    r->seg = seg;
    r->bytes = seg->size;
    *out = r;
    return ENGRAM_OK;
}

static void shm_dereg(engram_transport_t *t, engram_region_t *r)
{
    (void)t;
    if (r != NULL)
        region_free(r);
}

static engram_status_t shm_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                               uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                               unsigned flags)
{
    (void)flags;
    if (ENGRAM_DEBUG_CHECK(queue < 0 || queue >= t->nqueues || remote == NULL || local == NULL ||
                           !remote->symmetric || local->symmetric || peer < 0 || peer >= remote->npeers ||
                           !engram_range_inside(remote_off, len, remote->bytes) ||
                           !engram_range_inside(local_off, len, local->bytes))) {
        engram_status_t st = engram_get_args_status("shmplug", queue, t->nqueues, remote != NULL && local != NULL,
                                                    remote != NULL && remote->symmetric,
                                                    local != NULL && !local->symmetric, peer,
                                                    remote != NULL ? remote->npeers : 0);
        return st != ENGRAM_OK ? st
                               : engram_get_bounds_status("shmplug", remote_off, remote->bytes, local_off,
                                                          local->bytes, len);
    }
    memcpy((char *)local->seg->addr + local_off, remote->base[peer] + remote_off, len);
    return ENGRAM_OK;
}

static engram_status_t shm_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    (void)t;
    (void)queue;
    (void)peer;
    engram_request_t *r = malloc(sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "shmplug flush: out of memory");
    r->done = 1; /* every get was copied when it was issued */
    *req = r;
    return ENGRAM_OK;
}

static engram_status_t shm_test(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    return req->done ? ENGRAM_OK : ENGRAM_INPROGRESS;
}

static void shm_request_free(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    free(req);
}

static void shm_close(engram_transport_t *t)
{
    free(t);
}

static const engram_transport_ops_t shm_ops = {
    .name = "shmplug",
    .available = shm_available,
    .open = shm_open,
    .caps = shm_caps,
    .reg_symmetric = shm_reg_symmetric,
    .reg_local = shm_reg_local,
    .dereg = shm_dereg,
    .get = shm_get,
    .flush = shm_flush,
    .test = shm_test,
    .request_free = shm_request_free,
    .close = shm_close,
};

ENGRAM_TRANSPORT_PLUGIN(shm_ops);
