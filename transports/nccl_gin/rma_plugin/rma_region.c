/* Registrations (regMrSym): each rank describes its range as the cuMem
 * allocations mapped under it (a window may start inside one and span
 * several), exports each as a POSIX fd, and sends the description with the
 * fds to every peer, which maps them in one reserved range of its own and
 * gives its GPU access. Memory that cannot be exported (not cuMem, or
 * allocated without a shareable handle type: plain malloc'd bookkeeping,
 * NCCL's signal buffers) is registered all the same, as reachable by its
 * owner only: peers may still name it in signal updates, which its owner
 * applies (rma_region_apply_signal). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transports/nccl_gin/rma_plugin/rma_internal.h"

#define REG_MAX_SEGS 64

/* One rank's description of its registration, sent as one packet with its
 * fds. */
typedef struct reg_desc {
    int32_t ok;   /* 0: this rank failed before the exchange */
    int32_t nseg; /* 0: not shared */
    uint64_t size;
    uint64_t id;
    uint64_t first_offset; /* where the range starts in the first allocation */
    uint64_t seg_len[REG_MAX_SEGS];
} reg_desc_t;

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

/* Fills d->nseg, first_offset, seg_len and fds. nseg 0 when the range is
 * not made of exportable cuMem allocations; `why` then says which call
 * refused it. */
static void describe(char *addr, size_t size, reg_desc_t *d, int *fds, char *why, size_t why_len)
{
    char *pos = addr, *end = addr + size;
    const char *step = "";
    CUresult r = CUDA_SUCCESS;
    d->nseg = 0;
    while (pos < end) {
        CUdeviceptr base = 0;
        size_t len = 0;
        CUmemGenericAllocationHandle h;
        int fd = -1;
        step = "more physical allocations than this plugin maps";
        if (d->nseg == REG_MAX_SEGS)
            goto not_shared;
        step = "cuMemGetAddressRange";
        r = engram_cu.cuMemGetAddressRange(&base, &len, (CUdeviceptr)(uintptr_t)pos);
        if (r != CUDA_SUCCESS || len == 0)
            goto not_shared;
        /* Host-backed (HOST_NUMA) allocations report base 0 on some
         * drivers; then, as NCCL does, take pos as where the allocation
         * begins (a host range must start at an allocation). */
        if (base == 0)
            base = (CUdeviceptr)(uintptr_t)pos;
        step = "cuMemRetainAllocationHandle";
        r = engram_cu.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)base);
        if (r != CUDA_SUCCESS)
            goto not_shared;
        step = "cuMemExportToShareableHandle(POSIX fd)";
        r = engram_cu.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        engram_cu.cuMemRelease(h);
        if (r != CUDA_SUCCESS)
            goto not_shared;
        if (d->nseg == 0)
            d->first_offset = (uint64_t)((uintptr_t)pos - base);
        fds[d->nseg] = fd;
        d->seg_len[d->nseg++] = len;
        pos = (char *)(uintptr_t)(base + len);
    }
    return;
not_shared:
    snprintf(why, why_len, "%s at offset %zu: %s", step, (size_t)(pos - addr),
             r == CUDA_SUCCESS ? "refused" : engram_cu_str(r));
    close_fds(fds, d->nseg);
    d->nseg = 0;
}

static void view_release(rma_view_t *v)
{
    size_t off = 0;
    for (int i = 0; i < v->nseg; i++) {
        engram_cu.cuMemUnmap(v->va + off, v->seg_len[i]);
        engram_cu.cuMemRelease(v->handles[i]);
        off += v->seg_len[i];
    }
    if (v->va != 0)
        engram_cu.cuMemAddressFree(v->va, v->va_len);
    free(v->handles);
    free(v->seg_len);
    memset(v, 0, sizeof(*v));
}

/* CPU access to the host-memory allocations of a view, where the driver
 * grants it: the runtime may then touch them from either side in a copy.
 * Without it the GPU's access is enough. */
static void host_access(const rma_view_t *v)
{
    size_t off = 0;
    for (int i = 0; i < v->nseg; i++) {
        CUmemAllocationProp p;
        if (engram_cu.cuMemGetAllocationPropertiesFromHandle(&p, v->handles[i]) == CUDA_SUCCESS &&
            p.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
            CUmemAccessDesc cpu = {.location = p.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
            (void)engram_cu.cuMemSetAccess(v->va + off, v->seg_len[i], &cpu, 1);
        }
        off += v->seg_len[i];
    }
}

/* Maps a peer's exported allocations, back to back, and gives this GPU
 * read-write access to them. */
static rma_result_t view_import(rma_comm_t *c, int peer, const reg_desc_t *d, const int *fds, rma_view_t *v)
{
    v->size = d->size;
    v->id = d->id;
    if (d->nseg == 0)
        return RMA_SUCCESS;
    size_t total = 0;
    for (int i = 0; i < d->nseg; i++)
        total += d->seg_len[i];
    if (d->first_offset > total || d->size > total - d->first_offset) {
        RMA_WARN("rank %d's registration of %llu bytes does not fit its %zu mapped bytes", peer,
                 (unsigned long long)d->size, total);
        return RMA_ERR_REMOTE;
    }
    v->handles = calloc((size_t)d->nseg, sizeof(*v->handles));
    v->seg_len = calloc((size_t)d->nseg, sizeof(*v->seg_len));
    if (v->handles == NULL || v->seg_len == NULL)
        return RMA_ERR_SYSTEM;
    CUresult r = engram_cu.cuMemAddressReserve(&v->va, total, 0, 0, 0);
    if (r != CUDA_SUCCESS)
        goto cuda_failed;
    v->va_len = total;
    size_t off = 0;
    for (int i = 0; i < d->nseg; i++) {
        CUmemGenericAllocationHandle h;
        CUmemAllocationProp prop;
        r = engram_cu_import_fd(fds[i], &h, &prop);
        if (r != CUDA_SUCCESS)
            goto cuda_failed;
        r = engram_cu.cuMemMap(v->va + off, d->seg_len[i], 0, h, 0);
        if (r != CUDA_SUCCESS) {
            engram_cu.cuMemRelease(h);
            goto cuda_failed;
        }
        v->handles[v->nseg] = h;
        v->seg_len[v->nseg++] = d->seg_len[i];
        off += d->seg_len[i];
    }
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = c->cuda_dev},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = engram_cu.cuMemSetAccess(v->va, total, &access, 1);
    if (r != CUDA_SUCCESS)
        goto cuda_failed;
    host_access(v);
    v->base = (char *)(uintptr_t)(v->va + d->first_offset);
    return RMA_SUCCESS;
cuda_failed:
    RMA_WARN("mapping rank %d's registration on GPU %d: %s", peer, c->cuda_dev, engram_cu_str(r));
    return RMA_ERR_CUDA;
}

static void region_free(rma_region_t *g)
{
    if (g->views != NULL)
        for (int r = 0; r < g->comm->nranks; r++)
            view_release(&g->views[r]);
    free(g->views);
    free(g);
}

/* Receives every peer's description and maps what it shares; keeps going
 * after a failure so that every packet is consumed before the agreement. */
static bool import_all(rma_comm_t *c, rma_region_t *g)
{
    bool ok = true;
    for (int r = 0; r < c->nranks; r++) {
        if (r == c->rank)
            continue;
        reg_desc_t d;
        int fds[REG_MAX_SEGS];
        int nfds = 0;
        size_t len = 0;
        if (rma_mesh_recv(c, r, &d, sizeof(d), &len, fds, REG_MAX_SEGS, &nfds) != RMA_SUCCESS) {
            ok = false;
            continue;
        }
        if (len != sizeof(d) || d.nseg < 0 || d.nseg > REG_MAX_SEGS || nfds != d.nseg) {
            RMA_WARN("rank %d: malformed registration from rank %d", c->rank, r);
            ok = false;
        } else if (!d.ok) {
            ok = false; /* rank r said why */
        } else if (ok && g != NULL && view_import(c, r, &d, fds, &g->views[r]) != RMA_SUCCESS) {
            ok = false;
        }
        close_fds(fds, nfds);
    }
    return ok;
}

rma_result_t rma_region_register(rma_comm_t *c, void *data, size_t size, int type, void **mhandle)
{
    rma_result_t res = rma_use_device(c);
    bool ok = res == RMA_SUCCESS;
    if (type != RMA_PTR_HOST && type != RMA_PTR_CUDA) {
        RMA_WARN("regMrSym: unknown pointer type %d", type);
        ok = false;
        res = RMA_ERR_ARGUMENT;
    }
    if (mhandle == NULL || (data == NULL && size > 0)) {
        RMA_WARN("regMrSym: NULL %s", mhandle == NULL ? "mhandle" : "data");
        ok = false;
        res = RMA_ERR_ARGUMENT;
    }
    rma_region_t *g = calloc(1, sizeof(*g));
    if (g != NULL) {
        g->comm = c;
        g->views = calloc((size_t)c->nranks, sizeof(*g->views));
    }
    if (g == NULL || g->views == NULL) {
        ok = false;
        res = RMA_ERR_SYSTEM;
    }
    reg_desc_t mine;
    int fds[REG_MAX_SEGS];
    char why[160] = "empty";
    memset(&mine, 0, sizeof(mine));
    if (ok) {
        pthread_mutex_lock(&c->lock);
        mine.id = ++c->next_region_id;
        pthread_mutex_unlock(&c->lock);
        describe(data, size, &mine, fds, why, sizeof(why));
    }
    mine.ok = ok;
    mine.size = size;
    /* Every rank takes part even after a local failure, so none waits. */
    bool sent = rma_mesh_send_all(c, &mine, sizeof(mine), fds, mine.nseg) == RMA_SUCCESS;
    close_fds(fds, mine.nseg);
    ok = import_all(c, ok && sent ? g : NULL) && ok && sent;
    if (!rma_mesh_agree(c, ok)) {
        if (g != NULL)
            region_free(g);
        return res != RMA_SUCCESS ? res : RMA_ERR_REMOTE;
    }
    g->id = mine.id;
    g->addr = data;
    g->size = size;
    g->views[c->rank].base = data;
    g->views[c->rank].size = size;
    g->views[c->rank].id = mine.id;
    CUmemorytype mt;
    g->cpu_signal = size > 0 && engram_cu.cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                             (CUdeviceptr)(uintptr_t)data) != CUDA_SUCCESS;
    pthread_mutex_lock(&c->lock);
    g->next = c->regions;
    c->regions = g;
    pthread_mutex_unlock(&c->lock);
    RMA_INFO("rank %d registered %zu bytes at %p (%s, %s%s)", c->rank, size, data,
             type == RMA_PTR_CUDA ? "cuda" : "host", mine.nseg > 0 ? "shared" : "owner only: ",
             mine.nseg > 0 ? "" : why);
    *mhandle = g;
    return RMA_SUCCESS;
}

rma_result_t rma_region_deregister(rma_comm_t *c, void *mhandle)
{
    pthread_mutex_lock(&c->lock);
    rma_region_t **p = &c->regions;
    while (*p != NULL && *p != mhandle)
        p = &(*p)->next;
    rma_region_t *g = *p;
    if (g != NULL)
        *p = g->next;
    pthread_mutex_unlock(&c->lock);
    if (g == NULL) {
        RMA_WARN("deregMrSym: %p is not a registration of this communicator", mhandle);
        return RMA_ERR_ARGUMENT;
    }
    rma_result_t res = rma_use_device(c);
    if (res == RMA_SUCCESS)
        res = rma_ops_quiesce(c); /* no copy may still use a mapping */
    region_free(g);
    return res;
}

rma_result_t rma_region_apply_signal(rma_comm_t *c, const rma_signal_msg_t *m)
{
    rma_result_t res = RMA_ERR_ARGUMENT;
    /* Held across the launch: deregistration waits for it. */
    pthread_mutex_lock(&c->lock);
    rma_region_t *g = c->regions;
    while (g != NULL && g->id != m->region_id)
        g = g->next;
    if (g == NULL) {
        RMA_WARN("rank %d: signal update for registration %llu, which is not (or no longer) registered", c->rank,
                 (unsigned long long)m->region_id);
    } else if (m->offset % sizeof(uint64_t) != 0 || g->size < sizeof(uint64_t) ||
               m->offset > g->size - sizeof(uint64_t)) {
        RMA_WARN("rank %d: signal offset %llu outside the %zu-byte registration", c->rank,
                 (unsigned long long)m->offset, g->size);
    } else {
        uint64_t *p = (uint64_t *)(void *)(g->addr + m->offset);
        if (g->cpu_signal) {
            __atomic_fetch_add(p, m->value, __ATOMIC_SEQ_CST);
            res = RMA_SUCCESS;
        } else {
            res = rma_use_device(c);
            if (res == RMA_SUCCESS)
                res = rma_signal_kernel_add(c, p, m->value);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return res;
}
