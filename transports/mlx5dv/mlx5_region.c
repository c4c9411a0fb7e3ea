/* Registration: a memory region per segment (per node span in hybrid
 * mode, where this rank is the rail rank its node is reached through);
 * symmetric regions publish address, length and rkey to every rank. */
#include <stdlib.h>
#include <string.h>

#include "engram/plugin/group.h"
#include "engram/log.h"
#include "transports/mlx5dv/mlx5_internal.h"

static engram_status_t region_new(engram_transport_t *t, void *addr, size_t len, bool remote_read,
                                  engram_region_t **out, uint32_t *rkey)
{
    engram_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv: out of memory for a region");
    engram_status_t st = t->rings->reg_mr(t->dev, addr, len, remote_read, &r->mr, &r->lkey, rkey);
    if (st != ENGRAM_OK) {
        free(r);
        return st;
    }
    r->local_base = addr;
    r->size = len;
    r->next = t->regions;
    t->regions = r;
    *out = r;
    return ENGRAM_OK;
}

engram_status_t engram_mlx5_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    if (t == NULL || seg == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv reg_local: transport, segment and out must not be NULL");
    if (seg->kind != ENGRAM_MEM_HOST)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "mlx5dv reg_local: memory kind %d is not host memory",
                            (int)seg->kind);
    if (seg->read_only)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv reg_local: a read-only segment cannot receive gets");
    uint32_t rkey;
    return region_new(t, seg->addr, seg->size, false, out, &rkey);
}

static engram_status_t check_symmetric(const engram_transport_t *t, const engram_segment_t *seg,
                                       engram_reg_span_t span)
{
    if (seg == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv reg_symmetric: segment is NULL");
    if (seg->kind != ENGRAM_MEM_HOST)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "mlx5dv reg_symmetric: memory kind %d is not host memory",
                            (int)seg->kind);
    if (span != t->shape.span)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv reg_symmetric: span %s does not match the transport's mode "
                            "(%s); QPs follow the mode", span == ENGRAM_REG_NODE_SPAN ? "node" : "rank",
                            t->shape.span == ENGRAM_REG_NODE_SPAN ? "hybrid" : "direct");
    return ENGRAM_OK;
}

/* This rank's registration of what peers read from it. */
static engram_status_t register_mine(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out,
                                     engram_mlx5_mr_info_t *info)
{
    engram_segment_span_t node_span = {0};
    void *addr = seg->addr;
    size_t len = seg->size;
    if (t->shape.span == ENGRAM_REG_NODE_SPAN) {
        engram_status_t st = engram_segment_span_map_node(t->group, seg, true, &node_span);
        if (st != ENGRAM_OK)
            return st;
        addr = node_span.base;
        len = node_span.stride * (size_t)node_span.count;
    }
    engram_region_t *r;
    engram_status_t st = region_new(t, addr, len, true, &r, &info->rkey);
    if (st != ENGRAM_OK) {
        engram_segment_span_unmap(&node_span);
        return st;
    }
    r->node_span = node_span;
    r->npeers = t->shape.npeers;
    info->addr = (uint64_t)(uintptr_t)addr;
    info->len = len;
    info->ok = 1;
    *out = r;
    return ENGRAM_OK;
}

static engram_status_t learn_peers(engram_transport_t *t, engram_region_t *r, const engram_mlx5_mr_info_t *all)
{
    for (int rank = 0; rank < t->shape.size; rank++) {
        if (!all[rank].ok)
            return ENGRAM_ERROR(ENGRAM_ERR_PEER, "mlx5dv reg_symmetric: rank %d could not register its memory", rank);
        if (all[rank].len != r->size)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv reg_symmetric: rank %d registers %llu bytes, this rank "
                                "%llu; symmetric regions must be equal", rank, (unsigned long long)all[rank].len,
                                (unsigned long long)r->size);
    }
    r->remote_addr = calloc((size_t)r->npeers, sizeof(*r->remote_addr));
    r->rkey = calloc((size_t)r->npeers, sizeof(*r->rkey));
    if (r->remote_addr == NULL || r->rkey == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv reg_symmetric: out of memory for %d peers' keys", r->npeers);
    for (int p = 0; p < r->npeers; p++) {
        const engram_mlx5_mr_info_t *info = &all[engram_transport_peer_rank(&t->shape, t->shape.span, p)];
        r->remote_addr[p] = info->addr;
        r->rkey[p] = info->rkey;
    }
    return ENGRAM_OK;
}

engram_status_t engram_mlx5_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                          engram_region_t **out)
{
    if (t == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv reg_symmetric: transport and out must not be NULL");
    engram_mlx5_mr_info_t mine = {0};
    engram_mlx5_mr_info_t *all = calloc((size_t)t->shape.size, sizeof(*all));
    if (all == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv reg_symmetric: out of memory for %d ranks", t->shape.size);
    engram_region_t *r = NULL;
    /* A rank with bad arguments still takes part in every exchange, so the
     * others fail at once instead of waiting for it. The node span is
     * itself collective, so it is only entered when every rank agrees. */
    engram_status_t st = engram_group_agree_step(t->group, check_symmetric(t, seg, span), "register a symmetric segment");
    if (st == ENGRAM_OK)
        st = register_mine(t, seg, &r, &mine);
    engram_status_t gathered = engram_group_allgather(t->group, &mine, all, sizeof(mine));
    if (st == ENGRAM_OK)
        st = gathered != ENGRAM_OK ? gathered : learn_peers(t, r, all);
    if (t->rings->attach_peers != NULL) {
        /* Collective too: entered only when every rank got this far. */
        st = engram_group_agree_step(t->group, st, "learn its peers' keys");
        if (st == ENGRAM_OK)
            st = t->rings->attach_peers(t->dev, t->group, seg, span, all, &r->peers);
    }
    st = engram_group_agree_step(t->group, st, "reach its peers' registrations");
    free(all);
    if (st != ENGRAM_OK) {
        if (r != NULL)
            engram_mlx5_dereg(t, r);
        return st;
    }
    *out = r;
    return ENGRAM_OK;
}

void engram_mlx5_dereg(engram_transport_t *t, engram_region_t *region)
{
    if (t == NULL || region == NULL)
        return;
    engram_region_t **link = &t->regions;
    while (*link != NULL && *link != region)
        link = &(*link)->next;
    if (*link == NULL) {
        ENGRAM_WARN("mlx5dv dereg: region %p is not registered with this transport", (void *)region);
        return;
    }
    *link = region->next;
    if (region->peers != NULL)
        t->rings->detach_peers(t->dev, region->peers);
    t->rings->dereg_mr(t->dev, region->mr);
    engram_segment_span_unmap(&region->node_span);
    free(region->remote_addr);
    free(region->rkey);
    free(region);
}
