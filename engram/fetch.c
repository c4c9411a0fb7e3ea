/* Fetch: route every index, issue one get per row with the flush policy of
 * routing.h (per distinct row under dedup, engram/dedup.h), gather scales
 * locally, then flush each (queue, peer) that got requests; test/wait
 * complete those flush requests, then copy the repeated rows. */
#include <string.h>
#include <time.h>

#include "engram/fetch_handle.h"
#include "engram/gpu/gpu_table.h"
#include "engram/internal.h"
#include "engram/plugin/deadline.h"
#include "hal/log.h"

/* The slot's test: its flush requests, or its GPU work. */
static engram_status_t test_slot(engram_fetch_slot_t *f)
{
    if (f->table->params.recv == ENGRAM_RECV_CUDA)
        return engram_gpu_fetch_test(f);
    engram_status_t st = engram_fetch_test_flushes(f);
    if (st == ENGRAM_INPROGRESS)
        return st;
    if (st == ENGRAM_OK && f->deduping != NULL)
        engram_dedup_copy_rows(f->deduping, f->rows, f->table->params.row_bytes);
    ENGRAM_TRACE("fetch in slot %d complete: %s", (int)(f - f->table->slots), engram_status_str(st));
    f->completed = true;
    return st;
}

/* Retired slots on queues within [first_queue, first_queue + num_queues)
 * whose gets have completed become free. Only the caller's queues are
 * tested: the threading rules let it call on those alone. */
static void reclaim_retired(engram_table_t *t, int first_queue, int num_queues)
{
    for (int s = 0; atomic_load(&t->retired_slots) > 0 && s < t->num_slots; s++) {
        engram_fetch_slot_t *f = &t->slots[s];
        if (atomic_load(&f->state) != ENGRAM_SLOT_RETIRED || f->first_queue < first_queue ||
            f->first_queue + f->num_queues > first_queue + num_queues || test_slot(f) == ENGRAM_INPROGRESS)
            continue;
        t->retired_slots--;
        if (t->params.recv == ENGRAM_RECV_CUDA)
            engram_gpu_fetch_end(f);
        atomic_store(&f->state, ENGRAM_SLOT_FREE);
    }
}

engram_fetch_slot_t *engram_fetch_begin(engram_table_t *t, int first_queue, int num_queues, uint32_t num_tokens,
                                        unsigned flags)
{
    reclaim_retired(t, first_queue, num_queues);
    engram_fetch_slot_t *f = NULL;
    for (int s = 0; f == NULL && s < t->num_slots; s++) {
        int free_slot = ENGRAM_SLOT_FREE;
        if (atomic_compare_exchange_strong(&t->slots[s].state, &free_slot, ENGRAM_SLOT_LIVE))
            f = &t->slots[s];
    }
    if (f != NULL)
        engram_fetch_reset(f, first_queue, num_queues, num_tokens, flags);
    return f;
}

void engram_fetch_reset(engram_fetch_slot_t *f, int first_queue, int num_queues, uint32_t num_tokens, unsigned flags)
{
    engram_table_t *t = f->table;
    f->first_queue = first_queue;
    f->num_queues = num_queues;
    f->completed = false;
    f->timed_out = false;
    f->polled = false;
    f->captured = false;
    f->status = ENGRAM_OK;
    f->num_tokens = num_tokens;
    f->flags = flags;
    f->num_reqs = 0;
    f->bad_count = 0;
    f->cache_hits = 0;
    f->deduping = NULL;
    t->fetches_in_flight++;
    atomic_fetch_add_explicit(&t->stat_fetches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->stat_rows, (uint64_t)num_tokens * t->params.entries_per_token,
                              memory_order_relaxed);
}

/* The first token of the fetch's queue j (relative): the least t with
 * t * num_queues >= j * num_tokens. */
static uint64_t queue_start(const engram_fetch_slot_t *f, uint64_t j)
{
    return (j * f->num_tokens + (uint64_t)f->num_queues - 1) / (uint64_t)f->num_queues;
}

void engram_queue_walk_begin(const engram_fetch_slot_t *f, engram_queue_walk_t *w)
{
    w->queue = f->first_queue;
    w->next = queue_start(f, 1);
}

int engram_queue_walk_to(const engram_fetch_slot_t *f, engram_queue_walk_t *w, uint32_t token)
{
    while (token >= w->next) { /* past the last queue, next is num_tokens: never reached */
        w->queue++;
        w->next = queue_start(f, (uint64_t)(w->queue - f->first_queue) + 1);
    }
    return w->queue;
}

engram_status_t engram_fetch_get_row(engram_fetch_slot_t *f, int queue, const engram_route_t *r, engram_region_t *dst,
                                     uint64_t dst_off)
{
    engram_table_t *t = f->table;
    engram_context_t *ctx = t->ctx;
    uint32_t *counter = &f->counters[(uint64_t)queue * t->num_peers + r->peer];
    unsigned flags = engram_flush_next_flags(counter, ctx->flush_depth);
    ENGRAM_TRACE("get queue %d peer %u: remote offset %llu -> local offset %llu, %u bytes%s", queue, r->peer,
                 (unsigned long long)r->src_off, (unsigned long long)dst_off, t->params.row_bytes,
                 flags & ENGRAM_GET_AGGREGATE ? "" : ", doorbell");
    return ctx->ops->get(ctx->transport, queue, (int)r->peer, t->shard_region, r->src_off, dst, dst_off,
                         t->params.row_bytes, flags);
}

static void note_bad(engram_fetch_slot_t *f, uint32_t token, uint32_t entry)
{
    if (f->bad_count++ == 0) {
        f->first_bad_token = token;
        f->first_bad_entry = entry;
    }
}

static void gather_scales(engram_fetch_slot_t *f, uint32_t token, uint32_t entry, const uint32_t *src)
{
    const engram_table_params_t *p = &f->table->params;
    uint32_t packs = p->scale_packs;
    uint64_t col0 = (uint64_t)entry * packs; /* entries_per_token * scale_packs may pass 2^32 */
    if (f->flags & ENGRAM_FETCH_SCALES_COL_MAJOR) {
        uint64_t stride = engram_scales_col_stride(f->num_tokens);
        for (uint32_t k = 0; k < packs; k++)
            f->scales_out[(col0 + k) * stride + token] = src ? src[k] : 0;
    } else {
        uint32_t *dst = f->scales_out + ((uint64_t)token * p->entries_per_token) * packs + col0;
        for (uint32_t k = 0; k < packs; k++)
            dst[k] = src ? src[k] : 0;
    }
}

/* Issues every row; returns the first transport error (the fetch is then
 * failed, but rows already issued are still flushed by the caller). */
static engram_status_t issue_rows(engram_fetch_slot_t *f, const int64_t *indices)
{
    engram_table_t *t = f->table;
    const uint32_t ept = t->params.entries_per_token;
    const uint32_t row_bytes = t->params.row_bytes;
    const uint64_t recv_base = (uint64_t)((char *)f->rows - (char *)t->recv->addr);
    engram_queue_walk_t walk;
    engram_queue_walk_begin(f, &walk);
    for (uint32_t tok = 0; tok < f->num_tokens; tok++) {
        int queue = engram_queue_walk_to(f, &walk, tok);
        for (uint32_t e = 0; e < ept; e++) {
            uint64_t row = (uint64_t)tok * ept + e;
            int64_t idx = indices[row];
            engram_route_t r;
            if (!engram_route_index(&t->shape, idx, &r)) {
                note_bad(f, tok, e);
                memset((char *)f->rows + row * row_bytes, 0, row_bytes);
                continue;
            }
            if (f->deduping != NULL && engram_dedup_repeat(f->deduping, (uint32_t)row))
                continue; /* copied from its first position at completion */
            engram_status_t st = engram_fetch_get_row(f, queue, &r, t->recv_region, recv_base + row * row_bytes);
            if (st != ENGRAM_OK)
                return st;
        }
    }
    return ENGRAM_OK;
}

/* Scales come from the local replicated table, in a pass of their own
 * after the gets are out: it overlaps the transfers, and a tight loop with
 * prefetches keeps many of its cache misses in flight (interleaved with
 * the issue loop, each miss stalled it). */
static void gather_all_scales(engram_fetch_slot_t *f, const int64_t *indices)
{
    enum { AHEAD = 16 };
    const engram_table_t *t = f->table;
    const uint32_t ept = t->params.entries_per_token, packs = t->params.scale_packs;
    const uint64_t rows = (uint64_t)f->num_tokens * ept, total = t->shape.total_entries;
    for (uint64_t row = 0; row < rows; row++) {
        if (row + AHEAD < rows) {
            int64_t next = indices[row + AHEAD];
            if (next >= 0 && (uint64_t)next < total) /* bad indices never become addresses */
                __builtin_prefetch(t->scales + (uint64_t)next * packs);
        }
        int64_t idx = indices[row];
        bool bad = idx < 0 || (uint64_t)idx >= total;
        gather_scales(f, (uint32_t)(row / ept), (uint32_t)(row % ept), bad ? NULL : t->scales + (uint64_t)idx * packs);
    }
}

engram_status_t engram_fetch_flush(engram_fetch_slot_t *f)
{
    engram_table_t *t = f->table;
    engram_context_t *ctx = t->ctx;
    engram_status_t first = ENGRAM_OK;
    for (int q = f->first_queue; q < f->first_queue + f->num_queues; q++) {
        for (int p = 0; p < t->num_peers; p++) {
            uint32_t *c = &f->counters[(uint64_t)q * t->num_peers + p];
            if (!engram_flush_needed(*c))
                continue;
            *c = 0;
            engram_request_t *req;
            engram_status_t st = ctx->ops->flush(ctx->transport, q, p, &req);
            ENGRAM_TRACE("flush queue %d peer %d: %s", q, p, engram_status_str(st));
            if (st == ENGRAM_OK)
                f->reqs[f->num_reqs++] = req;
            else if (first == ENGRAM_OK)
                first = st;
        }
    }
    return first;
}

engram_status_t engram_fetch_check_indices(const char *fn, const int64_t *indices, uint32_t num_tokens)
{
    if (indices == NULL && num_tokens > 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: indices is NULL", fn);
    if (((uintptr_t)indices & (sizeof(*indices) - 1)) != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: indices %p is not 8-byte aligned", fn, (const void *)indices);
    return ENGRAM_OK;
}

static engram_status_t check_fetch(const engram_table_t *t, const int64_t *indices, uint32_t num_tokens,
                                   unsigned flags)
{
    if (t->params.recv == ENGRAM_RECV_CUDA)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_fetch: the table receives in GPU memory (recv=CUDA); "
                                                "use engram_fetch_on_stream with device indices");
    if (!t->written)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "engram_fetch before any engram_write on this table");
    if (num_tokens > t->params.max_tokens)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "engram_fetch: %u tokens exceed the receive buffer's max_tokens %u",
                            num_tokens, t->params.max_tokens);
    engram_status_t st = engram_fetch_check_indices("engram_fetch", indices, num_tokens);
    if (st != ENGRAM_OK)
        return st;
    if (flags & ENGRAM_FETCH_ORDER_AT_WAIT)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_fetch: ENGRAM_FETCH_ORDER_AT_WAIT orders a stream's work "
                                                "behind the rows, and engram_fetch has no stream (it is "
                                                "engram_fetch_on_stream's)");
    if (flags & ~ENGRAM_FETCH_SCALES_COL_MAJOR)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_fetch: unknown flags 0x%x", flags);
    return ENGRAM_OK;
}

int engram_table_queues(const engram_table_t *t)
{
    return t ? t->ctx->num_queues : 0;
}

engram_status_t engram_fetch_on_queues(engram_table_t *t, int first_queue, int num_queues, const int64_t *indices,
                                       uint32_t num_tokens, unsigned flags, engram_fetch_t **out)
{
    if (t == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_fetch: table and out must not be NULL");
    if (first_queue < 0 || num_queues < 1 || num_queues > t->ctx->num_queues - first_queue)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_fetch: queues [%d, %d+%d) are not within the table's %d",
                            first_queue, first_queue, num_queues, t->ctx->num_queues);
    engram_status_t st = check_fetch(t, indices, num_tokens, flags);
    if (st != ENGRAM_OK)
        return st;
    engram_fetch_slot_t *f = engram_fetch_begin(t, first_queue, num_queues, num_tokens, flags);
    if (f == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_BUSY, "engram_fetch: all %d receive slots are in flight (fetch_slots); "
                                             "wait and release one first", t->num_slots);
    f->deduping = engram_dedup_begin(f->dedup, (int)t->ctx->cfg.dedup, indices,
                                     num_tokens * t->params.entries_per_token, t->shape.total_entries);
    st = issue_rows(f, indices);
    if (f->deduping != NULL)
        atomic_fetch_add_explicit(&t->stat_repeats, f->deduping->num_copies, memory_order_relaxed);
    engram_status_t fst = engram_fetch_flush(f);
    if (f->scales_out)
        gather_all_scales(f, indices);
    f->status = st != ENGRAM_OK ? st : fst;
    *out = engram_handle_of(f);
    return ENGRAM_OK;
}

engram_status_t engram_fetch(engram_table_t *t, const int64_t *indices, uint32_t num_tokens, unsigned flags,
                             engram_fetch_t **out)
{
    return engram_fetch_on_queues(t, 0, t ? t->ctx->num_queues : 1, indices, num_tokens, flags, out);
}

engram_status_t engram_fetch_test_flushes(engram_fetch_slot_t *f)
{
    engram_context_t *ctx = f->table->ctx;
    int i = 0;
    while (i < f->num_reqs) {
        engram_status_t st = ctx->ops->test(ctx->transport, f->reqs[i]);
        if (st == ENGRAM_INPROGRESS) {
            i++;
            continue;
        }
        if (st != ENGRAM_OK && f->status == ENGRAM_OK)
            f->status = st;
        ENGRAM_TRACE("flush request complete (%d left): %s", f->num_reqs - 1, engram_status_str(st));
        ctx->ops->request_free(ctx->transport, f->reqs[i]);
        f->reqs[i] = f->reqs[--f->num_reqs];
    }
    return f->num_reqs > 0 ? ENGRAM_INPROGRESS : f->status;
}

engram_status_t engram_test(engram_fetch_t *fetch)
{
    engram_fetch_slot_t *f = engram_handle_lookup(fetch, "engram_test");
    return f == NULL ? ENGRAM_ERR_INVALID : test_slot(f);
}

static engram_status_t wait_complete(engram_fetch_slot_t *f)
{
    engram_context_t *ctx = f->table->ctx;
    bool serve = engram_context_needs_progress(ctx);
    engram_deadline_t deadline = engram_deadline_start(ctx->cfg.timeout_ms);
    for (unsigned spins = 0;;) {
        if (serve)
            (void)ctx->ops->progress(ctx->transport);
        engram_status_t st = test_slot(f);
        if (st != ENGRAM_INPROGRESS)
            return st;
        if (engram_spin_due(&spins, ENGRAM_SPINS_PER_CLOCK_READ) && engram_deadline_expired(&deadline)) {
            f->timed_out = true;
            return ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT, "engram_wait: %d flush requests still pending after %lld ms",
                                f->num_reqs, (long long)ctx->cfg.timeout_ms);
        }
    }
}

engram_status_t engram_wait(engram_fetch_t *fetch, const void **rows, const uint32_t **scales)
{
    engram_fetch_slot_t *f = engram_handle_lookup(fetch, "engram_wait");
    if (f == NULL)
        return ENGRAM_ERR_INVALID;
    int64_t t0 = f->completed ? 0 : engram_now_ns();
    engram_status_t st = f->completed ? f->status : wait_complete(f);
    if (t0 != 0)
        atomic_fetch_add_explicit(&f->table->stat_wait_ns, (uint64_t)(engram_now_ns() - t0), memory_order_relaxed);
    if (st != ENGRAM_OK)
        return st;
    if (rows)
        *rows = f->rows;
    if (scales)
        *scales = f->scales_out;
    if (f->bad_count > 0)
        return ENGRAM_ERROR(ENGRAM_ERR_BAD_INDEX,
                            "engram_wait: %llu indices out of range [0, %llu), first at token %u entry %u; "
                            "those rows are zero-filled",
                            (unsigned long long)f->bad_count, (unsigned long long)f->table->shape.total_entries,
                            f->first_bad_token, f->first_bad_entry);
    return ENGRAM_OK;
}

engram_status_t engram_fetch_buffers(engram_fetch_t *fetch, const void **rows, const uint32_t **scales)
{
    engram_fetch_slot_t *f = engram_handle_lookup(fetch, "engram_fetch_buffers");
    if (f == NULL)
        return ENGRAM_ERR_INVALID;
    /* Host receive slots are written by the gets: nothing orders a reader
     * behind them but a completed wait. */
    if (f->table->params.recv != ENGRAM_RECV_CUDA && !f->completed)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "engram_fetch_buffers: a recv=HOST fetch's rows are there only "
                                              "after engram_wait (or engram_test) has seen it complete");
    if (f->table->params.recv == ENGRAM_RECV_CUDA && !f->completed)
        (void)engram_gpu_fetch_order(f); /* a failure is the fetch's status, refused below */
    if (f->completed && f->status != ENGRAM_OK)
        return ENGRAM_ERROR(f->status, "engram_fetch_buffers: the fetch failed: %s", engram_status_str(f->status));
    if (rows)
        *rows = f->rows;
    if (scales)
        *scales = f->scales_out;
    return ENGRAM_OK;
}

engram_status_t engram_fetch_captured(const engram_fetch_t *fetch, int *captured)
{
    const engram_fetch_slot_t *f = engram_handle_lookup(fetch, "engram_fetch_captured");
    if (f == NULL)
        return ENGRAM_ERR_INVALID;
    if (captured == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_fetch_captured: captured must not be NULL");
    *captured = f->captured;
    return ENGRAM_OK;
}

engram_status_t engram_fetch_bad_indices(const engram_fetch_t *fetch, uint64_t *count, uint32_t *first_token,
                                         uint32_t *first_entry)
{
    const engram_fetch_slot_t *f = engram_handle_lookup(fetch, "engram_fetch_bad_indices");
    if (f == NULL)
        return ENGRAM_ERR_INVALID;
    uint64_t n = f->bad_count, first_row = 0;
    uint32_t token = f->first_bad_token, entry = f->first_bad_entry;
    /* captured: the last replay's, where the table's path tallies them */
    if (f->captured && engram_gpu_replay_bad(f, &n, &first_row) && n > 0) {
        token = (uint32_t)(first_row / f->table->params.entries_per_token);
        entry = (uint32_t)(first_row % f->table->params.entries_per_token);
    }
    if (count)
        *count = n;
    if (first_token)
        *first_token = n ? token : 0;
    if (first_entry)
        *first_entry = n ? entry : 0;
    return ENGRAM_OK;
}

engram_status_t engram_fetch_release(engram_fetch_t *fetch)
{
    if (fetch == NULL)
        return ENGRAM_OK; /* as free(NULL) */
    engram_fetch_slot_t *f = engram_handle_lookup(fetch, "engram_fetch_release");
    if (f == NULL)
        return ENGRAM_ERR_INVALID;
    engram_table_t *t = f->table;
    /* A fetch a wait already gave up on is tested once, not waited for again. */
    if (!f->completed)
        (void)(f->timed_out ? test_slot(f) : wait_complete(f));
    engram_handle_revoke(f); /* the handle is stale from here, whatever follows */
    t->fetches_in_flight--;
    if (!f->completed) {
        /* Its gets may still land in the slot: it is not reused until
         * they are known complete (engram_fetch_begin) or the table goes. */
        t->retired_slots++;
        atomic_store(&f->state, ENGRAM_SLOT_RETIRED);
        return ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT,
                            "engram_fetch_release: the fetch's gets had not completed within timeout_ms; it is "
                            "released, and its receive slot is retired until they complete or the table is "
                            "destroyed");
    }
    if (f->status == ENGRAM_OK)
        engram_table_count_done(t, f->num_tokens, f->bad_count, f->cache_hits);
    if (t->params.recv == ENGRAM_RECV_CUDA)
        engram_gpu_fetch_end(f);
    atomic_store(&f->state, ENGRAM_SLOT_FREE); /* last: the slot is someone else's from here */
    return ENGRAM_OK;
}

void engram_fetch_drop_retired(engram_table_t *t)
{
    engram_context_t *ctx = t->ctx;
    for (int s = 0; s < t->num_slots; s++) {
        engram_fetch_slot_t *f = &t->slots[s];
        if (atomic_load(&f->state) != ENGRAM_SLOT_RETIRED)
            continue;
        for (int i = 0; i < f->num_reqs; i++)
            ctx->ops->request_free(ctx->transport, f->reqs[i]);
        f->num_reqs = 0;
        t->retired_slots--;
        atomic_store(&f->state, ENGRAM_SLOT_FREE);
    }
}
