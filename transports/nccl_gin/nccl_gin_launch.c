/* The nccl_gin fetch launcher (engram/plugin/gpu_launcher.h): a table's receive
 * region and this rank's shard become two NCCL windows (device memory, and
 * HOST_NUMA or device memory), with a dev comm of per_queue GIN contexts
 * per queue (nccl_gin_plan.h: enough that no context is asked for more
 * gets per peer than its queue holds); issue and wait launch the kernels
 * of nccl_gin_kernel.cu.
 *
 * Why not one window over engram/gpu's span (receive region + the node's
 * shards): the span maps the other local ranks' shards (and its own parts)
 * by importing them, and CUDA refuses to export an imported allocation
 * again (cuMemExportToShareableHandle: invalid argument), which NCCL's
 * node-local mapping of a window and the CUDA-IPC RMA plugin both need; a
 * NIC likewise reads only what its own rank registered. So every get reads
 * the shard window of the rank that holds the row, at the row's offset in
 * that rank's own shard (routing.h's engram_route_owner): in direct mode
 * that is the routed peer; in hybrid mode with one rank per node the rail
 * peer is that rank (RAIL connections); with several ranks per node the
 * owner is any rank of the other node, so the dev comm has FULL
 * connections and the get goes to the owner in the world team, one
 * one-sided operation as before. The engram layer still loads its own
 * node's rows through the node span. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "engram/log.h"
#include "engram/plugin/group.h"
#include "transports/nccl_gin/nccl_gin_depth.h"
#include "transports/nccl_gin/nccl_gin_internal.h"
#include "transports/nccl_gin/nccl_gin_kernel.h"
#include "transports/nccl_gin/nccl_gin_plan.h"

typedef struct slot_queues {
    int first, num;   /* the queues the slot's issue used */
    uint32_t batches; /* its blocks per queue: its requests */
} slot_queues_t;

struct engram_gpu_launch {
    engram_transport_t *t;
    engram_gpu_span_t span;
    ncclWindow_t recv_win, shard_win;
    void *devcomm;
    uint32_t contexts;           /* made by NCCL; asked for ENGRAM_NCCL_GIN_MAX_QUEUES * per_queue */
    uint32_t per_queue;          /* contexts each queue owns */
    uint32_t depth;              /* gets a context holds in flight per peer */
    uint32_t num_peers;          /* of the team: the group's ranks (RAIL: one per node) */
    engram_nccl_gin_req_t *reqs; /* device, [slots][ENGRAM_NCCL_GIN_MAX_QUEUES * per_queue][peers] */
    uint8_t *flushed;            /* device, same shape: the request is live */
    slot_queues_t *slots;
};

static engram_status_t cuda_error(const char *what, cudaError_t ce)
{
    return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "nccl_gin: %s: %s", what, cudaGetErrorString(ce));
}

static size_t per_slot(const engram_gpu_launch_t *l)
{
    return (size_t)ENGRAM_NCCL_GIN_MAX_QUEUES * l->per_queue * l->num_peers;
}

static engram_status_t check_span(const engram_gpu_launch_t *l, const engram_gpu_span_t *s)
{
    if (s == NULL || s->size < sizeof(*s) || s->recv == NULL || s->shard == NULL || s->num_slots < 1)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "nccl_gin: attach: span description missing or incomplete");
    if ((s->hybrid != 0) != l->t->hybrid)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "nccl_gin: attach: table is %s, the transport was opened %s",
                            s->hybrid ? "hybrid" : "direct", l->t->hybrid ? "hybrid" : "direct");
    if (l->num_peers > engram_nccl_gin_max_peers())
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "nccl_gin: %u peers exceed the kernel's %u", l->num_peers,
                            engram_nccl_gin_max_peers());
    return ENGRAM_OK;
}

static engram_status_t alloc_requests(engram_gpu_launch_t *l)
{
    size_t n = per_slot(l) * (size_t)l->span.num_slots;
    l->slots = calloc((size_t)l->span.num_slots, sizeof(*l->slots));
    if (l->slots == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "nccl_gin: out of memory for %d slots", l->span.num_slots);
    cudaError_t ce = cudaMalloc((void **)&l->reqs, n * sizeof(*l->reqs));
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&l->flushed, n);
    return ce == cudaSuccess ? ENGRAM_OK : cuda_error("allocating the flush requests", ce);
}

static void free_launch(engram_gpu_launch_t *l)
{
    if (l->devcomm != NULL)
        engram_nccl_gin_devcomm_destroy(l->t->comm, l->devcomm);
    if (l->shard_win != NULL)
        ncclCommWindowDeregister(l->t->comm, l->shard_win);
    if (l->recv_win != NULL)
        ncclCommWindowDeregister(l->t->comm, l->recv_win);
    cudaFree(l->flushed);
    cudaFree(l->reqs);
    free(l->slots);
    free(l);
}

/* Collective (NCCL's): one window; the status is this rank's. */
static engram_status_t register_window(engram_transport_t *t, void *addr, uint64_t bytes, const char *what,
                                       ncclWindow_t *out)
{
    ncclResult_t r = ncclCommWindowRegister(t->comm, addr, bytes, out, NCCL_WIN_DEFAULT);
    if (r != ncclSuccess) {
        char call[96];
        snprintf(call, sizeof(call), "ncclCommWindowRegister of the %s", what);
        return engram_nccl_gin_error(t->comm, call, r);
    }
    if (*out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "nccl_gin: NCCL made no window for the %s: this communicator "
                                                    "has no symmetric memory (it needs cuMem and CUDA P2P among a "
                                                    "node's ranks)",
                            what);
    return ENGRAM_OK;
}

static engram_status_t nccl_gin_attach(engram_transport_t *t, const engram_gpu_span_t *span,
                                       engram_gpu_launch_t **out)
{
    engram_gpu_launch_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return engram_group_agree_step(
            t->group, ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "nccl_gin: out of memory for a launcher"), "attach a table");
    l->t = t;
    l->num_peers = (uint32_t)t->size;
    l->depth = engram_nccl_gin_queue_depth(t->gin_type, t->queue_depth, getenv("NCCL_GIN_PROXY_QUEUE_SIZE"),
                                           getenv("NCCL_GIN_GDAKI_QP_DEPTH"));
    engram_status_t st = check_span(l, span);
    if (st == ENGRAM_OK) {
        l->span = *span;
        l->per_queue = engram_nccl_gin_per_queue(span->max_rows, ENGRAM_NCCL_GIN_MAX_QUEUES, l->depth);
        st = alloc_requests(l);
    }
    st = engram_group_agree_step(t->group, st, "attach a table");
    if (st != ENGRAM_OK)
        goto err_free;
    st = engram_group_agree_step(t->group,
                                 register_window(t, span->recv, span->recv_bytes, "receive region", &l->recv_win),
                                 "register its receive region");
    if (st != ENGRAM_OK)
        goto err_free;
    st = engram_group_agree_step(t->group, register_window(t, span->shard, span->shard_bytes, "shard", &l->shard_win),
                                 "register its shard");
    if (st != ENGRAM_OK)
        goto err_free;
    ENGRAM_INFO("nccl_gin: rank %d: windows registered: receive region %llu bytes, shard %llu bytes", t->rank,
                (unsigned long long)span->recv_bytes, (unsigned long long)span->shard_bytes);
    ncclResult_t r = (ncclResult_t)engram_nccl_gin_devcomm_create(
        t->comm, (int)(ENGRAM_NCCL_GIN_MAX_QUEUES * l->per_queue), t->rail, t->queue_depth, &l->devcomm,
        &l->contexts);
    if (r != ncclSuccess)
        st = engram_nccl_gin_error(t->comm, t->rail ? "ncclDevCommCreate (GIN, RAIL connections)"
                                                      : "ncclDevCommCreate (GIN, FULL connections)", r);
    else if (l->contexts == 0)
        st = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "nccl_gin: the dev comm has no GIN context");
    st = engram_group_agree_step(t->group, st, "create its GIN dev comm");
    if (st != ENGRAM_OK)
        goto err_free;
    ENGRAM_INFO("nccl_gin: rank %d: dev comm with %u GIN contexts (%u per queue for fetches of up to %u rows; "
                "a context holds %u gets per peer), %u peers",
                t->rank, l->contexts, l->per_queue, span->max_rows, l->depth, l->num_peers);
    *out = l;
    return ENGRAM_OK;

err_free:
    free_launch(l);
    return st;
}

static engram_status_t nccl_gin_issue(engram_gpu_launch_t *l, const engram_gpu_issue_t *f, void *stream)
{
    if (f == NULL || f->size < sizeof(*f) || f->slot < 0 || f->slot >= l->span.num_slots || f->num_queues < 1 ||
        f->first_queue < 0 || f->first_queue + f->num_queues > ENGRAM_NCCL_GIN_MAX_QUEUES)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "nccl_gin: issue: bad fetch description (slot %d, queues %d+%d)",
                            f ? f->slot : -1, f ? f->first_queue : -1, f ? f->num_queues : -1);
    const engram_transport_t *t = l->t;
    size_t at = per_slot(l) * (size_t)f->slot;
    uint32_t batches =
        engram_nccl_gin_batches(f->num_tokens, f->entries_per_token, (uint32_t)f->num_queues, l->depth, l->per_queue);
    engram_nccl_gin_issue_args_t a = {
        .shape = *f->shape,
        .indices = f->indices,
        .num_tokens = f->num_tokens,
        .entries_per_token = f->entries_per_token,
        .row_bytes = f->row_bytes,
        .flush_depth = f->flush_depth,
        .rows_off = f->rows_off,
        .rail = t->rail,
        .first_local_peer = f->first_local_peer,
        .local_peers = f->local_peers,
        .num_peers = l->num_peers,
        .contexts = l->contexts,
        .per_queue = l->per_queue,
        .batches = batches,
        .first_queue = f->first_queue,
        .num_queues = f->num_queues,
        .recv_win = l->recv_win,
        .shard_win = l->shard_win,
        .reqs = l->reqs + at,
        .flushed = l->flushed + at,
    };
    cudaError_t ce = (cudaError_t)engram_nccl_gin_issue_launch(l->devcomm, &a, stream);
    if (ce != cudaSuccess)
        return cuda_error("launching the issue kernel", ce);
    l->slots[f->slot] = (slot_queues_t){f->first_queue, f->num_queues, batches};
    return ENGRAM_OK;
}

static engram_status_t nccl_gin_wait(engram_gpu_launch_t *l, int slot, void *stream)
{
    if (slot < 0 || slot >= l->span.num_slots || l->slots[slot].num == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "nccl_gin: wait on slot %d, which has no issue", slot);
    size_t at = per_slot(l) * (size_t)slot;
    engram_nccl_gin_wait_args_t a = {
        .num_peers = l->num_peers,
        .contexts = l->contexts,
        .per_queue = l->per_queue,
        .batches = l->slots[slot].batches,
        .first_queue = l->slots[slot].first,
        .num_queues = l->slots[slot].num,
        .reqs = l->reqs + at,
        .flushed = l->flushed + at,
    };
    l->slots[slot].num = 0;
    cudaError_t ce = (cudaError_t)engram_nccl_gin_wait_launch(l->devcomm, &a, stream);
    return ce == cudaSuccess ? ENGRAM_OK : cuda_error("launching the wait kernel", ce);
}

static void nccl_gin_detach(engram_gpu_launch_t *l)
{
    if (l != NULL)
        free_launch(l);
}

const engram_gpu_launcher_ops_t engram_nccl_gin_launcher = {
    .attach = nccl_gin_attach,
    .issue = nccl_gin_issue,
    .wait = nccl_gin_wait,
    .detach = nccl_gin_detach,
};
