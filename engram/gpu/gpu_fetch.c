/* GPU fetch: one kernel launch on the caller's stream; test/wait see it
 * complete and fold the blocks' bad-index tallies. When that kernel is the
 * fetch's only GPU work, it signals completion itself (every block stores
 * the fetch's seq into its host-mapped report): nothing is queued between
 * two fetches' kernels, so programmatic dependent launch chains them and
 * a fetch stream keeps its SMs beside a GEMM (with an event record between
 * them, each fetch's blocks waited for GEMM blocks to retire: 0.43 -> 0.82
 * of a contiguous H2D copy at 512 x 24 beside 8192^3 GEMMs on an H200,
 * docs/BENCHMARKS.md). Otherwise (dedup's copy kernel follows, rows of
 * other nodes, a GPU-initiated launcher, graph capture) an event is
 * recorded behind the last work. On more than one node, rows of other
 * nodes come through the host transport (gpu_remote.h) and the event moves
 * behind their scatter.
 *
 * With a GPU-initiated transport (fetch launcher) the launcher's issue
 * kernel goes first, so its gets fly while the gather kernel loads the
 * local rows, gathers the scales and applies the bad-index rule; the
 * launcher's wait is queued on the stream by the first test/wait, so work
 * the caller queues in between overlaps the transfer. The host-gather path
 * joins its copies to the stream at the call, or with
 * ENGRAM_FETCH_ORDER_AT_WAIT as late as that (gpu_host_gather.h). */
#include "engram/fetch_handle.h"
#include "engram/gpu/gpu_dedup.h"
#include "engram/gpu/gpu_fetch.h"
#include "engram/gpu/gpu_host_gather.h"
#include "engram/gpu/gpu_remote.h"
#include "engram/gpu/gpu_state.h"
#include "engram/gpu/gpu_table.h"
#include "engram/gpu/hot_cache.h"
#include "hal/log.h"

static engram_status_t check_args(const engram_table_t *t, const int64_t *indices, uint32_t num_tokens,
                                  unsigned flags)
{
    if (t->params.recv != ENGRAM_RECV_CUDA)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_fetch_on_stream: the table receives in host memory; "
                                                "use engram_fetch");
    if (!t->written)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "engram_fetch_on_stream before any engram_write on this table");
    if (num_tokens > t->params.max_tokens)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "engram_fetch_on_stream: %u tokens exceed max_tokens %u",
                            num_tokens, t->params.max_tokens);
    engram_status_t st = engram_fetch_check_indices("engram_fetch_on_stream", indices, num_tokens);
    if (st != ENGRAM_OK)
        return st;
    if (flags & ~(ENGRAM_FETCH_SCALES_COL_MAJOR | ENGRAM_FETCH_ORDER_AT_WAIT))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_fetch_on_stream: unknown flags 0x%x", flags);
    return ENGRAM_OK;
}

static engram_status_t issue_launcher(engram_fetch_slot_t *f, engram_gpu_table_t *g, int slot, const int64_t *indices,
                                      void *stream)
{
    const engram_table_t *t = f->table;
    engram_gpu_issue_t is = {
        .size = sizeof(is),
        .shape = &t->shape,
        .indices = indices,
        .num_tokens = f->num_tokens,
        .entries_per_token = t->params.entries_per_token,
        .row_bytes = t->params.row_bytes,
        .rows_off = (uint64_t)((char *)f->rows - g->base), /* the span begins with the receive region */
        .first_local_peer = g->first_peer,
        .local_peers = g->local_peers,
        .flush_depth = t->ctx->flush_depth,
        .first_queue = f->first_queue,
        .num_queues = f->num_queues,
        .slot = slot,
    };
    engram_status_t st = g->launcher->issue(g->launch, &is, stream);
    g->wait_pending[slot] = st == ENGRAM_OK;
    g->wait_stream[slot] = stream;
    return st;
}

/* The table's device made current while work is queued on a caller's
 * stream (a launch needs the stream's device current; the caller's may be
 * another GPU's): the caller's device to restore, or -1 when it was the
 * table's already (one cudaGetDevice, a few tens of ns). */
static int device_enter(const engram_gpu_table_t *g)
{
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current == g->device)
        return -1;
    return cudaSetDevice(g->device) == cudaSuccess ? current : -1;
}

static void device_leave(int previous)
{
    if (previous >= 0)
        (void)cudaSetDevice(previous);
}

/* Queues the launcher's wait (or the host-gather join) and, unless the
 * stream is being captured, the slot's event behind it; the table's
 * device is current. */
static engram_status_t queue_wait_here(engram_gpu_table_t *g, int slot, bool captured)
{
    g->wait_pending[slot] = false;
    engram_status_t st = g->host != NULL ? engram_gpu_host_gather_join(g, slot, g->wait_stream[slot])
                                         : g->launcher->wait(g->launch, slot, g->wait_stream[slot]);
    if (captured)
        return st; /* no event: see launch() */
    cudaError_t ce = cudaEventRecord(g->done[slot], (cudaStream_t)g->wait_stream[slot]);
    if (st == ENGRAM_OK && ce != cudaSuccess)
        st = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "GPU fetch: recording the event behind the wait: %s",
                          cudaGetErrorString(ce));
    if (st != ENGRAM_OK)
        cudaStreamSynchronize((cudaStream_t)g->wait_stream[slot]);
    return st;
}

/* queue_wait_here for a fetch not captured, from a call that has not made
 * the table's device current (test, wait, engram_fetch_buffers). */
static engram_status_t queue_wait(engram_gpu_table_t *g, int slot)
{
    int previous = device_enter(g);
    engram_status_t st = queue_wait_here(g, slot, false);
    device_leave(previous);
    return st;
}

static engram_status_t launch(engram_fetch_slot_t *f, engram_gpu_table_t *g, int slot, const int64_t *indices,
                              void *stream, bool capturing)
{
    const engram_table_t *t = f->table;
    cudaError_t ce = cudaSuccess;
    g->slot_seq[slot] = 0; /* the event tells completion unless the kernel signals */
    g->slot_stream[slot] = stream;
    if (g->host != NULL) {
        engram_status_t st = engram_gpu_host_gather_fetch(f, slot, indices, stream);
        g->wait_pending[slot] = st == ENGRAM_OK;
        g->wait_stream[slot] = stream;
        if (st == ENGRAM_OK && !(f->flags & ENGRAM_FETCH_ORDER_AT_WAIT))
            st = queue_wait_here(g, slot, false); /* the rows in the stream's order from here */
        return st;
    }
    /* a report entry of its own, so the slot may be taken again before the
     * host reads it (gpu_released.c); a graph's replays report to the sink */
    g->slot_report[slot] = capturing ? ENGRAM_RELEASED_NO_REPORT : engram_released_take_report(&g->released);
    if (g->launch != NULL)
        g->wait_pending[slot] = false;
    if (f->num_tokens > 0 && g->launch != NULL) {
        engram_status_t st = issue_launcher(f, g, slot, indices, stream);
        if (st != ENGRAM_OK)
            return st;
    }
    if (f->num_tokens > 0) {
        if (g->remote != NULL) {
            engram_status_t st = engram_gpu_remote_copy_indices(f, slot, indices, stream);
            if (st != ENGRAM_OK)
                return st;
        }
        engram_gpu_gather_args_t a = {
            .shape = t->shape,
            .indices = indices,
            .span = g->local_span,
            .peer_stride = g->peer_stride,
            .first_peer = g->first_peer,
            .local_peers = g->local_peers,
            .rows = f->rows,
            .row_bytes = t->params.row_bytes,
            .num_rows = f->num_tokens * t->params.entries_per_token,
            .entries_per_token = t->params.entries_per_token,
            .num_tokens = f->num_tokens,
            .scales = g->scales,
            .scales_out = f->scales_out,
            .packs = t->params.scale_packs,
            .col_major = (f->flags & ENGRAM_FETCH_SCALES_COL_MAJOR) != 0,
            .bad = engram_gpu_report(g, g->slot_report[slot]),
            .speculate = !capturing,
            .hot = g->hot != NULL ? g->hot->dev : (engram_hot_hash_t){0},
            .hot_rows = g->hot != NULL ? g->hot->rows_dev : NULL,
        };
        ce = (cudaError_t)engram_gpu_dedup_before(g->dedup, g->blocks, slot, &a, stream);
        /* The gather kernel is the fetch's last GPU work: it signals. */
        if (!capturing && g->launch == NULL && g->remote == NULL && a.first == NULL)
            a.seq = ++g->last_seq;
        if (ce == cudaSuccess)
            ce = (cudaError_t)engram_gpu_gather_launch(&a, g->blocks, stream);
        if (ce == cudaSuccess)
            ce = (cudaError_t)engram_gpu_dedup_after(&a, g->blocks, stream);
        if (ce != cudaSuccess) {
            engram_status_t st = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "engram_fetch_on_stream: kernel launch: %s",
                                              cudaGetErrorString(ce));
            /* The launcher's gets write into the slot: done before it is free. */
            if (g->launch != NULL && g->wait_pending[slot])
                (void)queue_wait_here(g, slot, capturing);
            cudaStreamSynchronize((cudaStream_t)stream);
            return st;
        }
        g->slot_seq[slot] = a.seq;
        if (a.seq != 0)
            return ENGRAM_OK;
    }
    if (g->launch != NULL && g->wait_pending[slot])
        return ENGRAM_OK; /* the event follows the launcher's wait (queue_wait_here) */
    /* A captured fetch's event would never be queried (the replays do the
     * work, the host waits for nothing), and an event last recorded into a
     * graph is one CUDA refuses to query: a later fetch in the slot, tested
     * for a fault, would fail with "invalid argument". */
    if (capturing)
        return ENGRAM_OK;
    ce = cudaEventRecord(g->done[slot], (cudaStream_t)stream);
    if (ce != cudaSuccess) {
        /* Without the event nothing tells when the slot is free again. */
        cudaStreamSynchronize((cudaStream_t)stream);
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "engram_fetch_on_stream: recording the event: %s",
                            cudaGetErrorString(ce));
    }
    return ENGRAM_OK;
}

/* engram_fetch_on_stream past its checks, with the table's device current. */
static engram_status_t fetch_here(engram_table_t *t, const int64_t *indices, uint32_t num_tokens, unsigned flags,
                                  void *stream, engram_fetch_t **out)
{
    engram_gpu_table_t *g = t->gpu;
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &capture) != cudaSuccess)
        capture = cudaStreamCaptureStatusNone;
    if (capture != cudaStreamCaptureStatusNone && g->host != NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "engram_fetch_on_stream: stream is capturing a CUDA graph, but this table's rows come "
                            "by gpu_path=host_gather, whose host threads are handed each fetch by the host (a graph "
                            "replays none of that); create tables fetched in graphs with gpu_path=uva");
    if (capture != cudaStreamCaptureStatusNone && g->remote != NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "engram_fetch_on_stream: stream is capturing a CUDA graph, but rows of other nodes "
                            "come through the host transport (routed on the host, which a graph cannot replay)");
    /* Reclaiming a retired slot queries its event, which capture forbids. */
    int retired = atomic_load(&t->retired_slots);
    if (capture != cudaStreamCaptureStatusNone && retired > 0)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "engram_fetch_on_stream: stream is capturing a CUDA graph, but %d "
                                              "receive slots are retired by timed-out fetches; fetch once outside "
                                              "the capture (a warm-up) to reclaim them", retired);
    /* Outside capture, a slot released in stream order on this stream is
     * taken at once (CUDA orders this fetch after it); under capture only
     * a free one (a graph's replays may run after later fetches). */
    engram_fetch_slot_t *f = engram_fetch_begin(t, 0, t->ctx->num_queues, num_tokens, flags);
    if (f == NULL && capture == cudaStreamCaptureStatusNone)
        f = engram_gpu_take_ordered(t, stream, num_tokens, flags);
    /* then slots of other streams' fetches seen complete now */
    if (f == NULL && g->released.pending > 0 && capture == cudaStreamCaptureStatusNone) {
        (void)engram_gpu_released_running(t);
        f = engram_fetch_begin(t, 0, t->ctx->num_queues, num_tokens, flags);
    }
    if (f == NULL) {
        int ordered = engram_gpu_slots_ordered(t);
        if (ordered == 0)
            return ENGRAM_ERROR(ENGRAM_ERR_BUSY, "engram_fetch_on_stream: all %d receive slots are in flight "
                                                 "(fetch_slots); wait and release one first", t->num_slots);
        return ENGRAM_ERROR(ENGRAM_ERR_BUSY,
                            "engram_fetch_on_stream: all %d receive slots are in flight (fetch_slots), %d of them "
                            "held by fetches released in stream order on %s, still running; "
                            "engram_table_poll_released with wait waits for them",
                            t->num_slots, ordered,
                            capture != cudaStreamCaptureStatusNone ? "streams (taken under capture only once free)"
                                                                   : "other streams");
    }
    int slot = (int)(f - t->slots);
    f->status = launch(f, g, slot, indices, stream, capture != cudaStreamCaptureStatusNone);
    if (capture != cudaStreamCaptureStatusNone) {
        /* Captured: the graph's replays do the work, not this call, so the
         * host has nothing to wait for (no event is recorded for it: test,
         * wait and release query none). The launcher's wait is captured
         * now, as no later host call would be. Bad indices of replays are
         * zero-filled rows with no report. */
        if (f->status == ENGRAM_OK && g->launch != NULL && g->wait_pending[slot])
            f->status = queue_wait_here(g, slot, true);
        f->completed = true;
        f->captured = true;
        *out = engram_handle_of(f);
        return ENGRAM_OK;
    }
    f->completed = f->status != ENGRAM_OK; /* nothing in flight after a failed launch */
    if (!f->completed && g->remote != NULL)
        f->status = engram_gpu_remote_issue(f, slot);
    *out = engram_handle_of(f);
    return ENGRAM_OK;
}

engram_status_t engram_fetch_on_stream(engram_table_t *t, const int64_t *indices, uint32_t num_tokens, unsigned flags,
                                       void *stream, engram_fetch_t **out)
{
    if (t == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_fetch_on_stream: table and out must not be NULL");
    engram_status_t st = check_args(t, indices, num_tokens, flags);
    if (st != ENGRAM_OK)
        return st;
    int previous = device_enter(t->gpu);
    st = fetch_here(t, indices, num_tokens, flags, stream, out);
    device_leave(previous);
    return st;
}

/* cudaEventQuery with this thread's capture mode relaxed: the query joins
 * no graph, but while a capture begun in global mode (torch.cuda.graph's
 * default) runs on this thread, or on any other, CUDA refuses it as
 * potentially unsafe and invalidates that capture. */
static cudaError_t event_query(cudaEvent_t event)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t ce = cudaEventQuery(event);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    return ce;
}

/* A signalling kernel that faulted never stores its seq: the context's
 * sticky error, which any call returns (here: querying the slot's event,
 * recorded or not), says so. A slot's event may have been recorded again
 * by a later fetch on the same stream (released in stream order): done
 * then still means this one is. */
cudaError_t engram_gpu_report_query(const engram_gpu_table_t *g, uint64_t seq, uint32_t report, int slot,
                                    bool errors)
{
    if (seq == 0)
        return event_query(g->done[slot]);
    const engram_gpu_bad_t *r = engram_gpu_report(g, report);
    for (int b = 0; b < g->blocks; b++)
        if (__atomic_load_n(&r[b].seq, __ATOMIC_ACQUIRE) != seq) {
            cudaError_t ce = errors ? event_query(g->done[slot]) : cudaSuccess;
            return ce == cudaSuccess ? cudaErrorNotReady : ce;
        }
    return cudaSuccess;
}

void engram_gpu_report_read(const engram_table_t *t, uint32_t report, uint32_t num_tokens, uint64_t *bad_count,
                            uint32_t *first_token, uint32_t *first_entry, uint64_t *hits)
{
    const engram_gpu_table_t *g = t->gpu;
    const engram_gpu_bad_t *r = engram_gpu_report(g, report);
    uint64_t count = 0, first = UINT64_MAX, h = 0;
    for (int b = 0; num_tokens > 0 && b < g->blocks; b++) {
        count += r[b].count;
        h += r[b].hits;
        if (r[b].first_row < first)
            first = r[b].first_row;
    }
    *bad_count = count;
    *hits = h;
    *first_token = count > 0 ? (uint32_t)(first / t->params.entries_per_token) : 0;
    *first_entry = count > 0 ? (uint32_t)(first % t->params.entries_per_token) : 0;
}

engram_status_t engram_gpu_fetch_order(engram_fetch_slot_t *f)
{
    engram_table_t *t = f->table;
    engram_gpu_table_t *g = t->gpu;
    int slot = (int)(f - t->slots);
    if (f->completed || !g->wait_pending[slot])
        return ENGRAM_OK;
    engram_status_t st = queue_wait(g, slot);
    if (st != ENGRAM_OK) {
        f->completed = true;
        f->status = st;
    }
    return st;
}

engram_status_t engram_gpu_fetch_test(engram_fetch_slot_t *f)
{
    if (f->completed)
        return f->status;
    engram_table_t *t = f->table;
    engram_gpu_table_t *g = t->gpu;
    int slot = (int)(f - t->slots);
    if (g->remote != NULL && engram_gpu_remote_test(f, slot) == ENGRAM_INPROGRESS)
        return ENGRAM_INPROGRESS;
    engram_status_t st = engram_gpu_fetch_order(f);
    if (st != ENGRAM_OK)
        return st;
    /* A fetch's first test does not ask CUDA for a kernel fault (an event
     * query, which costs about half a kernel launch): a stream-ordered caller
     * tests each fetch once, right after issuing it. Every later test asks,
     * so a wait ends on a fault at its second poll. */
    cudaError_t ce = engram_gpu_report_query(g, g->slot_seq[slot], g->slot_report[slot], slot, f->polled);
    if (ce == cudaErrorNotReady) {
        f->polled = true;
        return ENGRAM_INPROGRESS;
    }
    if (ce == cudaSuccess && g->host != NULL) {
        engram_status_t st = engram_gpu_host_gather_test(f, slot);
        f->completed = st != ENGRAM_INPROGRESS;
        return st;
    }
    f->completed = true;
    if (ce != cudaSuccess) {
        f->status = ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "GPU fetch %s failed: %s",
                                 g->host != NULL ? "copy" : "kernel", cudaGetErrorString(ce));
        return f->status;
    }
    engram_gpu_report_read(t, g->slot_report[slot], f->num_tokens, &f->bad_count, &f->first_bad_token,
                           &f->first_bad_entry, &f->cache_hits);
    return f->status;
}
