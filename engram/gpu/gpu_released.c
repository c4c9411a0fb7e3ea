/* GPU fetches ended in stream order (engram_fetch_release_ordered): the
 * slot goes to ORDERED with the fetch appended to its chain (released.h);
 * a later fetch on the same stream takes the slot at once, any other only
 * once the chain is seen complete; engram_table_poll_released hands out
 * the outcomes. This lets a caller queue fetch after fetch on one stream
 * with the rows' tensors dropped as it goes, never waiting on the host, as
 * a stream-ordered allocator reuses memory. */
#include "engram/fetch_handle.h"
#include "engram/gpu/gpu_fetch.h"
#include "engram/gpu/gpu_state.h"
#include "engram/gpu/gpu_table.h"
#include "engram/plugin/deadline.h"
#include "hal/log.h"

typedef struct reap_ctx {
    engram_table_t *t;
    bool errors; /* also ask CUDA for a fault of a signalling kernel (a call per incomplete fetch) */
} reap_ctx_t;

/* Folds a complete record's outcome from its report entry (and into the
 * table's counters). */
static bool rec_test(void *ctx, engram_released_rec_t *rec, bool known_complete)
{
    const reap_ctx_t *rc = ctx;
    engram_table_t *t = rc->t;
    engram_gpu_table_t *g = t->gpu;
    if (rec->settled)
        return true;
    cudaError_t ce = known_complete ? cudaSuccess
                                    : engram_gpu_report_query(g, rec->seq, rec->report, rec->slot, rc->errors);
    if (ce == cudaErrorNotReady)
        return false;
    engram_fetch_completion_t *out = &rec->out;
    if (ce != cudaSuccess) {
        out->status = ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "GPU fetch released in stream order failed: %s",
                                   cudaGetErrorString(ce));
        return true;
    }
    uint64_t hits = 0;
    engram_gpu_report_read(t, rec->report, rec->num_tokens, &out->bad_count, &out->first_bad_token,
                           &out->first_bad_entry, &hits);
    out->status = out->bad_count > 0 ? ENGRAM_ERR_BAD_INDEX : ENGRAM_OK;
    engram_table_count_done(t, rec->num_tokens, out->bad_count, hits);
    return true;
}

/* Folds slot s's complete records; the fetches folded no longer count as
 * in flight, and an ORDERED slot whose chain emptied is free. */
static void reap_slot(engram_table_t *t, int s, bool all_complete, bool errors)
{
    engram_gpu_table_t *g = t->gpu;
    engram_released_t *r = &g->released;
    uint32_t before = r->pending;
    reap_ctx_t rc = {.t = t, .errors = errors};
    bool empty = engram_released_reap_slot(r, s, all_complete, rec_test, &rc);
    t->fetches_in_flight -= (int)(before - r->pending);
    if (empty && atomic_load(&t->slots[s].state) == ENGRAM_SLOT_ORDERED)
        atomic_store(&t->slots[s].state, ENGRAM_SLOT_FREE);
}

/* errors: see reap_ctx_t; a poll that waits asks, so a faulted kernel
 * ends the wait instead of running out its timeout. */
static uint32_t reap_all(engram_table_t *t, bool errors)
{
    const engram_gpu_table_t *g = t->gpu;
    for (int s = 0; g->released.pending > 0 && s < t->num_slots; s++)
        if (!engram_released_chain_empty(&g->released, s))
            reap_slot(t, s, false, errors);
    return g->released.pending;
}

uint32_t engram_gpu_released_running(engram_table_t *t)
{
    return reap_all(t, true);
}

void engram_gpu_fetch_end(engram_fetch_slot_t *f)
{
    engram_table_t *t = f->table;
    engram_gpu_table_t *g = t->gpu;
    int slot = (int)(f - t->slots);
    if (f->captured)
        engram_gpu_fetch_uncapture(f);
    engram_released_put_report(&g->released, g->slot_report[slot]);
    g->slot_report[slot] = ENGRAM_RELEASED_NO_REPORT;
    reap_slot(t, slot, true, false); /* they ran before this fetch on its stream */
}

engram_fetch_slot_t *engram_gpu_take_ordered(engram_table_t *t, void *stream, uint32_t num_tokens, unsigned flags)
{
    const engram_gpu_table_t *g = t->gpu;
    const engram_released_t *r = &g->released;
    for (int s = 0; s < t->num_slots; s++) {
        int ordered = ENGRAM_SLOT_ORDERED;
        if (engram_released_chain_stream(r, s) != stream ||
            !atomic_compare_exchange_strong(&t->slots[s].state, &ordered, ENGRAM_SLOT_LIVE))
            continue;
        engram_fetch_reset(&t->slots[s], 0, t->ctx->num_queues, num_tokens, flags);
        return &t->slots[s];
    }
    return NULL;
}

int engram_gpu_slots_ordered(const engram_table_t *t)
{
    int n = 0;
    for (int s = 0; s < t->num_slots; s++)
        n += atomic_load(&t->slots[s].state) == ENGRAM_SLOT_ORDERED;
    return n;
}

engram_status_t engram_gpu_release_ordered(engram_fetch_slot_t *f, uint64_t cookie)
{
    engram_table_t *t = f->table;
    engram_gpu_table_t *g = t->gpu;
    int slot = (int)(f - t->slots);
    engram_status_t st = engram_gpu_path_require(g->path, ENGRAM_GPU_NUM_PATHS, ENGRAM_GPU_CAP_STREAM_ORDER,
                                                 "engram_fetch_release_ordered", "a fetch ended in stream order",
                                                 "use engram_fetch_release");
    if (st != ENGRAM_OK)
        return st;
    /* queues what the stream still needs (a launcher's wait); its outcome
     * is the reaping's, unless the caller has already seen it */
    st = engram_gpu_fetch_order(f);
    if (st == ENGRAM_OK)
        st = f->completed ? f->status : ENGRAM_INPROGRESS;
    engram_released_t *r = &g->released;
    engram_status_t added = engram_released_add(r, slot, g->slot_stream[slot], cookie, g->slot_seq[slot],
                                                g->slot_report[slot], f->num_tokens);
    if (added != ENGRAM_OK)
        return added;
    engram_handle_revoke(f); /* the handle is stale from here */
    g->slot_report[slot] = ENGRAM_RELEASED_NO_REPORT; /* the record holds it */
    if (st == ENGRAM_INPROGRESS) {
        atomic_store(&f->state, ENGRAM_SLOT_ORDERED);
        return ENGRAM_OK;
    }
    engram_released_rec_t *rec = engram_released_last(r, slot);
    rec->settled = true;
    rec->out.status = st;
    rec->out.bad_count = f->bad_count;
    rec->out.first_bad_token = f->bad_count ? f->first_bad_token : 0;
    rec->out.first_bad_entry = f->bad_count ? f->first_bad_entry : 0;
    if (st == ENGRAM_OK && f->bad_count > 0)
        rec->out.status = ENGRAM_ERR_BAD_INDEX;
    if (st == ENGRAM_OK)
        engram_table_count_done(t, f->num_tokens, f->bad_count, f->cache_hits);
    engram_released_put_report(r, rec->report);
    rec->report = ENGRAM_RELEASED_NO_REPORT;
    reap_slot(t, slot, true, false); /* complete: so is every fetch before it in the slot */
    atomic_store(&f->state, ENGRAM_SLOT_FREE);
    return ENGRAM_OK;
}

engram_status_t engram_gpu_poll_released(engram_table_t *t, engram_fetch_completion_t *out, uint32_t max, int wait,
                                         uint32_t *n, uint32_t *pending)
{
    engram_gpu_table_t *g = t->gpu;
    engram_released_t *r = &g->released;
    engram_deadline_t deadline = engram_deadline_start(t->ctx->cfg.timeout_ms);
    int64_t t0 = 0;
    for (unsigned spins = 0;;) {
        (void)reap_all(t, wait != 0);
        if (!wait || r->done > 0 || r->pending == 0 || max == 0)
            break;
        if (t0 == 0)
            t0 = engram_now_ns();
        if (engram_spin_due(&spins, ENGRAM_SPINS_PER_CLOCK_READ) && engram_deadline_expired(&deadline)) {
            atomic_fetch_add_explicit(&t->stat_wait_ns, (uint64_t)(engram_now_ns() - t0), memory_order_relaxed);
            return ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT,
                                "engram_table_poll_released: %u fetches released in stream order still running "
                                "after %lld ms",
                                r->pending, (long long)t->ctx->cfg.timeout_ms);
        }
    }
    if (t0 != 0)
        atomic_fetch_add_explicit(&t->stat_wait_ns, (uint64_t)(engram_now_ns() - t0), memory_order_relaxed);
    *n = engram_released_poll(r, out, max);
    if (pending != NULL)
        *pending = r->pending;
    return ENGRAM_OK;
}
