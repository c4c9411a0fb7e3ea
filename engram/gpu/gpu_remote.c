/* The remote path (fetch_path.h), GPU tables on more than one node
 * without a fetch launcher: rows owned by other nodes travel
 * through the context's host-initiated transport (whichever it is) into a
 * host staging region, then onto the GPU receive slot.
 *
 * The transports read and write host (memfd) memory only, so each rank
 * keeps, next to its CUDA shard, a host mirror of it (written with it,
 * registered symmetrically like a host table's shard: per rank, or per node
 * span in hybrid mode; the shard's memory in host RAM is thus held twice),
 * and a staging region [slots][max rows][row_bytes] registered as the
 * transport's local destination and pinned and mapped for the GPU.
 *
 * One fetch (engram_fetch_on_stream):
 *   1. the indices are copied back into pinned host memory on the caller's
 *      stream (issue), and the local path's kernel is queued right behind
 *      the copy (it handles this node's rows and the bad indices, skipping
 *      the others);
 *   2. the host waits for that copy: fetch_on_stream returns only after the
 *      work queued earlier on the stream has run, plus one device-to-host
 *      copy of 8 bytes per row -- the cost of routing on the host;
 *   3. (issue_host) the host routes every row (engram/plugin/routing.h) and issues
 *      one get per row of another node into the slot's staging, compacted,
 *      with the host fetch's flush policy (engram_fetch_get_row,
 *      engram_fetch_flush);
 *   4. (progress) when engram_test/engram_wait sees the flushes complete, a
 *      scatter kernel is queued on the same stream and the fetch's event
 *      recorded behind it: the rows are complete for the host when wait
 *      returns, and for work the caller queues on the stream after wait. */
#include <stdlib.h>
#include <time.h>

#include "engram/gpu/gpu_host_gather.h"
#include "engram/gpu/gpu_sync.h"
#include "engram/gpu/gpu_state.h"
#include "engram/plugin/deadline.h"
#include "hal/log.h"
#include "memory/host_segment.h"

typedef struct remote_slot {
    void *stream;         /* the fetch's stream, for the scatter */
    uint32_t staged;      /* rows of other nodes staged for this fetch */
    uint32_t placed;      /* scatter entries: staged rows, then repeats under dedup */
    bool deduped;         /* entries read src (repeats name their first's staged row) */
    bool scatter_pending; /* staged rows not yet queued for the scatter */
} remote_slot_t;

typedef struct engram_gpu_remote {
    engram_segment_t *mirror;  /* host copy of this rank's shard: what peers' transports read */
    engram_segment_t *staging; /* [slots][max rows][row_bytes]: where the gets land */
    bool staging_pinned;       /* cudaHostRegister'ed (mapped) */
    const char *staging_dev;   /* the staging's address on the GPU */
    int64_t *indices;          /* pinned [slots][max rows]: each fetch's indices, copied back */
    uint32_t *dst_row;         /* pinned, mapped [slots][max rows]: receive row of each staged row */
    const uint32_t *dst_row_dev;
    /* dedup (NULL when off): pinned, mapped [slots][max rows], the staged
     * row each scatter entry reads; and [slots][max rows] each first's
     * staged row, by receive row */
    uint32_t *src, *stage_of;
    const uint32_t *src_dev;
    cudaEvent_t *copied;       /* [slots]: the indices' copy is done */
    remote_slot_t *slots;
} engram_gpu_remote_t;

static engram_status_t cuda_error(const char *what, cudaError_t ce)
{
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "GPU table, rows of other nodes: %s: %s", what,
                        cudaGetErrorString(ce));
}

static engram_status_t alloc_host(const engram_context_t *ctx, uint64_t bytes, engram_segment_t **out)
{
    engram_segment_params_t sp = {.size = sizeof(sp), .bytes = bytes, .numa_node = (int)ctx->cfg.numa_node,
                                  .huge = ctx->cfg.huge_pages, .device = -1};
    return engram_host_segment_ops.alloc(&sp, out);
}

static engram_status_t alloc_pinned(engram_table_t *t, engram_gpu_remote_t *r)
{
    uint64_t rows = t->sizes.slot_rows * (uint64_t)t->num_slots;
    cudaError_t ce = cudaHostRegister(r->staging->addr, r->staging->size,
                                      cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (ce != cudaSuccess)
        return cuda_error("pinning the host staging", ce);
    r->staging_pinned = true;
    ce = cudaHostGetDevicePointer((void **)&r->staging_dev, r->staging->addr, 0);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&r->indices, rows * sizeof(*r->indices), cudaHostAllocDefault);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&r->dst_row, rows * sizeof(*r->dst_row), cudaHostAllocMapped);
    if (ce == cudaSuccess)
        ce = cudaHostGetDevicePointer((void **)&r->dst_row_dev, r->dst_row, 0);
    if (ce == cudaSuccess && t->ctx->cfg.dedup != ENGRAM_DEDUP_OFF) {
        ce = cudaHostAlloc((void **)&r->src, rows * sizeof(*r->src), cudaHostAllocMapped);
        if (ce == cudaSuccess)
            ce = cudaHostGetDevicePointer((void **)&r->src_dev, r->src, 0);
        r->stage_of = ce == cudaSuccess ? malloc(rows * sizeof(*r->stage_of)) : NULL;
        if (ce == cudaSuccess && r->stage_of == NULL)
            return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: out of memory for dedup's %llu staged rows",
                                (unsigned long long)rows);
    }
    if (ce != cudaSuccess)
        return cuda_error("allocating the pinned index and row lists", ce);
    r->copied = calloc((size_t)t->num_slots, sizeof(*r->copied));
    r->slots = calloc((size_t)t->num_slots, sizeof(*r->slots));
    if (r->copied == NULL || r->slots == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: out of memory for %d slots' staging state", t->num_slots);
    for (int s = 0; s < t->num_slots; s++) {
        ce = cudaEventCreateWithFlags(&r->copied[s], cudaEventDisableTiming);
        if (ce != cudaSuccess)
            return cuda_error("creating the index-copy events", ce);
    }
    return ENGRAM_OK;
}

static engram_status_t alloc_local(engram_table_t *t, engram_gpu_remote_t *r)
{
    const engram_context_t *ctx = t->ctx;
    engram_status_t st = alloc_host(ctx, t->shard->size, &r->mirror);
    if (st != ENGRAM_OK)
        return st;
    /* Node spans put the local shards at a stride of the registered size;
     * routing uses the CUDA shard's (shape.rank_stride). */
    if (r->mirror->size != t->shard->size)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "GPU table: the shard's host mirror rounds to %zu bytes, the CUDA shard is %zu; "
                            "try huge_pages=off",
                            r->mirror->size, t->shard->size);
    st = alloc_host(ctx, t->sizes.recv_bytes, &r->staging);
    return st == ENGRAM_OK ? alloc_pinned(t, r) : st;
}

/* Collective: the mirror, the staging and their registrations; the status
 * is agreed. */
static engram_status_t remote_create(engram_table_t *t, engram_gpu_table_t *g, void **state)
{
    (void)g;
    engram_context_t *ctx = t->ctx;
    engram_gpu_remote_t *r = calloc(1, sizeof(*r));
    *state = r;
    engram_status_t st = r ? alloc_local(t, r) : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: staging state");
    st = engram_group_agree(ctx->group, st);
    if (st != ENGRAM_OK)
        return st;
    engram_reg_span_t span = t->shape.hybrid ? ENGRAM_REG_NODE_SPAN : ENGRAM_REG_RANK;
    st = ctx->ops->reg_symmetric(ctx->transport, r->mirror, span, &t->shard_region);
    if (st != ENGRAM_OK)
        return st;
    return engram_group_agree(ctx->group, ctx->ops->reg_local(ctx->transport, r->staging, &t->recv_region));
}

/* Releases what create took, whatever it got to. */
static void remote_destroy(engram_table_t *t, engram_gpu_table_t *g, void *state)
{
    (void)g;
    engram_gpu_remote_t *r = state;
    engram_context_t *ctx = t->ctx;
    if (r == NULL)
        return;
    if (t->recv_region)
        ctx->ops->dereg(ctx->transport, t->recv_region);
    if (t->shard_region)
        ctx->ops->dereg(ctx->transport, t->shard_region);
    t->recv_region = NULL;
    t->shard_region = NULL;
    for (int s = 0; r->copied != NULL && s < t->num_slots; s++)
        if (r->copied[s] != NULL)
            cudaEventDestroy(r->copied[s]);
    free(r->copied);
    free(r->slots);
    cudaFreeHost(r->dst_row);
    cudaFreeHost(r->src);
    free(r->stage_of);
    cudaFreeHost(r->indices);
    if (r->staging_pinned)
        cudaHostUnregister(r->staging->addr);
    if (r->staging)
        r->staging->ops->free(r->staging);
    if (r->mirror)
        r->mirror->ops->free(r->mirror);
    free(r);
}

/* Rows [first, first + n) of this rank's shard into the mirror. */
static engram_status_t remote_write_rows(engram_table_t *t, void *state, uint64_t first, uint64_t n, const void *rows)
{
    engram_gpu_remote_t *r = state;
    return engram_gpu_rows_to_host((char *)r->mirror->addr + first * t->shape.row_stride, t->shape.row_stride, rows,
                                   t->params.row_bytes, n);
}

/* Step 1's copy, queued on the stream before the local path's kernel. */
static engram_status_t remote_issue(void *state, engram_gpu_table_t *g, const engram_gpu_fetch_t *fx, bool *wait_due)
{
    (void)g;
    engram_gpu_remote_t *r = state;
    const engram_fetch_slot_t *f = fx->f;
    const engram_table_t *t = f->table;
    *wait_due = false;
    if (f->num_tokens == 0)
        return ENGRAM_OK;
    size_t bytes = (size_t)f->num_tokens * t->params.entries_per_token * sizeof(*fx->indices);
    r->slots[fx->slot].stream = fx->stream;
    cudaError_t ce = cudaMemcpyAsync(r->indices + (uint64_t)fx->slot * t->sizes.slot_rows, fx->indices, bytes,
                                     cudaMemcpyDeviceToHost, (cudaStream_t)fx->stream);
    if (ce == cudaSuccess)
        ce = cudaEventRecord(r->copied[fx->slot], (cudaStream_t)fx->stream);
    return ce == cudaSuccess ? ENGRAM_OK : cuda_error("copying the indices back for routing", ce);
}

/* Polls the index copy, serving peers' gets meanwhile when the transport
 * needs owner progress; bounded by timeout_ms. */
static engram_status_t wait_copied(engram_context_t *ctx, cudaEvent_t ev)
{
    bool serve = engram_context_needs_progress(ctx);
    engram_deadline_t deadline = engram_deadline_start(ctx->cfg.timeout_ms);
    for (unsigned spins = 0;;) {
        cudaError_t ce = engram_gpu_event_query(ev);
        if (ce == cudaSuccess)
            return ENGRAM_OK;
        if (ce != cudaErrorNotReady)
            return cuda_error("copying the indices back for routing", ce);
        if (serve)
            (void)ctx->ops->progress(ctx->transport);
        if (engram_spin_due(&spins, ENGRAM_SPINS_PER_CLOCK_READ) && engram_deadline_expired(&deadline))
            return ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT,
                                "engram_fetch_on_stream: the stream's earlier work and the index copy took over %lld ms",
                                (long long)ctx->cfg.timeout_ms);
    }
}

/* Under dedup: after the staged rows, one scatter entry per repeat, read
 * from its first's staged row. */
static void place_repeats(const engram_dedup_t *dd, engram_gpu_remote_t *r, int slot, uint32_t rows_max,
                          remote_slot_t *rs)
{
    uint32_t *dst_row = r->dst_row + (uint64_t)slot * rows_max, *src = r->src + (uint64_t)slot * rows_max;
    const uint32_t *stage_of = r->stage_of + (uint64_t)slot * rows_max;
    for (uint32_t k = 0; k < rs->staged; k++)
        src[k] = k;
    uint32_t n = rs->staged;
    for (uint32_t k = 0; k < dd->num_copies; k++) {
        dst_row[n] = dd->copy_dst[k];
        src[n++] = stage_of[dd->copy_src[k]];
    }
    rs->placed = n;
    rs->deduped = true;
}

/* One get per row of another node (per distinct one under dedup), into
 * the slot's staging, compacted. */
static engram_status_t issue_rows(engram_fetch_slot_t *f, const engram_gpu_table_t *g, engram_gpu_remote_t *r,
                                  int slot)
{
    engram_table_t *t = f->table;
    const uint32_t ept = t->params.entries_per_token, row_bytes = t->params.row_bytes;
    const int64_t *indices = r->indices + (uint64_t)slot * t->sizes.slot_rows;
    uint32_t *dst_row = r->dst_row + (uint64_t)slot * t->sizes.slot_rows;
    uint32_t *stage_of = r->stage_of ? r->stage_of + (uint64_t)slot * t->sizes.slot_rows : NULL;
    const uint64_t staging_base = (uint64_t)slot * t->sizes.slot_row_bytes;
    engram_dedup_t *dd = engram_dedup_begin(f->dedup, (int)t->ctx->cfg.dedup, indices,
                                            f->num_tokens * ept, t->shape.total_entries);
    uint32_t staged = 0;
    engram_status_t st = ENGRAM_OK;
    engram_queue_walk_t walk;
    engram_queue_walk_begin(f, &walk);
    for (uint32_t tok = 0; st == ENGRAM_OK && tok < f->num_tokens; tok++) {
        int queue = engram_queue_walk_to(f, &walk, tok);
        for (uint32_t e = 0; st == ENGRAM_OK && e < ept; e++) {
            uint32_t row = tok * ept + e;
            engram_route_t route;
            /* bad indices and this node's rows are the kernel's */
            if (!engram_route_index(&t->shape, indices[row], &route) ||
                route.peer - g->first_peer < g->local_peers)
                continue;
            if (dd != NULL && engram_dedup_repeat(dd, row))
                continue; /* placed from its first's staged row (place_repeats) */
            st = engram_fetch_get_row(f, queue, &route, t->recv_region, staging_base + (uint64_t)staged * row_bytes);
            if (st == ENGRAM_OK && stage_of != NULL)
                stage_of[row] = staged;
            if (st == ENGRAM_OK)
                dst_row[staged++] = row;
        }
    }
    if (dd != NULL)
        atomic_fetch_add_explicit(&t->stat_repeats, dd->num_copies, memory_order_relaxed);
    remote_slot_t *rs = &r->slots[slot];
    rs->staged = rs->placed = staged;
    if (dd != NULL && dd->num_copies > 0)
        place_repeats(dd, r, slot, (uint32_t)t->sizes.slot_rows, rs);
    return st;
}

/* Steps 2-3. On an error the gets already issued are flushed all the same. */
static engram_status_t remote_issue_host(void *state, engram_gpu_table_t *g, engram_fetch_slot_t *f, int slot)
{
    engram_gpu_remote_t *r = state;
    remote_slot_t *rs = &r->slots[slot];
    rs->staged = rs->placed = 0;
    rs->deduped = false;
    rs->scatter_pending = false;
    if (f->num_tokens == 0)
        return ENGRAM_OK;
    engram_status_t st = wait_copied(f->table->ctx, r->copied[slot]);
    if (st != ENGRAM_OK)
        return st;
    st = issue_rows(f, g, r, slot);
    engram_status_t fst = engram_fetch_flush(f);
    rs->scatter_pending = rs->placed > 0;
    return st != ENGRAM_OK ? st : fst;
}

/* Step 4: ENGRAM_INPROGRESS while flushes are pending, then f->status. */
static engram_status_t remote_progress(void *state, engram_gpu_table_t *g, engram_fetch_slot_t *f, int slot)
{
    engram_table_t *t = f->table;
    engram_gpu_remote_t *r = state;
    remote_slot_t *rs = &r->slots[slot];
    engram_status_t st = engram_fetch_test_flushes(f);
    if (st == ENGRAM_INPROGRESS || !rs->scatter_pending)
        return st;
    rs->scatter_pending = false;
    if (st != ENGRAM_OK)
        return st; /* failed fetch: its staged rows are not placed */
    cudaError_t ce = (cudaError_t)engram_gpu_scatter_launch(
        r->staging_dev + (uint64_t)slot * t->sizes.slot_row_bytes, r->dst_row_dev + (uint64_t)slot * t->sizes.slot_rows,
        rs->deduped ? r->src_dev + (uint64_t)slot * t->sizes.slot_rows : NULL, rs->placed, t->params.row_bytes, f->rows,
        g->blocks, rs->stream);
    if (ce == cudaSuccess)
        ce = cudaEventRecord(g->done[slot], (cudaStream_t)rs->stream);
    if (ce != cudaSuccess)
        f->status = cuda_error("placing the rows of other nodes", ce);
    return f->status;
}

const engram_gpu_path_ops_t engram_gpu_remote_path = {
    .name = "remote",
    .how = "the host routes its rows and gets them through the host transport; one node, or a GPU-initiated "
           "transport, can",
    .caps = ENGRAM_GPU_REMOTE_CAPS,
    .create = remote_create,
    .destroy = remote_destroy,
    .write_rows = remote_write_rows,
    .issue = remote_issue,
    .issue_host = remote_issue_host,
    .progress = remote_progress,
};
