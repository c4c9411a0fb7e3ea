/* GPU tables (gpu_table.h): the state every fetch path shares
 * (gpu_state.h) and the composition of a table's paths (fetch_path.h):
 * the local path the group picks (gpu_path), and the other-nodes path the
 * context's transport and group imply. */
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/gpu_dedup.h"
#include "engram/gpu/gpu_path.h"
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

engram_status_t engram_gpu_alloc_segment(const engram_segment_ops_t *ops, const engram_gpu_table_t *g, size_t bytes,
                                         engram_segment_t **out)
{
    engram_segment_params_t sp = {.size = sizeof(sp), .bytes = round_up(bytes, g->gran), .numa_node = -1,
                                  .huge = ENGRAM_HUGE_AUTO, .device = g->device};
    return ops->alloc(&sp, out);
}

/* What every path shares: scale slots, reports, events, per-slot state;
 * dedup=on's marking state beside a local path that composes with it. */
static engram_status_t alloc_common(engram_table_t *t, engram_gpu_table_t *g)
{
    const engram_table_params_t *p = &t->params;
    cudaError_t ce = cudaSuccess;
    if (p->scale_packs > 0) {
        ce = cudaMalloc((void **)&g->scales_out, t->sizes.scales_recv_bytes);
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
    if (t->ctx->cfg.dedup == ENGRAM_DEDUP_ON && (engram_gpu_local(g)->ops->caps & ENGRAM_GPU_CAP_DEDUP)) {
        st = engram_gpu_dedup_alloc(t, &g->dedup);
        if (st != ENGRAM_OK)
            return st;
    }
    g->done = calloc((size_t)t->num_slots, sizeof(*g->done));
    g->slot_seq = calloc((size_t)t->num_slots, sizeof(*g->slot_seq));
    g->slot_report = malloc((size_t)t->num_slots * sizeof(*g->slot_report));
    g->slot_stream = calloc((size_t)t->num_slots, sizeof(*g->slot_stream));
    g->wait_pending = calloc((size_t)t->num_slots, sizeof(*g->wait_pending));
    if (g->done == NULL || g->slot_seq == NULL || g->slot_report == NULL || g->slot_stream == NULL ||
        g->wait_pending == NULL)
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

/* This rank's local path: *host for host_gather, *uva_only when it cannot
 * take host_gather (set, or not possible here); an error for a setting
 * that cannot run. */
static engram_status_t local_path(const engram_table_t *t, const engram_gpu_table_t *g, bool *host, bool *uva_only)
{
    /* the rows this GPU reads: every local rank's shard */
    const uint64_t local = (uint64_t)engram_group_local_size(t->ctx->group);
    const uint64_t node_bytes = t->sizes.shard_bytes > UINT64_MAX / local ? UINT64_MAX : t->sizes.shard_bytes * local;
    engram_gpu_path_report_t r = {.size = sizeof(r)};
    engram_status_t st = engram_gpu_path_pick(t->ctx, "engram_table_create", g->device, node_bytes, &r, uva_only);
    if (st != ENGRAM_OK)
        return st;
    *host = strcmp(r.path, engram_gpu_host_gather_path.name) == 0;
    if (r.probed_bytes > 0)
        ENGRAM_INFO("GPU table: %s for %.2f GiB of rows per node (%s: %llu MiB)", r.path,
                    (double)node_bytes / (1u << 30), r.reason, (unsigned long long)(r.reach_bytes >> 20));
    else
        ENGRAM_INFO("GPU table: %s for %.2f GiB of rows per node (%s)", r.path, (double)node_bytes / (1u << 30),
                    r.reason);
    return ENGRAM_OK;
}

/* Collective: one local path for the whole group (the shards' kind is
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
        g->path[ENGRAM_GPU_PATH_LOCAL].ops = host_rank >= 0 ? &engram_gpu_host_gather_path : &engram_gpu_uva_path;
    return st;
}

/* The rows of other nodes: a GPU-initiated transport's launcher (on one
 * node too), else the host transport on more than one node, else none. */
static const engram_gpu_path_ops_t *other_path(const engram_context_t *ctx)
{
    if (engram_context_gpu_launcher(ctx) != NULL)
        return &engram_gpu_launcher_path;
    if (engram_group_local_size(ctx->group) < engram_group_size(ctx->group))
        return &engram_gpu_remote_path;
    return NULL;
}

/* Step 2: what this rank owns: shard, receive region, the common state. */
static engram_status_t alloc_local(engram_table_t *t, engram_gpu_table_t *g)
{
    engram_status_t st = engram_gpu_local(g)->ops->alloc_shard(t, g);
    if (st != ENGRAM_OK)
        return st;
    engram_table_fill_shape(t);
    st = engram_table_alloc_slots(t);
    if (st != ENGRAM_OK)
        return st;
    st = engram_gpu_alloc_segment(&engram_cuda_device_segment_ops, g, t->sizes.recv_bytes, &g->recv_own);
    if (st != ENGRAM_OK)
        return st;
    g->recv_bytes = g->recv_own->size;
    return alloc_common(t, g);
}

/* The split of the rows between the paths (gpu_state.h): this node's
 * ranks (direct) or this node (hybrid) are the local path's; beside an
 * other-nodes path with NODE_PEERS, direct mode loads only this rank's own
 * rows locally: every other rank is a peer of that path's, as on a NIC. */
static void split_rows(engram_table_t *t, engram_gpu_table_t *g)
{
    engram_group_t *grp = t->ctx->group;
    const engram_gpu_path_ops_t *other = g->path[ENGRAM_GPU_PATH_OTHER].ops;
    int local = engram_group_local_size(grp), me = engram_group_rank(grp);
    int first = me - engram_group_local_rank(grp);
    bool hybrid = t->shape.hybrid != 0;
    bool own_only = !hybrid && other != NULL && (other->caps & ENGRAM_GPU_CAP_NODE_PEERS);
    g->first_peer = hybrid ? (uint32_t)(first / local) : (uint32_t)(own_only ? me : first);
    g->local_peers = hybrid || own_only ? 1u : (uint32_t)local;
    g->peer_stride = hybrid ? 0 : t->shape.rank_stride;
}

void engram_gpu_place_slots(engram_table_t *t, engram_gpu_table_t *g, char *recv)
{
    g->recv = recv;
    for (int s = 0; s < t->num_slots; s++) {
        t->slots[s].rows = recv + (uint64_t)s * t->sizes.slot_row_bytes;
        t->slots[s].scales_out = g->scales_out ? g->scales_out + (uint64_t)s * t->sizes.slot_scale_elems : NULL;
    }
}

static void free_gpu(engram_table_t *t, engram_gpu_table_t *g)
{
    /* In issue order: the other-nodes path first (a launcher's window
     * covers the span); host_gather's waits on the slots' events. */
    for (int p = 0; p < ENGRAM_GPU_NUM_PATHS; p++)
        if (g->path[p].ops != NULL)
            g->path[p].ops->destroy(t, g, g->path[p].state);
    engram_gpu_hot_free(g->hot);
    free(g->wait_pending);
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
            g->path[ENGRAM_GPU_PATH_OTHER].ops = other_path(ctx);
    }
    st = choose_path(t, g, st);
    if (st == ENGRAM_OK)
        st = alloc_local(t, g);
    st = engram_group_agree(ctx->group, st);
    /* each path's create is collective, its status agreed: the same on every rank */
    if (st == ENGRAM_OK) {
        split_rows(t, g);
        engram_gpu_path_t *local = &g->path[ENGRAM_GPU_PATH_LOCAL];
        st = local->ops->create(t, g, &local->state);
    }
    engram_gpu_path_t *other = g != NULL ? &g->path[ENGRAM_GPU_PATH_OTHER] : NULL;
    if (st == ENGRAM_OK && other->ops != NULL)
        st = other->ops->create(t, g, &other->state);
    if (st == ENGRAM_OK)
        return ENGRAM_OK;
    if (g != NULL)
        free_gpu(t, g);
    return st;
}

engram_status_t engram_gpu_table_write_rows(engram_table_t *t, uint64_t first, uint64_t n, const void *rows)
{
    engram_gpu_table_t *g = t->gpu;
    const engram_gpu_path_t *local = engram_gpu_local(g), *other = &g->path[ENGRAM_GPU_PATH_OTHER];
    engram_status_t st = local->ops->write_rows(t, local->state, first, n, rows); /* the shard */
    if (st == ENGRAM_OK && other->ops != NULL && other->ops->write_rows != NULL)
        st = other->ops->write_rows(t, other->state, first, n, rows); /* the other path's copy of it */
    return st;
}

engram_status_t engram_gpu_table_write_end(engram_table_t *t, const uint32_t *scales)
{
    engram_gpu_table_t *g = t->gpu;
    const engram_gpu_path_t *local = engram_gpu_local(g);
    return local->ops->write_scales(t, g, local->state, scales);
}

char *engram_gpu_table_host_rows(const engram_table_t *t)
{
    return t->shard->kind == ENGRAM_MEM_HOST ? t->shard->addr : NULL;
}

const char *engram_gpu_table_path(const engram_table_t *t, int *gather_threads, uint64_t *cache_rows)
{
    const engram_gpu_table_t *g = t->gpu;
    const engram_gpu_path_t *local = engram_gpu_local(g);
    *gather_threads = local->ops->threads != NULL ? local->ops->threads(local->state) : 0;
    *cache_rows = g->hot != NULL ? g->hot->rows : 0;
    return local->ops->name;
}

void engram_gpu_table_destroy(engram_table_t *t)
{
    if (t->gpu != NULL)
        free_gpu(t, t->gpu);
}
