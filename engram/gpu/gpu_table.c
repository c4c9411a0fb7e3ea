/* GPU tables: shards in CUDA segments shared among the ranks of a node by
 * fd and mapped behind each rank's GPU receive region at the same offsets
 * in every rank, so the fetch kernel reads any local row with one load. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/gpu/gpu_dedup.h"
#include "engram/gpu/gpu_host_gather.h"
#include "engram/gpu/gpu_path.h"
#include "engram/gpu/gpu_remote.h"
#include "engram/gpu/gpu_sms.h"
#include "engram/gpu/gpu_state.h"
#include "engram/gpu/gpu_table.h"
#include "engram/gpu/hot_cache.h"
#include "hal/log.h"
#include "memory/cuda_segment.h"
#include "engram/plugin/segment.h"

static engram_status_t cuda_error(const char *what, cudaError_t ce)
{
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "GPU table: %s: %s", what, cudaGetErrorString(ce));
}

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

engram_status_t engram_gpu_table_check(const engram_context_t *ctx, const engram_table_params_t *p)
{
    int size = engram_group_size(ctx->group), local = engram_group_local_size(ctx->group);
    if (local != size && !(ctx->caps.flags & ENGRAM_CAP_HOST_INITIATED) && engram_context_gpu_launcher(ctx) == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "recv=CUDA on %d nodes: rows owned by other nodes need host-initiated gets or a fetch "
                            "launcher, and transport %s offers neither",
                            size / local, ctx->ops->name);
    if ((uint64_t)p->max_tokens * p->entries_per_token > UINT32_MAX)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "recv=CUDA: max_tokens %u x entries_per_token %u exceed 2^32 rows",
                            p->max_tokens, p->entries_per_token);
    return ENGRAM_OK;
}

static const engram_segment_ops_t *shard_ops(const engram_context_t *ctx)
{
    return ctx->cfg.gpu_table == ENGRAM_GPU_TABLE_DEVICE ? &engram_cuda_device_segment_ops
                                                         : &engram_cuda_host_numa_segment_ops;
}

static engram_status_t alloc_seg(const engram_segment_ops_t *ops, engram_gpu_table_t *g, size_t bytes,
                                 engram_segment_t **out)
{
    engram_segment_params_t sp = {.size = sizeof(sp), .bytes = round_up(bytes, g->gran), .numa_node = -1,
                                  .huge = ENGRAM_HUGE_AUTO, .device = g->device};
    return ops->alloc(&sp, out);
}

static engram_status_t alloc_cuda(engram_table_t *t, engram_gpu_table_t *g)
{
    const engram_table_params_t *p = &t->params;
    cudaError_t ce = cudaSuccess;
    if (p->scale_packs > 0) {
        ce = cudaMalloc((void **)&g->scales_out, t->sizes.scales_recv_bytes);
        /* host_gather's pool gathers the scales from a host copy */
        if (ce == cudaSuccess && !g->host_path)
            ce = cudaMalloc((void **)&g->scales, t->sizes.scales_bytes);
        if (ce != cudaSuccess)
            return cuda_error("allocating the scales in GPU memory", ce);
    }
    engram_status_t st = engram_released_init(&g->released, t->num_slots, ENGRAM_RELEASED_MAX);
    if (st != ENGRAM_OK)
        return st;
    /* room for every SM's tally: gpu_sms=auto sets blocks after the span is mapped */
    size_t reports = ((size_t)g->released.num_reports + 1) * (size_t)g->sms * sizeof(*g->bad);
    ce = cudaHostAlloc((void **)&g->bad, reports, cudaHostAllocMapped);
    if (ce != cudaSuccess)
        return cuda_error("allocating the bad-index reports (host-mapped)", ce);
    memset(g->bad, 0, reports); /* no report holds a seq yet */
    if (t->ctx->cfg.dedup == ENGRAM_DEDUP_ON && !g->host_path) {
        st = engram_gpu_dedup_alloc(t, &g->dedup);
        if (st != ENGRAM_OK)
            return st;
    }
    g->done = calloc((size_t)t->num_slots, sizeof(*g->done));
    g->slot_seq = calloc((size_t)t->num_slots, sizeof(*g->slot_seq));
    g->slot_report = malloc((size_t)t->num_slots * sizeof(*g->slot_report));
    g->slot_stream = calloc((size_t)t->num_slots, sizeof(*g->slot_stream));
    g->wait_stream = calloc((size_t)t->num_slots, sizeof(*g->wait_stream));
    g->wait_pending = calloc((size_t)t->num_slots, sizeof(*g->wait_pending));
    if (g->done == NULL || g->slot_seq == NULL || g->slot_report == NULL || g->slot_stream == NULL ||
        g->wait_stream == NULL || g->wait_pending == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: out of memory for %d events", t->num_slots);
    for (int s = 0; s < t->num_slots; s++)
        g->slot_report[s] = ENGRAM_RELEASED_NO_REPORT;
    for (int s = 0; s < t->num_slots; s++) {
        ce = cudaEventCreateWithFlags(&g->done[s], cudaEventDisableTiming);
        if (ce != cudaSuccess)
            return cuda_error("creating the fetch events", ce);
    }
    return ENGRAM_OK;
}

/* Step 1: the device, and what does not depend on the path. */
static engram_status_t open_device(engram_gpu_table_t *g, const engram_context_t *ctx)
{
    cudaError_t ce = cudaGetDevice(&g->device);
    if (ce != cudaSuccess)
        return cuda_error("no current CUDA device", ce);
    int sms = 0;
    ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g->device);
    if (ce != cudaSuccess)
        return cuda_error("reading the SM count", ce);
    g->sms = sms;
    g->blocks = ctx->cfg.gpu_sms > 0 && ctx->cfg.gpu_sms < sms ? (int)ctx->cfg.gpu_sms : sms;
    ce = (cudaError_t)engram_gpu_kernels_load();
    if (ce != cudaSuccess)
        return cuda_error("loading the fetch kernels", ce);
    return engram_cuda_granularity(g->device, &g->gran);
}

/* This rank's path: *host for host_gather, *uva_only when it cannot take
 * host_gather (set, or not possible here); an error for a setting that
 * cannot run. */
static engram_status_t local_path(const engram_table_t *t, const engram_gpu_table_t *g, bool *host, bool *uva_only)
{
    /* the rows this GPU reads: every local rank's shard */
    const uint64_t local = (uint64_t)engram_group_local_size(t->ctx->group);
    const uint64_t node_bytes = t->sizes.shard_bytes > UINT64_MAX / local ? UINT64_MAX : t->sizes.shard_bytes * local;
    engram_gpu_path_report_t r = {.size = sizeof(r)};
    engram_status_t st = engram_gpu_path_pick(t->ctx, g->device, node_bytes, &r, uva_only);
    if (st != ENGRAM_OK)
        return st;
    *host = strcmp(r.path, "host_gather") == 0;
    if (r.probed_bytes > 0)
        ENGRAM_INFO("GPU table: %s for %.2f GiB of rows per node (%s: %llu MiB)", r.path,
                    (double)node_bytes / (1u << 30), r.reason, (unsigned long long)(r.reach_bytes >> 20));
    else
        ENGRAM_INFO("GPU table: %s for %.2f GiB of rows per node (%s)", r.path, (double)node_bytes / (1u << 30),
                    r.reason);
    return ENGRAM_OK;
}

/* Collective: one path for the whole group (the shards' kind is
 * theirs to share): host_gather when any rank takes it, refused when
 * another cannot. */
static engram_status_t choose_path(engram_table_t *t, engram_gpu_table_t *g, engram_status_t st)
{
    engram_group_t *grp = t->ctx->group;
    bool host = false, uva_only = true;
    if (st == ENGRAM_OK)
        st = local_path(t, g, &host, &uva_only);
    int n = engram_group_size(grp);
    uint8_t *all = st == ENGRAM_OK ? malloc((size_t)n) : NULL;
    if (st == ENGRAM_OK && all == NULL)
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: out of memory for %d ranks' paths", n);
    st = engram_group_agree(grp, st);
    uint8_t mine = (uint8_t)((host ? 1u : 0u) | (uva_only ? 2u : 0u));
    if (st == ENGRAM_OK)
        st = engram_group_allgather(grp, &mine, all, 1);
    int host_rank = -1, uva_rank = -1;
    for (int r = 0; st == ENGRAM_OK && r < n; r++) {
        if ((all[r] & 1u) && host_rank < 0)
            host_rank = r;
        if ((all[r] & 2u) && uva_rank < 0)
            uva_rank = r;
    }
    free(all);
    if (st == ENGRAM_OK && host_rank >= 0 && uva_rank >= 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                            "gpu_path: rank %d takes host_gather but rank %d can only take uva (gpu_path=uva or "
                            "gpu_table=device there); set gpu_path and gpu_table the same on every rank",
                            host_rank, uva_rank);
    if (st == ENGRAM_OK)
        g->host_path = host_rank >= 0;
    return st;
}

/* Step 2: what this rank owns: shard, receive region, scales, events. */
static engram_status_t alloc_local(engram_table_t *t, engram_gpu_table_t *g)
{
    engram_status_t st = g->host_path ? engram_gpu_host_gather_alloc_shard(t, g)
                                      : alloc_seg(shard_ops(t->ctx), g, t->sizes.shard_bytes, &t->shard);
    if (st != ENGRAM_OK)
        return st;
    engram_table_fill_shape(t);
    st = engram_table_alloc_slots(t);
    if (st != ENGRAM_OK)
        return st;
    st = alloc_seg(&engram_cuda_device_segment_ops, g, t->sizes.recv_bytes, &g->recv_own);
    if (st != ENGRAM_OK)
        return st;
    g->recv_bytes = g->recv_own->size;
    return alloc_cuda(t, g);
}

static engram_status_t map_part(engram_gpu_table_t *g, int fd, size_t bytes, bool read_only, size_t offset)
{
    engram_status_t st = g->recv_own->ops->import_fd(fd, bytes, read_only, g->base + offset, &g->parts[g->num_parts]);
    if (st == ENGRAM_OK)
        g->num_parts++;
    return st;
}

/* Steps 3-4: the span (receive region, then the node's shards, read-only). */
static engram_status_t map_span(engram_table_t *t, engram_gpu_table_t *g, const int *fds)
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
    bool hybrid = t->shape.hybrid != 0;
    /* With a fetch launcher, direct mode loads only this rank's own rows
     * here: every other rank is a peer of the launcher's, as on a NIC. */
    bool own_only = !hybrid && g->launcher != NULL;
    int me = engram_group_rank(grp);
    g->first_peer = hybrid ? (uint32_t)(first / local) : (uint32_t)(own_only ? me : first);
    g->local_peers = hybrid || own_only ? 1u : (uint32_t)local;
    g->peer_stride = hybrid ? 0 : t->shape.rank_stride;
    g->local_span = g->base + g->recv_bytes + (own_only ? (size_t)(me - first) * shard_bytes : 0);
    for (int s = 0; s < t->num_slots; s++) {
        t->slots[s].rows = g->base + (uint64_t)s * t->sizes.slot_row_bytes;
        t->slots[s].scales_out = g->scales_out ? g->scales_out + (uint64_t)s * t->sizes.slot_scale_elems : NULL;
    }
    return ENGRAM_OK;
}

/* Collective: the fetch launcher takes the span (every rank's has the same
 * layout); the status is agreed. */
static engram_status_t attach_launcher(engram_table_t *t, engram_gpu_table_t *g)
{
    engram_context_t *ctx = t->ctx;
    /* the receive region and the shard as allocated (not the span's
     * mappings of them, which are imports) */
    engram_gpu_span_t span = {
        .size = sizeof(span),
        .recv = g->recv_own->addr,
        .recv_bytes = g->recv_bytes,
        .shard = t->shard->addr,
        .shard_bytes = t->shard->size,
        .hybrid = t->shape.hybrid != 0,
        .num_slots = t->num_slots,
        .max_rows = (uint32_t)t->sizes.slot_rows, /* at most UINT32_MAX: engram_gpu_table_check */
    };
    return engram_group_agree(ctx->group, g->launcher->attach(ctx->transport, &span, &g->launch));
}

static void free_gpu(engram_table_t *t, engram_gpu_table_t *g)
{
    /* The launcher's window covers the span: it goes first. */
    if (g->launch != NULL)
        g->launcher->detach(g->launch);
    engram_gpu_host_gather_destroy(t, g); /* waits on the slots' events */
    engram_gpu_hot_free(g->hot);
    free(g->wait_pending);
    free(g->wait_stream);
    engram_gpu_remote_destroy(t, g);
    for (int s = 0; g->done != NULL && s < t->num_slots; s++)
        if (g->done[s] != NULL)
            cudaEventDestroy(g->done[s]);
    free(g->done);
    free(g->slot_seq);
    free(g->slot_report);
    free(g->slot_stream);
    cudaFreeHost(g->bad);
    engram_released_fini(&g->released);
    engram_gpu_dedup_free(g->dedup);
    cudaFree(g->scales);
    cudaFree(g->scales_out);
    /* The parts go before the reservation they sit in. */
    for (int i = g->num_parts - 1; i >= 0; i--)
        g->parts[i]->ops->free(g->parts[i]);
    free(g->parts);
    engram_cuda_unreserve(g->base, g->span_bytes);
    if (g->recv_own)
        g->recv_own->ops->free(g->recv_own);
    engram_table_free_slots(t);
    if (t->shard)
        t->shard->ops->free(t->shard);
    t->shard = NULL;
    free(g);
    t->gpu = NULL;
}

engram_status_t engram_gpu_table_create(engram_context_t *ctx, engram_table_t *t, engram_status_t st)
{
    engram_gpu_table_t *g = NULL;
    if (st == ENGRAM_OK) {
        g = calloc(1, sizeof(*g));
        t->gpu = g;
        st = g ? open_device(g, ctx) : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: out of memory for its state");
        if (g != NULL)
            g->launcher = engram_context_gpu_launcher(ctx);
    }
    st = choose_path(t, g, st);
    if (st == ENGRAM_OK)
        st = alloc_local(t, g);
    st = engram_group_agree(ctx->group, st);
    if (st == ENGRAM_OK && g->host_path) { /* the same on every rank */
        st = engram_gpu_host_gather_create(t, g);
        if (st == ENGRAM_OK)
            return ENGRAM_OK;
        goto err_free;
    }
    int my_fd = -1;
    if (st == ENGRAM_OK)
        st = engram_group_agree(ctx->group, t->shard->ops->export_fd(t->shard, &my_fd));
    if (st != ENGRAM_OK)
        goto err_free;
    int n = engram_group_size(ctx->group);
    int *fds = malloc((size_t)n * sizeof(int));
    st = engram_group_agree(ctx->group, fds ? ENGRAM_OK : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: fd table"));
    if (st != ENGRAM_OK) {
        free(fds);
        goto err_free;
    }
    st = engram_fd_allgather(ctx->group, my_fd, fds);
    if (st == ENGRAM_OK) {
        st = engram_group_agree(ctx->group, map_span(t, g, fds));
        /* gpu_sms is each rank's own: every rank agrees, calibrating or not.
         * host_gather runs no gather kernel to time: its cache's short
         * kernels take every SM. */
        if (st == ENGRAM_OK)
            st = engram_group_agree(ctx->group, ctx->cfg.gpu_sms == ENGRAM_CONFIG_INT_AUTO && !g->host_path
                                                    ? engram_gpu_sms_calibrate(t, g, g->sms)
                                                    : ENGRAM_OK);
        for (int r = 0; r < n; r++)
            if (fds[r] >= 0)
                close(fds[r]);
    }
    free(fds);
    /* the same on every rank: the transport and the group's shape */
    if (st == ENGRAM_OK && g->launcher != NULL)
        st = attach_launcher(t, g);
    else if (st == ENGRAM_OK && engram_group_local_size(ctx->group) < n)
        st = engram_gpu_remote_create(t, g);
    if (st == ENGRAM_OK)
        return ENGRAM_OK;
err_free:
    if (g != NULL)
        free_gpu(t, g);
    return st;
}

/* Runs fn on a private stream, then waits for that stream alone: a write
 * stalls none of the caller's streams. */
static cudaError_t on_own_stream(cudaError_t (*fn)(engram_table_t *, uint64_t, uint64_t, const void *, cudaStream_t),
                                 engram_table_t *t, uint64_t first, uint64_t n, const void *src)
{
    cudaStream_t s;
    cudaError_t ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (ce != cudaSuccess)
        return ce;
    ce = fn(t, first, n, src, s);
    /* copies from pageable memory may return before the DMA lands */
    cudaError_t se = cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return ce != cudaSuccess ? ce : se;
}

static cudaError_t copy_rows(engram_table_t *t, uint64_t first, uint64_t n, const void *rows, cudaStream_t s)
{
    const uint32_t row_bytes = t->params.row_bytes;
    return cudaMemcpy2DAsync((char *)t->shard->addr + first * t->shape.row_stride, t->shape.row_stride, rows,
                             row_bytes, row_bytes, n, cudaMemcpyDefault, s);
}

static cudaError_t copy_scales(engram_table_t *t, uint64_t first, uint64_t n, const void *scales, cudaStream_t s)
{
    (void)first;
    (void)n;
    engram_gpu_table_t *g = t->gpu;
    return cudaMemcpyAsync(g->scales, scales, t->sizes.scales_bytes, cudaMemcpyHostToDevice, s);
}

engram_status_t engram_gpu_table_write_rows(engram_table_t *t, uint64_t first, uint64_t n, const void *rows)
{
    engram_gpu_table_t *g = t->gpu;
    if (g->host_path)
        return engram_gpu_host_gather_write_rows(t, first, n, rows);
    cudaError_t ce = on_own_stream(copy_rows, t, first, n, rows);
    if (ce != cudaSuccess)
        return cuda_error("writing the shard", ce);
    return g->remote != NULL ? engram_gpu_remote_write_rows(t, first, n, rows) : ENGRAM_OK;
}

engram_status_t engram_gpu_table_write_end(engram_table_t *t, const uint32_t *scales)
{
    engram_gpu_table_t *g = t->gpu;
    if (g->host_path)
        return engram_gpu_host_gather_write_scales(t, scales);
    cudaError_t ce = scales != NULL ? on_own_stream(copy_scales, t, 0, 0, scales) : cudaSuccess;
    return ce == cudaSuccess ? ENGRAM_OK : cuda_error("writing the scales", ce);
}

char *engram_gpu_table_host_rows(const engram_table_t *t)
{
    const engram_gpu_table_t *g = t->gpu;
    return g->host_path ? t->shard->addr : NULL;
}

const char *engram_gpu_table_path(const engram_table_t *t, int *gather_threads, uint64_t *cache_rows)
{
    const engram_gpu_table_t *g = t->gpu;
    *gather_threads = engram_gpu_host_gather_threads(g);
    *cache_rows = g->hot != NULL ? g->hot->rows : 0;
    return g->host_path ? "host_gather" : "uva";
}

void engram_gpu_table_destroy(engram_table_t *t)
{
    if (t->gpu != NULL)
        free_gpu(t, t->gpu);
}
