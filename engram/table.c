/* Tables: collective create/destroy, and write (their sizes: table_sizes.c).
 *
 * engram_table_create, step by step (collective, as DeepEP's Buffer):
 *   1. gather peer info: every rank validates its params locally and the
 *      params are allgathered, so a mismatch fails on every rank;
 *   2. allocate locally: the shard (host segment, rows at a 32-byte stride),
 *      the receive slots and the scale buffers; agree on the outcome;
 *   3. exchange handles and map: the transport registers the shard
 *      symmetrically (per rank in direct mode, per node span in hybrid);
 *      in direct mode a transport that offers alloc_symmetric provides the
 *      shard's memory itself instead (hybrid keeps host segments: the
 *      node's other ranks map them by fd);
 *   4. register the receive slots as the local destination; agree;
 *   5. barrier. Any failure unwinds what this rank took, on every rank. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/fetch_handle.h"
#include "engram/gpu/gpu_table.h"
#include "engram/internal.h"
#include "hal/log.h"
#include "hal/group.h"
#include "hal/struct_import.h"
#include "memory/host_segment.h"

/* The memory kinds the table's gets read (*from: the shard, or its host
 * mirror) and write (*to: the receive slots, or their host staging);
 * false when no get goes through the transport (a recv=CUDA table on one
 * node without a fetch launcher reads every row with GPU loads). */
static bool get_kinds(const engram_context_t *ctx, const engram_table_params_t *p, engram_mem_kind_t *from,
                      engram_mem_kind_t *to)
{
    *from = *to = ENGRAM_MEM_HOST;
    if (p->recv == ENGRAM_RECV_HOST)
        return true;
    if (engram_context_gpu_launcher(ctx) != NULL) { /* the kernel gets from the CUDA shard into the CUDA slots */
        *from = ctx->cfg.gpu_table == ENGRAM_GPU_TABLE_DEVICE ? ENGRAM_MEM_CUDA_DEVICE : ENGRAM_MEM_CUDA_HOST_NUMA;
        *to = ENGRAM_MEM_CUDA_DEVICE;
        return true;
    }
    /* other nodes' rows: host gets from the shard's host mirror into a host staging (engram/gpu/gpu_remote.c) */
    return engram_group_local_size(ctx->group) < engram_group_size(ctx->group);
}

/* A transport reads only the kinds in caps.read_kinds and writes only
 * those in caps.write_kinds: a table needing another is refused here, not
 * met by a registration or a get that fails on some fabric. */
static engram_status_t check_kinds(const engram_context_t *ctx, const engram_table_params_t *p)
{
    engram_mem_kind_t from, to;
    if (!get_kinds(ctx, p, &from, &to))
        return ENGRAM_OK;
    const char *recv = p->recv == ENGRAM_RECV_HOST ? "HOST" : "CUDA";
    if (!(ctx->caps.read_kinds & ENGRAM_MEM_KIND_BIT(from)))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "recv=%s: transport %s cannot read %s memory, where this table's shard lies", recv,
                            ctx->ops->name, engram_mem_kind_name(from));
    if (!(ctx->caps.write_kinds & ENGRAM_MEM_KIND_BIT(to)))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "recv=%s: transport %s cannot write %s memory, where this table's rows are received",
                            recv, ctx->ops->name, engram_mem_kind_name(to));
    return ENGRAM_OK;
}

static engram_status_t check_params(const engram_context_t *ctx, const engram_table_params_t *p,
                                    engram_table_sizes_t *sizes)
{
    if (p->entries_per_rank == 0 || p->row_bytes == 0 || p->entries_per_token == 0 || p->max_tokens == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                            "table params: entries_per_rank, row_bytes, entries_per_token and max_tokens must be > 0");
    if (p->recv != ENGRAM_RECV_HOST && p->recv != ENGRAM_RECV_CUDA)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "table params: unknown recv location %d", (int)p->recv);
    engram_status_t st = engram_table_sizes(p, (uint64_t)engram_group_size(ctx->group),
                                            (uint64_t)engram_group_local_size(ctx->group),
                                            (uint64_t)ctx->cfg.fetch_slots,
                                            p->recv == ENGRAM_RECV_HOST ? engram_host_memory_bytes() : ENGRAM_MAX_BYTES,
                                            sizes);
    if (st != ENGRAM_OK)
        return st;
    if (p->recv == ENGRAM_RECV_HOST && !(ctx->caps.flags & ENGRAM_CAP_HOST_INITIATED))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "recv=HOST: transport %s posts gets only from GPU kernels; create the table with "
                            "recv=CUDA and fetch with engram_fetch_on_stream",
                            ctx->ops->name);
    if (ctx->cfg.mode == ENGRAM_MODE_HYBRID && !(ctx->caps.flags & ENGRAM_CAP_HYBRID))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "mode=hybrid: transport %s has no node-span regions",
                            ctx->ops->name);
    /* A GPU table maps the shards of its node's ranks into each of them
     * (engram/gpu/gpu_table.c): they must share a host. */
    st = p->recv == ENGRAM_RECV_CUDA ? engram_group_check_nodes(ctx->group, "recv=CUDA") : ENGRAM_OK;
    if (st == ENGRAM_OK && p->recv == ENGRAM_RECV_CUDA)
        st = engram_gpu_table_check(ctx, p);
    return st == ENGRAM_OK ? check_kinds(ctx, p) : st;
}

/* Step 1: local validation (and the sizes) plus the same params on every
 * rank; `st` is this rank's outcome so far (reading the caller's struct),
 * agreed on too. */
static engram_status_t agree_on_params(engram_context_t *ctx, const engram_table_params_t *p,
                                       engram_table_sizes_t *sizes, engram_status_t st)
{
    if (st == ENGRAM_OK)
        st = check_params(ctx, p, sizes);
    engram_table_params_t mine;
    memset(&mine, 0, sizeof(mine));
    if (st == ENGRAM_OK) {
        /* field by field into the zeroed record: the caller's padding
         * bytes are not params, and the ranks' records are compared byte
         * for byte */
        mine.size = p->size;
        mine.entries_per_rank = p->entries_per_rank;
        mine.row_bytes = p->row_bytes;
        mine.entries_per_token = p->entries_per_token;
        mine.max_tokens = p->max_tokens;
        mine.scale_packs = p->scale_packs;
        mine.recv = p->recv;
    }
    int n = engram_group_size(ctx->group);
    engram_table_params_t *all = calloc((size_t)n, sizeof(*all));
    if (all == NULL)
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate %d param records", n);
    st = engram_group_agree(ctx->group, st);
    if (st != ENGRAM_OK)
        goto out;
    st = engram_group_allgather(ctx->group, &mine, all, sizeof(mine));
    for (int r = 0; st == ENGRAM_OK && r < n; r++)
        if (memcmp(&all[r], &all[0], sizeof(mine)) != 0)
            st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_table_create: rank %d passed different params from rank 0",
                              r);
out:
    free(all);
    return st;
}

void engram_table_fill_shape(engram_table_t *t)
{
    const engram_context_t *ctx = t->ctx;
    int size = engram_group_size(ctx->group);
    int local = engram_group_local_size(ctx->group);
    bool hybrid = ctx->cfg.mode == ENGRAM_MODE_HYBRID;
    t->shape.entries_per_rank = t->params.entries_per_rank;
    t->shape.total_entries = t->sizes.total_entries;
    t->shape.rank_stride = t->shard->size;
    t->shape.row_stride = t->sizes.row_stride;
    t->shape.scaleup = hybrid ? (uint32_t)local : 1u;
    t->shape.hybrid = hybrid;
    t->shape.epr_log2 = engram_route_log2(t->params.entries_per_rank);
    t->num_peers = hybrid ? size / local : size;
}

static engram_status_t alloc_segment(const engram_config_t *cfg, uint64_t bytes, engram_segment_t **out)
{
    engram_segment_params_t sp = {
        .size = sizeof(sp), .bytes = bytes, .numa_node = (int)cfg->numa_node, .huge = cfg->huge_pages, .device = -1};
    return engram_host_segment_ops.alloc(&sp, out);
}

/* Whether the transport provides the shard's memory (step 3). Hybrid
 * tables keep host segments, which node-mates map by fd; huge_pages=on
 * keeps them too, as only host segments promise huge pages. */
static bool shard_from_transport(const engram_context_t *ctx)
{
    return ctx->ops->alloc_symmetric != NULL && ctx->cfg.mode != ENGRAM_MODE_HYBRID &&
           ctx->cfg.huge_pages != ENGRAM_HUGE_ON;
}

/* The shard's record while the transport owns its memory: addr is set
 * once alloc_symmetric returns, and the memory goes with the region's
 * dereg, so freeing the record frees only the record. */
static void transport_shard_free(engram_segment_t *seg)
{
    free(seg);
}

static const engram_segment_ops_t transport_shard_ops = {
    .size = sizeof(engram_segment_ops_t),
    .name = "transport",
    .kind = ENGRAM_MEM_HOST,
    .free = transport_shard_free,
};

static engram_status_t transport_shard_record(uint64_t bytes, engram_segment_t **out)
{
    engram_segment_t *seg = calloc(1, sizeof(*seg));
    if (seg == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate a shard record");
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    *seg = (engram_segment_t){.ops = &transport_shard_ops, .kind = ENGRAM_MEM_HOST,
                              .size = (bytes + page - 1) / page * page, .numa_node = -1, .device = -1};
    *out = seg;
    return ENGRAM_OK;
}

engram_status_t engram_table_alloc_slots(engram_table_t *t)
{
    int queues = t->ctx->num_queues;
    t->num_slots = (int)t->ctx->cfg.fetch_slots;
    t->slots = calloc((size_t)t->num_slots, sizeof(*t->slots));
    if (t->slots == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate %d fetch slots", t->num_slots);
    size_t pairs = (size_t)queues * (size_t)t->num_peers;
    for (int s = 0; s < t->num_slots; s++) {
        engram_fetch_slot_t *f = &t->slots[s];
        f->table = t;
        f->counters = calloc(pairs, sizeof(*f->counters));
        f->reqs = calloc(pairs, sizeof(*f->reqs));
        if (f->counters == NULL || f->reqs == NULL)
            return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate flush state for %zu (queue, peer) pairs", pairs);
        engram_status_t st = engram_handle_bind(f);
        if (st == ENGRAM_OK)
            st = engram_dedup_create((int)t->ctx->cfg.dedup, t->sizes.slot_rows, &f->dedup);
        if (st != ENGRAM_OK)
            return st;
    }
    return ENGRAM_OK;
}

void engram_table_free_slots(engram_table_t *t)
{
    for (int s = 0; t->slots != NULL && s < t->num_slots; s++) {
        engram_handle_unbind(&t->slots[s]);
        free(t->slots[s].counters);
        free(t->slots[s].reqs);
        engram_dedup_destroy(t->slots[s].dedup);
    }
    free(t->slots);
}

/* Step 2: everything this rank owns, before any exchange. */
static engram_status_t alloc_local(engram_table_t *t)
{
    const engram_config_t *cfg = &t->ctx->cfg;
    const engram_table_params_t *p = &t->params;
    const engram_table_sizes_t *sz = &t->sizes;
    engram_status_t st = shard_from_transport(t->ctx) ? transport_shard_record(sz->shard_bytes, &t->shard)
                                                     : alloc_segment(cfg, sz->shard_bytes, &t->shard);
    if (st != ENGRAM_OK)
        return st;
    engram_table_fill_shape(t);
    st = engram_table_alloc_slots(t);
    if (st != ENGRAM_OK)
        return st;
    st = alloc_segment(cfg, t->sizes.recv_bytes, &t->recv);
    if (st != ENGRAM_OK)
        return st;
    if (p->scale_packs > 0) {
        /* sizes checked in 64 bits (table_sizes.c), so size_t holds them */
        t->scales = calloc(1, sz->scales_bytes);
        if (t->scales == NULL)
            return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate the replicated scales (%llu entries x %u packs)",
                                (unsigned long long)t->shape.total_entries, p->scale_packs);
        st = alloc_segment(cfg, sz->scales_recv_bytes, &t->scales_recv);
        if (st != ENGRAM_OK)
            return st;
    }
    for (int s = 0; s < t->num_slots; s++) {
        t->slots[s].rows = (char *)t->recv->addr + (uint64_t)s * t->sizes.slot_row_bytes;
        t->slots[s].scales_out =
            t->scales_recv ? (uint32_t *)t->scales_recv->addr + (uint64_t)s * t->sizes.slot_scale_elems : NULL;
    }
    return ENGRAM_OK;
}

static void free_local(engram_table_t *t)
{
    if (t->scales_recv)
        t->scales_recv->ops->free(t->scales_recv);
    free(t->scales);
    if (t->recv)
        t->recv->ops->free(t->recv);
    engram_table_free_slots(t);
    if (t->shard)
        t->shard->ops->free(t->shard);
}

/* Step 3 for the shard: the transport's memory when step 2 left a
 * record for it (falling back to a host segment on every rank when the
 * transport declines), else the host segment registered. */
static engram_status_t shard_register(engram_context_t *ctx, engram_table_t *t)
{
    engram_reg_span_t span = t->shape.hybrid ? ENGRAM_REG_NODE_SPAN : ENGRAM_REG_RANK;
    engram_status_t st;
    if (t->shard->ops == &transport_shard_ops) {
        engram_segment_params_t sp = {.size = sizeof(sp), .bytes = t->shard->size,
                                      .numa_node = (int)ctx->cfg.numa_node, .huge = ctx->cfg.huge_pages,
                                      .device = -1};
        /* A transport may decline without a message: then the last error
         * is still an older one, which is no reason for this. */
        char before[ENGRAM_LAST_ERROR_BYTES];
        snprintf(before, sizeof(before), "%s", engram_last_error());
        st = ctx->ops->alloc_symmetric(ctx->transport, &sp, span, &t->shard_region, &t->shard->addr,
                                       &t->shard_flags);
        if (st != ENGRAM_ERR_UNSUPPORTED)
            return st;
        const char *why = strcmp(before, engram_last_error()) != 0 ? engram_last_error() : "no reason given";
        ENGRAM_INFO("transport %s cannot provide the shard's memory (%s); using a host segment", ctx->ops->name,
                    why);
        t->shard->ops->free(t->shard);
        t->shard = NULL;
        st = engram_group_agree(ctx->group, alloc_segment(&ctx->cfg, t->sizes.shard_bytes, &t->shard));
        if (st != ENGRAM_OK)
            return st;
        engram_table_fill_shape(t);
    }
    t->shard_flags = engram_context_reg_flags(ctx);
    return ctx->ops->reg_symmetric(ctx->transport, t->shard, span, &t->shard_region);
}

/* Steps 2-5 for rows received in host memory; t is NULL when st is not OK.
 * On failure t's contents are released (t itself is the caller's). */
static engram_status_t create_host(engram_context_t *ctx, engram_table_t *t, engram_status_t st)
{
    if (st == ENGRAM_OK)
        st = alloc_local(t);
    st = engram_group_agree(ctx->group, st);
    if (st != ENGRAM_OK)
        goto err_free_local;

    st = shard_register(ctx, t);
    if (st != ENGRAM_OK)
        goto err_free_local;
    engram_context_hold_progress(ctx, t->shard_flags, 1);
    st = engram_group_agree(ctx->group, ctx->ops->reg_local(ctx->transport, t->recv, &t->recv_region));
    if (st != ENGRAM_OK)
        goto err_dereg_shard;
    st = engram_group_barrier(ctx->group);
    if (st != ENGRAM_OK)
        goto err_dereg_recv;
    return ENGRAM_OK;

err_dereg_recv:
    ctx->ops->dereg(ctx->transport, t->recv_region);
err_dereg_shard:
    ctx->ops->dereg(ctx->transport, t->shard_region);
    engram_context_hold_progress(ctx, t->shard_flags, -1);
err_free_local:
    if (t != NULL)
        free_local(t);
    return st;
}

engram_status_t engram_table_create(engram_context_t *ctx, const engram_table_params_t *caller_params,
                                    engram_table_t **out)
{
    if (ctx == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_table_create: ctx and out must not be NULL");
    /* An older caller's struct lacks the fields with defaults. */
    engram_table_params_t in = {.size = sizeof(in), .recv = ENGRAM_RECV_HOST};
    const engram_table_params_t *params = &in;
    engram_table_sizes_t sizes;
    engram_status_t st = agree_on_params(
        ctx, params, &sizes,
        engram_struct_import(&in, sizeof(in), _Alignof(engram_table_params_t), caller_params,
                             ENGRAM_TABLE_PARAMS_MIN_SIZE, "table params"));
    if (st != ENGRAM_OK)
        return st;
    engram_table_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate a table");
    else {
        t->ctx = ctx;
        t->params = *params;
        t->sizes = sizes;
    }
    st = params->recv == ENGRAM_RECV_CUDA ? engram_gpu_table_create(ctx, t, st) : create_host(ctx, t, st);
    if (st != ENGRAM_OK) {
        free(t);
        return st;
    }
    if (params->recv == ENGRAM_RECV_CUDA) { /* its host mirror, if any, is a registered segment */
        t->shard_flags = engram_context_reg_flags(ctx);
        engram_context_hold_progress(ctx, t->shard_flags, 1);
    }
    /* dedup=auto weighs a repeat's saved get at what a get of this shard
     * costs: its owner's CPU serving it, or one-sided. */
    for (int s = 0; s < t->num_slots; s++)
        engram_dedup_set_costs(t->slots[s].dedup, (t->shard_flags & ENGRAM_REGION_OWNER_PROGRESS) != 0,
                               t->params.row_bytes);
    ctx->live_tables++;
    *out = t;
    return ENGRAM_OK;
}

engram_status_t engram_table_destroy(engram_table_t *t)
{
    if (t == NULL)
        return ENGRAM_OK;
    engram_context_t *ctx = t->ctx;
    /* Every collective of the teardown (this agreement, a transport's
     * barrier before it deregisters) shares one timeout_ms. */
    int64_t bound = engram_group_bound_begin(ctx->group);
    engram_status_t st = engram_table_check_idle(t, "engram_table_destroy");
    /* Every rank keeps its table if any rank cannot destroy; otherwise the
     * agreement is the barrier after which no peer reads this shard. */
    st = engram_group_agree(ctx->group, st);
    if (st == ENGRAM_ERR_BUSY) {
        engram_group_bound_end(ctx->group, bound);
        return st;
    }
    /* What the caller reads is this failure, not a later step's refusal. */
    char why[ENGRAM_LAST_ERROR_BYTES] = "";
    st = engram_context_torn_down_alone(ctx, "engram_table_destroy", st);
    if (st != ENGRAM_OK)
        snprintf(why, sizeof(why), "%s", engram_last_error());
    engram_fetch_drop_retired(t);
    if (t->params.recv == ENGRAM_RECV_CUDA) {
        engram_gpu_table_destroy(t);
    } else {
        if (t->recv_region)
            ctx->ops->dereg(ctx->transport, t->recv_region);
        ctx->ops->dereg(ctx->transport, t->shard_region);
        free_local(t);
    }
    engram_context_hold_progress(ctx, t->shard_flags, -1);
    ctx->live_tables--;
    free(t);
    engram_group_bound_end(ctx->group, bound);
    if (st != ENGRAM_OK)
        engram_last_error_restore(why);
    else /* the group may have failed in a transport's barrier since */
        st = engram_context_torn_down_alone(ctx, "engram_table_destroy", st);
    return st;
}

static engram_status_t check_rows_arg(const engram_table_t *t, const char *fn, const void *rows, uint64_t num_rows,
                                      uint32_t row_bytes)
{
    if (rows == NULL && num_rows > 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: rows is NULL", fn);
    if (row_bytes != t->params.row_bytes)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: rows of %u bytes, table rows are %u bytes", fn, row_bytes,
                            t->params.row_bytes);
    return ENGRAM_OK;
}

static engram_status_t check_scales_arg(const engram_table_t *t, const char *fn, const uint32_t *scales)
{
    if ((scales != NULL) != (t->params.scale_packs > 0))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: scales %s but the table has %u scale packs per row", fn,
                            scales ? "given" : "missing", t->params.scale_packs);
    return ENGRAM_OK;
}

engram_status_t engram_table_check_idle(engram_table_t *t, const char *fn)
{
    uint32_t ordered = t->params.recv == ENGRAM_RECV_CUDA ? engram_gpu_released_running(t) : 0;
    if (t->fetches_in_flight == 0)
        return ENGRAM_OK;
    if (ordered == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_BUSY, "%s: %d fetches of this table are in flight; wait for and release them",
                            fn, t->fetches_in_flight);
    return ENGRAM_ERROR(ENGRAM_ERR_BUSY,
                        "%s: %d fetches of this table are in flight, %u of them released in stream order and still "
                        "running (engram_table_poll_released with wait waits for them)",
                        fn, t->fetches_in_flight, ordered);
}

engram_status_t engram_table_check_writing(const engram_table_t *t, const char *fn)
{
    if (!t->writing)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "%s outside engram_write_begin .. engram_write_end", fn);
    return ENGRAM_OK;
}

engram_status_t engram_table_check_range(const engram_table_t *t, const char *fn, uint64_t first_row,
                                         uint64_t num_rows)
{
    const uint64_t epr = t->params.entries_per_rank;
    if (first_row > epr || num_rows > epr - first_row)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "%s: rows [%llu, %llu + %llu) pass the shard's %llu rows", fn,
                            (unsigned long long)first_row, (unsigned long long)first_row,
                            (unsigned long long)num_rows, (unsigned long long)epr);
    return ENGRAM_OK;
}

static engram_status_t check_write(engram_table_t *t, const void *rows, uint32_t row_bytes,
                                   const uint32_t *scales)
{
    engram_status_t st = engram_table_check_idle(t, "engram_write");
    if (st == ENGRAM_OK && t->writing)
        st = ENGRAM_ERROR(ENGRAM_ERR_STATE, "engram_write: engram_write_begin has begun a write; end it with "
                                            "engram_write_end");
    if (st == ENGRAM_OK)
        st = check_rows_arg(t, "engram_write", rows, 1, row_bytes);
    return st == ENGRAM_OK ? check_scales_arg(t, "engram_write", scales) : st;
}

/* Rows [first, first + n) of this rank's shard from rows[n][row_bytes]. */
static engram_status_t copy_rows(engram_table_t *t, uint64_t first, uint64_t n, const void *rows)
{
    if (t->params.recv == ENGRAM_RECV_CUDA)
        return engram_gpu_table_write_rows(t, first, n, rows);
    engram_rows_to_stride((char *)t->shard->addr + first * t->shape.row_stride, t->shape.row_stride, rows,
                          t->params.row_bytes, n);
    return ENGRAM_OK;
}

/* The closing step of a write, after every rank's arguments agreed, with
 * this rank's status so far: the scales, then the closing agreement (also
 * the barrier: no rank reads before every rank has written). */
static engram_status_t finish_write(engram_table_t *t, const uint32_t *scales, engram_status_t st)
{
    if (st == ENGRAM_OK && t->params.recv == ENGRAM_RECV_CUDA)
        st = engram_gpu_table_write_end(t, scales);
    else if (st == ENGRAM_OK && scales != NULL)
        memcpy(t->scales, scales, t->sizes.scales_bytes);
    st = engram_group_agree(t->ctx->group, st);
    t->writing = false;
    t->written = st == ENGRAM_OK;
    /* after the barrier: every local shard the cache copies is current */
    if (st == ENGRAM_OK && t->params.recv == ENGRAM_RECV_CUDA)
        st = engram_gpu_table_after_write(t);
    return st;
}

engram_status_t engram_write(engram_table_t *t, const void *rows, uint32_t row_bytes, const uint32_t *scales)
{
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_write: table is NULL");
    /* The agreement doubles as the opening barrier: no rank writes while a
     * peer may still be fetching from the old contents. */
    engram_status_t st = engram_group_agree(t->ctx->group, check_write(t, rows, row_bytes, scales));
    if (st != ENGRAM_OK)
        return st;
    t->written = false;
    return finish_write(t, scales, copy_rows(t, 0, t->params.entries_per_rank, rows));
}

engram_status_t engram_write_begin(engram_table_t *t)
{
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_write_begin: table is NULL");
    engram_status_t st = engram_table_check_idle(t, "engram_write_begin");
    if (st == ENGRAM_OK && t->writing)
        st = ENGRAM_ERROR(ENGRAM_ERR_STATE, "engram_write_begin: a write has begun already");
    st = engram_group_agree(t->ctx->group, st);
    if (st != ENGRAM_OK)
        return st;
    t->writing = true;
    t->written = false;
    t->write_status = ENGRAM_OK;
    return ENGRAM_OK;
}

engram_status_t engram_write_rows(engram_table_t *t, uint64_t first_row, uint64_t num_rows, const void *rows,
                                  uint32_t row_bytes)
{
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_write_rows: table is NULL");
    engram_status_t st = engram_table_check_writing(t, "engram_write_rows");
    if (st != ENGRAM_OK)
        return st;
    st = check_rows_arg(t, "engram_write_rows", rows, num_rows, row_bytes);
    if (st == ENGRAM_OK)
        st = engram_table_check_range(t, "engram_write_rows", first_row, num_rows);
    if (st == ENGRAM_OK && num_rows > 0)
        st = copy_rows(t, first_row, num_rows, rows);
    /* rows the caller meant to write are missing: every rank hears of it at engram_write_end */
    if (st != ENGRAM_OK && t->write_status == ENGRAM_OK)
        t->write_status = st;
    return st;
}

engram_status_t engram_write_end(engram_table_t *t, const uint32_t *scales)
{
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_write_end: table is NULL");
    engram_status_t st = t->writing ? check_scales_arg(t, "engram_write_end", scales)
                                    : ENGRAM_ERROR(ENGRAM_ERR_STATE, "engram_write_end without engram_write_begin");
    if (st == ENGRAM_OK && t->write_status != ENGRAM_OK)
        st = ENGRAM_ERROR(t->write_status, "engram_write_end: an engram_write_rows of this rank failed");
    /* Any failure ends the write unwritten on every rank: begin again. */
    st = engram_group_agree(t->ctx->group, st);
    if (st != ENGRAM_OK) {
        t->writing = false;
        return st;
    }
    return finish_write(t, scales, ENGRAM_OK);
}
