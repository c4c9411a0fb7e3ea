/* Registration: ucp_mem_map of local memory, or of memory UCX allocates
 * (alloc_symmetric); for symmetric regions the packed rkeys, base
 * addresses and sizes go to every rank and are unpacked once per (queue
 * endpoint, peer), or once per peer where UCX maps the peer's memory here
 * (ucp_rkey_ptr), which gets then read directly. */
#include <errno.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engram/log.h"
#include "transports/ucx/ucx_internal.h"

/* A region on the transport's list (so close frees leftovers); its memory
 * is mapped by region_map. */
static engram_status_t region_new(engram_transport_t *t, engram_region_t **out)
{
    engram_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx: out of memory for a region");
    r->next = t->regions;
    t->regions = r;
    *out = r;
    return ENGRAM_OK;
}

/* ucp_mem_map of `bytes` at addr, or of `bytes` UCX allocates (addr NULL). */
static engram_status_t region_map(engram_transport_t *t, engram_region_t *r, void *addr, size_t bytes,
                                  bool remote_read)
{
    ucp_mem_map_params_t params = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_PROT | UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        .address = addr,
        .length = bytes,
        /* Symmetric memory is only read by peers (possibly a read-only
         * mapping of node-mates' segments; UCX's own memory is written
         * here); destinations are only written. */
        .prot = remote_read ? UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_REMOTE_READ |
                                  (addr == NULL ? UCP_MEM_MAP_PROT_LOCAL_WRITE : 0)
                            : UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE,
        .flags = addr == NULL ? UCP_MEM_MAP_ALLOCATE : 0,
    };
    ucs_status_t us = ucp_mem_map(t->ctx, &params, &r->memh);
    if (us != UCS_OK) {
        r->memh = NULL;
        return ENGRAM_ERROR(addr == NULL ? ENGRAM_ERR_NOMEM : ENGRAM_ERR_TRANSPORT,
                            "ucx: ucp_mem_map %s %zu bytes failed: %s", addr == NULL ? "allocating" : "of", bytes,
                            ucs_status_string(us));
    }
    if (addr == NULL) {
        ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};
        us = ucp_mem_query(r->memh, &attr);
        if (us != UCS_OK)
            return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx: ucp_mem_query of allocated memory failed: %s",
                                ucs_status_string(us));
        addr = attr.address;
        r->allocated = true;
    }
    r->local_base = addr;
    r->local_size = bytes;
    return ENGRAM_OK;
}

engram_status_t engram_ucx_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    if (t == NULL || seg == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx reg_local: transport, segment and out must not be NULL");
    if (seg->kind != ENGRAM_MEM_HOST)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "ucx reg_local: memory kind %d is not host memory", seg->kind);
    engram_region_t *r = NULL;
    engram_status_t st = region_new(t, &r);
    if (st != ENGRAM_OK)
        return st;
    st = region_map(t, r, seg->addr, seg->size, false);
    if (st != ENGRAM_OK) {
        engram_ucx_dereg(t, r);
        return st;
    }
    *out = r;
    return ENGRAM_OK;
}

typedef struct ucx_extent {
    uint64_t base;
    uint64_t size;
} ucx_extent_t;

/* A peer's region as UCX mapped it here (read-write): its pages mapped
 * now, as a NIC registration would, instead of faulted in on the get path
 * (advice only); then read-only, as loopback imports segments: a rank
 * never writes a peer's table. */
static void direct_prepare(int rank, char *ptr, size_t bytes)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)ptr & ~(page - 1);
    size_t len = (uintptr_t)ptr + bytes - start;
    (void)madvise((void *)start, len, MADV_POPULATE_READ);
    if (mprotect((void *)start, len, PROT_READ) != 0)
        ENGRAM_WARN("ucx: rank %d's memory stays mapped writable here: mprotect failed (%s)", rank,
                    strerror(errno));
}

/* Peer p's key, unpacked on queue 0's endpoint first: if UCX can map the
 * peer's memory here, that mapping is what gets read and the other
 * queues need no key; otherwise every queue gets its own. */
static engram_status_t region_unpack(engram_transport_t *t, engram_region_t *r, int p, const void *blob)
{
    int rank = engram_transport_peer_rank(&t->shape, r->span, p);
    if (rank == t->shape.rank) {
        r->direct[p] = r->local_base;
        return ENGRAM_OK;
    }
    for (int q = 0; q < t->nqueues; q++) {
        ucp_rkey_h *rkey = &r->rkeys[(size_t)q * (size_t)r->npeers + (size_t)p];
        ucs_status_t us = ucp_ep_rkey_unpack(t->queues[q].conns[rank].ep, blob, rkey);
        if (us != UCS_OK) {
            *rkey = NULL;
            return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx: unpacking rank %d's remote key on queue %d failed: %s",
                                rank, q, ucs_status_string(us));
        }
        void *ptr;
        if (q == 0 && ucp_rkey_ptr(*rkey, r->remote_base[p], &ptr) == UCS_OK) {
            r->direct[p] = ptr;
            direct_prepare(rank, ptr, r->remote_size);
            return ENGRAM_OK;
        }
    }
    return ENGRAM_OK;
}

/* Every rank's packed rkey, then (once every rank's mapping, local here,
 * is agreed on) its base address and size; then the keys unpacked for each
 * peer, agreed on as well, so a failure anywhere fails every rank alike.
 * *every_direct: every rank reads every peer through a mapping. */
static engram_status_t region_exchange(engram_transport_t *t, engram_region_t *r, engram_status_t local,
                                       bool *every_direct)
{
    void *packed = NULL;
    size_t packed_len = 0;
    if (local == ENGRAM_OK) {
        ucs_status_t us = ucp_rkey_pack(t->ctx, r->memh, &packed, &packed_len);
        if (us != UCS_OK)
            local = ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx: ucp_rkey_pack failed: %s", ucs_status_string(us));
    }
    char *rkeys;
    size_t stride, *lens;
    engram_status_t st = engram_ucx_allgather_blobs(t->group, packed != NULL ? packed : "", packed_len, &rkeys,
                                                    &stride, &lens);
    if (packed != NULL)
        ucp_rkey_buffer_release(packed);
    if (st != ENGRAM_OK)
        return st;
    ucx_extent_t *extents = calloc((size_t)t->shape.size, sizeof(*extents));
    int32_t *directs = calloc((size_t)t->shape.size, sizeof(*directs));
    r->remote_base = calloc((size_t)r->npeers, sizeof(*r->remote_base));
    r->rkeys = calloc((size_t)t->nqueues * (size_t)r->npeers, sizeof(*r->rkeys));
    r->direct = calloc((size_t)r->npeers, sizeof(*r->direct));
    if (local == ENGRAM_OK && (extents == NULL || directs == NULL || r->remote_base == NULL || r->rkeys == NULL ||
                               r->direct == NULL))
        local = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx: out of memory for %d peers' keys", t->shape.size);
    st = engram_group_agree_step(t->group, local, "map its symmetric region");
    if (st != ENGRAM_OK)
        goto free_blobs;
    ucx_extent_t mine = {.base = (uint64_t)(uintptr_t)r->local_base, .size = r->remote_size};
    st = engram_group_allgather(t->group, &mine, extents, sizeof(mine));
    if (st != ENGRAM_OK)
        goto free_blobs;
    /* Bounds checks use one size for every peer, so all must agree. */
    for (int rank = 0; rank < t->shape.size; rank++) {
        if (extents[rank].size != mine.size) {
            st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx: rank %d's symmetric region has %llu bytes, this rank's "
                              "%llu; symmetric regions must be equal", rank,
                              (unsigned long long)extents[rank].size, (unsigned long long)mine.size);
            goto free_blobs;
        }
    }
    engram_status_t unpacked = ENGRAM_OK;
    int32_t direct = 1; /* this rank reads every peer through a mapping */
    for (int p = 0; p < r->npeers && unpacked == ENGRAM_OK; p++) {
        int rank = engram_transport_peer_rank(&t->shape, r->span, p);
        r->remote_base[p] = extents[rank].base;
        unpacked = region_unpack(t, r, p, rkeys + (size_t)rank * stride);
        direct &= r->direct[p] != NULL;
    }
    st = engram_group_agree_step(t->group, unpacked, "unpack its peers' keys");
    if (st == ENGRAM_OK)
        st = engram_group_allgather(t->group, &direct, directs, sizeof(direct));
    *every_direct = true;
    for (int rank = 0; st == ENGRAM_OK && rank < t->shape.size; rank++)
        *every_direct &= directs[rank] != 0;
free_blobs:
    free(directs);
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
    if (span != t->shape.span)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx reg_symmetric: span %s does not match the transport's mode "
                            "(%s); flush peers follow the mode",
                            span == ENGRAM_REG_NODE_SPAN ? "node" : "rank",
                            t->shape.span == ENGRAM_REG_NODE_SPAN ? "hybrid" : "direct");
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
    engram_region_t *r = NULL;
    st = region_new(t, &r);
    if (st != ENGRAM_OK) {
        engram_segment_span_unmap(&node_span);
        return st;
    }
    r->symmetric = true;
    r->span = span;
    r->node_span = node_span;
    r->npeers = t->shape.npeers;
    r->remote_size = bytes; /* checked equal on every rank by the exchange */
    bool every_direct;
    st = region_exchange(t, r, region_map(t, r, addr, bytes, true), &every_direct);
    if (st != ENGRAM_OK) {
        engram_ucx_dereg(t, r);
        return st;
    }
    *out = r;
    return ENGRAM_OK;
}

/* Where the caller asked for a node: the policy of the (shared) memory
 * object, before its first touch. Default: the first touch, by this
 * thread. */
static void place_on_node(void *addr, size_t bytes, int node)
{
    enum { MAX_NODES = 1024 };
    if (node < 0)
        return;
    unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))] = {0};
    if (node < MAX_NODES)
        mask[(size_t)node / (8 * sizeof(unsigned long))] |= 1ul << ((size_t)node % (8 * sizeof(unsigned long)));
    if (node >= MAX_NODES || syscall(SYS_mbind, addr, bytes, MPOL_PREFERRED, mask, MAX_NODES + 1, 0) != 0)
        ENGRAM_WARN("ucx: placing %zu bytes of symmetric memory on NUMA node %d failed (%s); default placement",
                    bytes, node, node >= MAX_NODES ? "node out of range" : strerror(errno));
}

engram_status_t engram_ucx_alloc_symmetric(engram_transport_t *t, const engram_segment_params_t *params,
                                           engram_reg_span_t span, engram_region_t **out, void **addr,
                                           uint32_t *region_flags)
{
    if (t == NULL || params == NULL || params->size < sizeof(*params) || out == NULL || addr == NULL ||
        region_flags == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx alloc_symmetric: transport, params (of this header's size), "
                            "out, addr and region_flags must be given");
    if (span != ENGRAM_REG_RANK || t->shape.span != ENGRAM_REG_RANK)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "ucx alloc_symmetric: direct mode only (a node span is the "
                            "node's host segments, mapped by fd: reg_symmetric)");
    if (params->huge == ENGRAM_HUGE_ON)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "ucx alloc_symmetric: huge_pages=on, and UCX does not promise "
                            "huge pages for memory it allocates");
    engram_region_t *r = NULL;
    engram_status_t st = region_new(t, &r);
    if (st != ENGRAM_OK)
        return st;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = params->bytes / page * page + (params->bytes % page ? page : 0);
    engram_status_t local = params->bytes == 0 ? ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx alloc_symmetric: 0 bytes")
                                               : region_map(t, r, NULL, bytes, true);
    if (local == ENGRAM_OK) {
        place_on_node(r->local_base, bytes, params->numa_node);
        memset(r->local_base, 0, bytes); /* first touch here, before peers map it */
    }
    r->symmetric = true;
    r->span = span;
    r->npeers = t->shape.npeers;
    r->remote_size = bytes;
    bool every_direct;
    st = region_exchange(t, r, local, &every_direct);
    if (st != ENGRAM_OK) {
        engram_ucx_dereg(t, r);
        return st;
    }
    *region_flags = t->target_progress && !every_direct ? ENGRAM_REGION_OWNER_PROGRESS : 0;
    *addr = r->local_base;
    *out = r;
    return ENGRAM_OK;
}

/* Before their endpoints' worker is destroyed. */
static void region_rkeys_destroy(engram_transport_t *t, engram_region_t *region)
{
    /* the direct mappings go with the keys */
    free(region->direct);
    region->direct = NULL;
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
    /* Held gets may read or write it (or read through its mappings). */
    engram_ucx_ring_all(t);
    region_rkeys_destroy(t, region);
    free(region->rkeys);
    free(region->remote_base);
    if (region->symmetric)
        symmetric_quiet(t);
    if (region->memh != NULL)
        ucp_mem_unmap(t->ctx, region->memh);
    engram_segment_span_unmap(&region->node_span);
    free(region);
}
