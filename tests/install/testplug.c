/* testplug: the worked example of docs/ADDING_A_TRANSPORT.md, built by the
 * tests as libengram_transport_testplug.so (in the tree by
 * //hal:libengram_transport_testplug.so, out of it against an installed
 * prefix by tests/install/plugin_test.sh).
 *
 * A real transport for a group of one rank: peer 0 is this process, and a
 * get is a memcpy from the symmetric region into the local one. It keeps the
 * whole contract a NIC would: per-queue submission, gets flagged AGGREGATE
 * are held back until a doorbell (the next get without the flag, or a
 * flush), bounds checks on both regions, and a flush request that completes
 * only after a second test() so callers that do not loop on test() are
 * caught. describe() reports what it did so tests can see the flag honoured. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <engram/log.h>
#include <engram/plugin/plugin.h>

enum { TP_MAX_QUEUES = 4, TP_MAX_PENDING = 64 };

typedef struct tp_copy {
    const char *src;
    char *dst;
    size_t len;
} tp_copy_t;

struct engram_transport {
    engram_group_t *group;
    int nqueues;
    tp_copy_t pending[TP_MAX_QUEUES][TP_MAX_PENDING]; /* held back by AGGREGATE */
    int npending[TP_MAX_QUEUES];
    unsigned long long gets, doorbells, flushes;
};

struct engram_region {
    engram_segment_t *seg;
    bool symmetric; /* gets read from symmetric regions, write into local ones */
};

struct engram_request {
    int tests_left; /* test() calls until it reports done */
};

static bool tp_available(engram_group_t *group, const char **why)
{
    if (engram_group_size(group) != 1) {
        *why = "testplug copies within one process; the group has more than one rank";
        return false;
    }
    return true;
}

/* testplug's own key: set as ENGRAM_TESTPLUG_QUEUES, `testplug_queues = 2`
 * in the file, or engram_config_set; read at open through the view. */
static const engram_config_key_decl_t tp_keys[] = {
    {"testplug_queues", ENGRAM_CONFIG_INT, "4", "1..4" /* TP_MAX_QUEUES */, "queues testplug offers (num_qps may take fewer)"},
};

static engram_status_t tp_open(engram_group_t *group, const engram_config_view_t *cfg, engram_transport_t **out)
{
    if (engram_group_size(group) != 1)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "testplug: group of %d ranks; it serves exactly one",
                            engram_group_size(group));
    int64_t num_qps, queues;
    engram_status_t st = cfg->get_int(cfg, "num_qps", &num_qps);
    if (st == ENGRAM_OK)
        st = cfg->get_int(cfg, "testplug_queues", &queues);
    if (st != ENGRAM_OK)
        return st;
    engram_transport_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "testplug: out of memory");
    t->group = group;
    t->nqueues = num_qps == 0 || num_qps > queues ? (int)queues : (int)num_qps;
    *out = t;
    return ENGRAM_OK;
}

static void tp_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    caps->flags = ENGRAM_CAP_HOST_INITIATED;
    caps->read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST);
    caps->write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST);
    caps->max_queues = t->nqueues;
    caps->max_outstanding = TP_MAX_PENDING;
}

static engram_status_t tp_region_new(engram_segment_t *seg, bool symmetric, engram_region_t **out)
{
    if (seg == NULL || seg->kind != ENGRAM_MEM_HOST)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "testplug: only host segments can be registered");
    engram_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "testplug: out of memory");
    r->seg = seg;
    r->symmetric = symmetric;
    *out = r;
    return ENGRAM_OK;
}

static engram_status_t tp_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                        engram_region_t **out)
{
    /* Without ENGRAM_CAP_HYBRID the engram layer never asks for NODE_SPAN. */
    engram_region_t *r = NULL;
    engram_status_t st = span != ENGRAM_REG_RANK ? ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                                                                "testplug: span %d needs ENGRAM_CAP_HYBRID", (int)span)
                                                 : tp_region_new(seg, true, &r);
    /* Collective: the group's agreement service tells every rank whether
     * every rank registered, naming the one that did not. */
    st = engram_group_agree_step(t->group, st, "register its segment");
    if (st != ENGRAM_OK) {
        free(r);
        return st;
    }
    *out = r;
    return ENGRAM_OK;
}

static engram_status_t tp_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    (void)t;
    return tp_region_new(seg, false, out);
}

static void tp_dereg(engram_transport_t *t, engram_region_t *region)
{
    (void)t;
    free(region);
}

static void tp_doorbell(engram_transport_t *t, int queue)
{
    for (int i = 0; i < t->npending[queue]; i++)
        memcpy(t->pending[queue][i].dst, t->pending[queue][i].src, t->pending[queue][i].len);
    t->npending[queue] = 0;
    t->doorbells++;
}

static bool tp_in_bounds(const engram_region_t *r, uint64_t off, size_t len)
{
    return off <= r->seg->size && len <= r->seg->size - off;
}

static engram_status_t tp_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                              uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                              unsigned flags)
{
    if (queue < 0 || queue >= t->nqueues || peer != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "testplug: get on queue %d peer %d; has %d queues and peer 0",
                            queue, peer, t->nqueues);
    if (remote == NULL || !remote->symmetric || local == NULL || local->symmetric)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "testplug: get needs a symmetric remote and a local region");
    if (!tp_in_bounds(remote, remote_off, len) || !tp_in_bounds(local, local_off, len))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                            "testplug: get of %zu bytes at remote %llu / local %llu exceeds the regions (%zu / %zu)",
                            len, (unsigned long long)remote_off, (unsigned long long)local_off, remote->seg->size,
                            local->seg->size);
    /* A full queue rings the doorbell, as a NIC's send queue would. */
    if (t->npending[queue] == TP_MAX_PENDING)
        tp_doorbell(t, queue);
    t->pending[queue][t->npending[queue]++] = (tp_copy_t){(const char *)remote->seg->addr + remote_off,
                                                          (char *)local->seg->addr + local_off, len};
    t->gets++;
    if (!(flags & ENGRAM_GET_AGGREGATE))
        tp_doorbell(t, queue);
    return ENGRAM_OK;
}

static engram_status_t tp_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    if (queue < 0 || queue >= t->nqueues || peer != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "testplug: flush on queue %d peer %d; has %d queues and peer 0",
                            queue, peer, t->nqueues);
    engram_request_t *r = malloc(sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "testplug: out of memory");
    r->tests_left = 2;
    if (t->npending[queue] > 0)
        tp_doorbell(t, queue);
    t->flushes++;
    *req = r;
    return ENGRAM_OK;
}

static engram_status_t tp_test(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    return --req->tests_left > 0 ? ENGRAM_INPROGRESS : ENGRAM_OK;
}

static void tp_request_free(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    free(req);
}

static void tp_describe(const engram_transport_t *t, char *buf, size_t len)
{
    snprintf(buf, len, "testplug: %d queues, %llu gets, %llu doorbells, %llu flushes", t->nqueues, t->gets,
             t->doorbells, t->flushes);
}

static void tp_close(engram_transport_t *t)
{
    free(t);
}

static const engram_transport_ops_t tp_ops = {
    .name = "testplug",
    .available = tp_available,
    .open = tp_open,
    .caps = tp_caps,
    .reg_symmetric = tp_reg_symmetric,
    .reg_local = tp_reg_local,
    .dereg = tp_dereg,
    .get = tp_get,
    .flush = tp_flush,
    .test = tp_test,
    .request_free = tp_request_free,
    .describe = tp_describe,
    .close = tp_close,
    .config_keys = tp_keys,
    .num_config_keys = sizeof(tp_keys) / sizeof(tp_keys[0]),
};

/* The one symbol the loader looks for; everything else stays hidden. */
ENGRAM_TRANSPORT_PLUGIN(tp_ops);
