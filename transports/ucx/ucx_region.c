/* Registration: ucp_mem_map of local memory; for symmetric regions the
 * packed rkeys, base addresses and sizes go to every rank and are unpacked
 * once per (queue endpoint, peer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/log.h"
#include "transports/ucx/ucx_internal.h"

static engram_status_t region_map(engram_transport_t *t, void *addr, size_t bytes, bool remote_read,
                                  engram_region_t **out)
{
    engram_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx: out of memory for a region");
    ucp_mem_map_params_t params = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_PROT,
        .address = addr,
        .length = bytes,
        /* Symmetric memory is only read (possibly a read-only mapping of
         * node-mates' segments); destinations are only written. */
        .prot = remote_read ? UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_REMOTE_READ
                            : UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE,
    };
    ucs_status_t us = ucp_mem_map(t->ctx, &params, &r->memh);
    if (us != UCS_OK) {
        free(r);
        return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx: ucp_mem_map of %zu bytes at %p failed: %s", bytes, addr,
                            ucs_status_string(us));
    }
    r->local_base = addr;
    r->local_size = bytes;
    r->next = t->regions;
    t->regions = r;
    *out = r;
    return ENGRAM_OK;
}

engram_status_t engram_ucx_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    if (t == NULL || seg == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx reg_local: transport, segment and out must not be NULL");
    if (seg->kind != ENGRAM_MEM_HOST)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "ucx reg_local: memory kind %d is not host memory", seg->kind);
    return region_map(t, seg->addr, seg->size, false, out);
}

typedef struct ucx_extent {
    uint64_t base;
    uint64_t size;
} ucx_extent_t;

/* Every rank's packed rkey and base address; unpacked on each queue's
 * endpoint to the rank serving each peer. */
static engram_status_t region_exchange(engram_transport_t *t, engram_region_t *r)
{
    void *packed;
    size_t packed_len;
    ucs_status_t us = ucp_rkey_pack(t->ctx, r->memh, &packed, &packed_len);
    if (us != UCS_OK)
        return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx: ucp_rkey_pack failed: %s", ucs_status_string(us));
    char *rkeys;
    size_t stride, *lens;
    engram_status_t st = engram_ucx_allgather_blobs(t->group, packed, packed_len, &rkeys, &stride, &lens);
    ucp_rkey_buffer_release(packed);
    if (st != ENGRAM_OK)
        return st;
    ucx_extent_t mine = {.base = (uint64_t)(uintptr_t)r->local_base, .size = r->remote_size};
    ucx_extent_t *extents = malloc((size_t)t->size * sizeof(*extents));
    r->remote_base = calloc((size_t)r->npeers, sizeof(*r->remote_base));
    r->rkeys = calloc((size_t)t->nqueues * (size_t)r->npeers, sizeof(*r->rkeys));
    if (extents == NULL || r->remote_base == NULL || r->rkeys == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx: out of memory for %d peers' keys", r->npeers);
        goto free_blobs;
    }
    st = engram_group_allgather(t->group, &mine, extents, sizeof(mine));
    if (st != ENGRAM_OK)
        goto free_blobs;
    /* Bounds checks use one size for every peer, so all must agree. */
    for (int rank = 0; rank < t->size; rank++) {
        if (extents[rank].size != mine.size) {
            st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx reg_symmetric: rank %d registers %llu bytes, this rank "
                              "%llu; symmetric regions must be equal", rank,
                              (unsigned long long)extents[rank].size, (unsigned long long)mine.size);
            goto free_blobs;
        }
    }
    for (int p = 0; p < r->npeers; p++) {
        int rank = engram_ucx_peer_rank(t, r->span, p);
        r->remote_base[p] = extents[rank].base;
        for (int q = 0; q < t->nqueues; q++) {
            us = ucp_ep_rkey_unpack(t->queues[q].conns[rank].ep, rkeys + (size_t)rank * stride,
                                    &r->rkeys[(size_t)q * (size_t)r->npeers + (size_t)p]);
            if (us != UCS_OK) {
                st = ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx: unpacking rank %d's remote key on queue %d failed: "
                                  "%s", rank, q, ucs_status_string(us));
                goto free_blobs;
            }
        }
    }
free_blobs:
    free(extents);
    free(rkeys);
    free(lens);
    return st;
}

engram_status_t engram_ucx_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                         engram_region_t **out)
{
    if (t == NULL || seg == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx reg_symmetric: transport, segment and out must not be NULL");
    if (seg->kind != ENGRAM_MEM_HOST)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "ucx reg_symmetric: memory kind %d is not host memory",
                            seg->kind);
    if (span != t->span)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx reg_symmetric: span %s does not match the transport's mode "
                            "(%s); flush peers follow the mode",
                            span == ENGRAM_REG_NODE_SPAN ? "node" : "rank",
                            t->span == ENGRAM_REG_NODE_SPAN ? "hybrid" : "direct");
    engram_segment_span_t node_span = {0};
    void *addr = seg->addr;
    size_t bytes = seg->size;
    engram_status_t st;
    if (span == ENGRAM_REG_NODE_SPAN) {
        /* This rank is the rail rank through which other nodes reach its
         * node: it exposes all its node-mates' segments as one region. */
        st = engram_segment_span_map_node(t->group, seg, true, &node_span);
        if (st != ENGRAM_OK)
            return st;
        addr = node_span.base;
        bytes = node_span.stride * (size_t)node_span.count;
    }
    engram_region_t *r;
    st = region_map(t, addr, bytes, true, &r);
    if (st != ENGRAM_OK) {
        engram_segment_span_unmap(&node_span);
        return st;
    }
    r->symmetric = true;
    r->span = span;
    r->node_span = node_span;
    r->npeers = t->npeers;
    r->remote_size = bytes; /* checked equal on every rank by the exchange */
    st = region_exchange(t, r);
    if (st != ENGRAM_OK) {
        engram_ucx_dereg(t, r);
        return st;
    }
    *out = r;
    return ENGRAM_OK;
}

/* Before their endpoints' worker is destroyed. */
static void region_rkeys_destroy(engram_transport_t *t, engram_region_t *region)
{
    for (size_t i = 0; region->rkeys != NULL && i < (size_t)t->nqueues * (size_t)region->npeers; i++) {
        if (region->rkeys[i] != NULL)
            ucp_rkey_destroy(region->rkeys[i]);
        region->rkeys[i] = NULL;
    }
}

void engram_ucx_rkeys_destroy(engram_transport_t *t)
{
    for (engram_region_t *r = t->regions; r != NULL; r = r->next)
        region_rkeys_destroy(t, r);
}

/* Memory that peers read is freed by the caller after its dereg, so this
 * dereg is collective, as the registration was: past its barrier (which
 * keeps serving) no live peer has a get on the way. If a rank failed, or
 * the barrier does, live peers may still have gets on the way, which must
 * not be served from freed memory. */
static void symmetric_quiet(engram_transport_t *t)
{
    if (t->quiesced[0] != '\0')
        return;
    char why[160];
    int failed = engram_ucx_failed_peer(t);
    if (failed >= 0)
        snprintf(why, sizeof(why), "rank %d failed", failed);
    else if (engram_group_barrier(t->group) != ENGRAM_OK)
        snprintf(why, sizeof(why), "the barrier before deregistering failed (%s)", engram_last_error());
    else
        return;
    engram_ucx_quiesce(t, why);
}

void engram_ucx_dereg(engram_transport_t *t, engram_region_t *region)
{
    if (t == NULL || region == NULL)
        return;
    for (engram_region_t **link = &t->regions; *link != NULL; link = &(*link)->next) {
        if (*link == region) {
            *link = region->next;
            break;
        }
    }
    region_rkeys_destroy(t, region);
    free(region->rkeys);
    free(region->remote_base);
    if (region->symmetric)
        symmetric_quiet(t);
    ucp_mem_unmap(t->ctx, region->memh);
    engram_segment_span_unmap(&region->node_span);
    free(region);
}
