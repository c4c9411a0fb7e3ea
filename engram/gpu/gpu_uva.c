/* The uva path (fetch_path.h): shards in CUDA segments shared among the
 * ranks of a node by fd and mapped behind each rank's GPU receive region
 * at the same offsets in every rank (the span, gpu_state.h), so the fetch
 * kernel reads any local row with one load.
 *
 * One fetch is one kernel launch on the caller's stream (with dedup=on a
 * marking kernel before it and a copy kernel after, gpu_dedup.h). When
 * that kernel is the fetch's only GPU work (fx->may_signal, no dedup copy)
 * it signals completion itself and the driver records no event
 * (gpu_fetch.c says why). */
#include <stdlib.h>
#include <unistd.h>

#include "engram/gpu/gpu_dedup.h"
#include "engram/gpu/gpu_sync.h"
#include "engram/gpu/gpu_fetch.h"
#include "engram/gpu/gpu_sms.h"
#include "engram/gpu/gpu_state.h"
#include "engram/gpu/hot_cache.h"
#include "engram/plugin/segment.h"
#include "hal/log.h"
#include "memory/cuda_segment.h"

typedef struct engram_gpu_uva {
    uint32_t *scales;  /* GPU copy of the replicated scales; NULL without them */
    const char *span;  /* the gather kernel's shard of routed peer first_peer */
} engram_gpu_uva_t;

static engram_status_t cuda_error(const char *what, cudaError_t ce)
{
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "GPU table: %s: %s", what, cudaGetErrorString(ce));
}

static engram_status_t uva_alloc_shard(engram_table_t *t, engram_gpu_table_t *g)
{
    const engram_segment_ops_t *ops = t->ctx->cfg.gpu_table == ENGRAM_GPU_TABLE_DEVICE
                                          ? &engram_cuda_device_segment_ops
                                          : &engram_cuda_host_numa_segment_ops;
    return engram_gpu_alloc_segment(ops, g, t->sizes.shard_bytes, &t->shard);
}

static engram_status_t map_part(engram_gpu_table_t *g, int fd, size_t bytes, bool read_only, size_t offset)
{
    engram_status_t st = g->recv_own->ops->import_fd(fd, bytes, read_only, g->base + offset, &g->parts[g->num_parts]);
    if (st == ENGRAM_OK)
        g->num_parts++;
    return st;
}

/* The span (receive region, then the node's shards, read-only); the table
 * releases it with the rest of its common state. */
static engram_status_t map_span(engram_table_t *t, engram_gpu_table_t *g, engram_gpu_uva_t *u, const int *fds)
{
    engram_group_t *grp = t->ctx->group;
    int local = engram_group_local_size(grp);
    int first = engram_group_rank(grp) - engram_group_local_rank(grp);
    size_t shard_bytes = t->shard->size;
    g->parts = calloc((size_t)local + 1, sizeof(*g->parts));
    if (g->parts == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: out of memory for %d span parts", local + 1);
    g->span_bytes = g->recv_bytes + (size_t)local * shard_bytes;
    engram_status_t st = engram_cuda_reserve(g->span_bytes, (void **)&g->base);
    if (st != ENGRAM_OK)
        return st;
    int recv_fd = -1;
    st = g->recv_own->ops->export_fd(g->recv_own, &recv_fd);
    if (st == ENGRAM_OK)
        st = map_part(g, recv_fd, g->recv_bytes, false, 0);
    for (int i = 0; st == ENGRAM_OK && i < local; i++)
        st = map_part(g, fds[first + i], shard_bytes, true, g->recv_bytes + (size_t)i * shard_bytes);
    if (st != ENGRAM_OK)
        return st;
    /* The span's first shard is local rank 0's; in direct mode the kernel
     * starts at routed peer first_peer's (this rank's own beside an
     * other-nodes path with NODE_PEERS). */
    size_t skip = t->shape.hybrid ? 0 : (size_t)(g->first_peer - (uint32_t)first);
    u->span = g->base + g->recv_bytes + skip * shard_bytes;
    engram_gpu_place_slots(t, g, g->base);
    return ENGRAM_OK;
}

/* Collective: this rank's shard shared with the node's ranks by fd, the
 * span mapped, gpu_sms=auto calibrated; the status agreed. */
static engram_status_t uva_create(engram_table_t *t, engram_gpu_table_t *g, void **state)
{
    engram_context_t *ctx = t->ctx;
    engram_gpu_uva_t *u = calloc(1, sizeof(*u));
    *state = u;
    engram_status_t st = u != NULL ? ENGRAM_OK : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: out of memory");
    if (st == ENGRAM_OK && t->params.scale_packs > 0) {
        cudaError_t ce = cudaMalloc((void **)&u->scales, t->sizes.scales_bytes);
        if (ce != cudaSuccess)
            st = cuda_error("allocating the scales in GPU memory", ce);
    }
    int my_fd = -1;
    if (st == ENGRAM_OK)
        st = t->shard->ops->export_fd(t->shard, &my_fd);
    st = engram_group_agree(ctx->group, st);
    if (st != ENGRAM_OK)
        return st;
    int n = engram_group_size(ctx->group);
    int *fds = malloc((size_t)n * sizeof(int));
    st = engram_group_agree(ctx->group, fds ? ENGRAM_OK : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: fd table"));
    if (st != ENGRAM_OK) {
        free(fds);
        return st;
    }
    st = engram_fd_allgather(ctx->group, my_fd, fds);
    if (st == ENGRAM_OK) {
        st = engram_group_agree(ctx->group, map_span(t, g, u, fds));
        /* gpu_sms is each rank's own: every rank agrees, calibrating or not. */
        if (st == ENGRAM_OK)
            st = engram_group_agree(ctx->group, ctx->cfg.gpu_sms == ENGRAM_CONFIG_INT_AUTO
                                                    ? engram_gpu_sms_calibrate(t, g, u->span, g->sms)
                                                    : ENGRAM_OK);
        for (int r = 0; r < n; r++)
            if (fds[r] >= 0)
                close(fds[r]);
    }
    free(fds);
    return st;
}

static void uva_destroy(engram_table_t *t, engram_gpu_table_t *g, void *state)
{
    (void)t;
    (void)g;
    engram_gpu_uva_t *u = state;
    if (u == NULL)
        return;
    cudaFree(u->scales);
    free(u);
}

/* Runs fn on a private stream, then waits for that stream alone: a write
 * stalls none of the caller's streams. */
static cudaError_t on_own_stream(cudaError_t (*fn)(engram_table_t *, void *, const void *, cudaStream_t),
                                 engram_table_t *t, void *dst, const void *src)
{
    cudaStream_t s;
    cudaError_t ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (ce != cudaSuccess)
        return ce;
    ce = fn(t, dst, src, s);
    /* copies from pageable memory may return before the DMA lands */
    cudaError_t se = engram_gpu_stream_sync(s);
    cudaStreamDestroy(s);
    return ce != cudaSuccess ? ce : se;
}

typedef struct rows_range {
    uint64_t first, n;
} rows_range_t;

static cudaError_t copy_rows(engram_table_t *t, void *range, const void *rows, cudaStream_t s)
{
    const rows_range_t *r = range;
    const uint32_t row_bytes = t->params.row_bytes;
    return cudaMemcpy2DAsync((char *)t->shard->addr + r->first * t->shape.row_stride, t->shape.row_stride, rows,
                             row_bytes, row_bytes, r->n, cudaMemcpyDefault, s);
}

static cudaError_t copy_scales(engram_table_t *t, void *dst, const void *scales, cudaStream_t s)
{
    return cudaMemcpyAsync(dst, scales, t->sizes.scales_bytes, cudaMemcpyHostToDevice, s);
}

static engram_status_t uva_write_rows(engram_table_t *t, void *state, uint64_t first, uint64_t n, const void *rows)
{
    (void)state;
    rows_range_t range = {.first = first, .n = n};
    cudaError_t ce = on_own_stream(copy_rows, t, &range, rows);
    return ce == cudaSuccess ? ENGRAM_OK : cuda_error("writing the shard", ce);
}

static engram_status_t uva_write_scales(engram_table_t *t, engram_gpu_table_t *g, void *state, const uint32_t *scales)
{
    (void)g;
    engram_gpu_uva_t *u = state;
    cudaError_t ce = scales != NULL ? on_own_stream(copy_scales, t, u->scales, scales) : cudaSuccess;
    return ce == cudaSuccess ? ENGRAM_OK : cuda_error("writing the scales", ce);
}

/* The gather kernel's view of this node's rows. */
static engram_gpu_gather_args_t gather_args(const engram_table_t *t, const engram_gpu_table_t *g,
                                            const engram_gpu_uva_t *u)
{
    return (engram_gpu_gather_args_t){
        .shape = t->shape,
        .span = u->span,
        .peer_stride = g->peer_stride,
        .first_peer = g->first_peer,
        .local_peers = g->local_peers,
        .row_bytes = t->params.row_bytes,
    };
}

/* The hot-row cache's load: the gather kernel itself reads the listed
 * rows (host or GPU shards, as fetches do) into the cache, on a private
 * stream. */
static engram_status_t uva_load_rows(engram_table_t *t, engram_gpu_table_t *g, void *state, const int64_t *rows,
                                     const int64_t *rows_dev, uint64_t n, char *dst)
{
    (void)rows;
    cudaStream_t s;
    cudaError_t ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (ce != cudaSuccess)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "hot-row cache: creating a stream: %s", cudaGetErrorString(ce));
    engram_gpu_gather_args_t a = gather_args(t, g, state);
    a.indices = rows_dev;
    a.rows = dst;
    a.num_rows = (uint32_t)n;
    a.entries_per_token = 1;
    a.num_tokens = (uint32_t)n;
    a.bad = engram_gpu_report(g, ENGRAM_RELEASED_NO_REPORT); /* the sink: no fetch reads it */
    ce = (cudaError_t)engram_gpu_gather_launch(&a, g->blocks, s);
    cudaError_t sync = engram_gpu_stream_sync(s);
    cudaStreamDestroy(s);
    if (ce == cudaSuccess)
        ce = sync;
    return ce == cudaSuccess ? ENGRAM_OK
                             : ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "hot-row cache: loading the rows: %s",
                                            cudaGetErrorString(ce));
}

static engram_status_t uva_issue(void *state, engram_gpu_table_t *g, const engram_gpu_fetch_t *fx, bool *wait_due)
{
    engram_fetch_slot_t *f = fx->f;
    const engram_table_t *t = f->table;
    *wait_due = false;
    /* a report entry of its own, so the slot may be taken again before the
     * host reads it (gpu_released.c); a graph's replays report to the sink */
    g->slot_report[fx->slot] = fx->captured ? ENGRAM_RELEASED_NO_REPORT : engram_released_take_report(&g->released);
    if (f->num_tokens == 0)
        return ENGRAM_OK;
    const engram_gpu_uva_t *u = state;
    engram_gpu_gather_args_t a = gather_args(t, g, u);
    a.indices = fx->indices;
    a.rows = f->rows;
    a.num_rows = f->num_tokens * t->params.entries_per_token;
    a.entries_per_token = t->params.entries_per_token;
    a.num_tokens = f->num_tokens;
    a.scales = u->scales;
    a.scales_out = f->scales_out;
    a.packs = t->params.scale_packs;
    a.col_major = (f->flags & ENGRAM_FETCH_SCALES_COL_MAJOR) != 0;
    a.bad = engram_gpu_report(g, g->slot_report[fx->slot]);
    a.speculate = !fx->captured;
    a.unchained = fx->captured;
    a.hot = g->hot != NULL ? g->hot->dev : (engram_hot_hash_t){0};
    a.hot_rows = g->hot != NULL ? g->hot->rows_dev : NULL;
    cudaError_t ce = (cudaError_t)engram_gpu_dedup_before(g->dedup, g->blocks, fx->slot, &a, fx->stream);
    /* The gather kernel is the fetch's last GPU work: it signals. */
    if (fx->may_signal && a.first == NULL)
        a.seq = ++g->last_seq;
    if (ce == cudaSuccess)
        ce = (cudaError_t)engram_gpu_gather_launch(&a, g->blocks, fx->stream);
    if (ce == cudaSuccess)
        ce = (cudaError_t)engram_gpu_dedup_after(&a, g->blocks, fx->stream);
    if (ce != cudaSuccess)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "engram_fetch_on_stream: kernel launch: %s",
                            cudaGetErrorString(ce));
    g->slot_seq[fx->slot] = a.seq;
    return ENGRAM_OK;
}

/* The kernel's bad-index tally and cache hits, from its report entry. */
static engram_status_t uva_test(void *state, engram_gpu_table_t *g, engram_fetch_slot_t *f, int slot)
{
    (void)state;
    engram_gpu_report_read(f->table, g->slot_report[slot], f->num_tokens, &f->bad_count, &f->first_bad_token,
                           &f->first_bad_entry, &f->cache_hits);
    return f->status;
}

const engram_gpu_path_ops_t engram_gpu_uva_path = {
    .name = "uva",
    .how = "the gather kernel loads its rows through the UVA layout",
    .work = "kernel",
    .caps = ENGRAM_GPU_UVA_CAPS,
    .alloc_shard = uva_alloc_shard,
    .create = uva_create,
    .destroy = uva_destroy,
    .write_rows = uva_write_rows,
    .write_scales = uva_write_scales,
    .load_rows = uva_load_rows,
    .issue = uva_issue,
    .test = uva_test,
};
