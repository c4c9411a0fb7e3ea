/* GPU fetch: the driver of a table's paths (fetch_path.h). A fetch issues
 * the other-nodes path, then the local path, on the caller's stream, and
 * queues the waits due at the call (the ordering rule in fetch_path.h);
 * test/wait run the paths' host-side progress, queue the waits still
 * pending, ask the GPU whether the fetch is done, then fold the paths'
 * outcomes.
 *
 * Completion: when the local path's kernel is the fetch's only GPU work it
 * signals completion itself (every block stores the fetch's seq into its
 * host-mapped report, gather.h): nothing is queued between two fetches'
 * kernels, so programmatic dependent launch chains them and a fetch stream
 * keeps its SMs beside a GEMM (with an event record between them, each
 * fetch's blocks would wait for GEMM blocks to retire). Otherwise (dedup's copy kernel follows, an
 * other-nodes path, host_gather's copies) an event is recorded behind the
 * last work: at the call, or behind the last wait, and for remote again
 * behind its scatter, which a test queues (gpu_remote.c); a captured fetch
 * records none (issue() says why). */
#include "engram/fetch_handle.h"
#include "engram/gpu/gpu_sync.h"
#include "engram/gpu/gpu_fetch.h"
#include "engram/gpu/gpu_state.h"
#include "engram/gpu/gpu_table.h"
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

/* The table's device made current while work is queued on a caller's
 * stream (a launch needs the stream's device current; the caller's may be
 * another GPU's): the caller's device to restore, or -1 when it was the
 * table's already (one cudaGetDevice, cheap beside the launch). */
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

/* Queues the pending waits of the paths in `which` (bits by path) and,
 * unless the stream is being captured, the slot's event behind the last
 * wait once none is pending; the table's device is current. */
static engram_status_t queue_waits_here(engram_gpu_table_t *g, int slot, bool captured, unsigned which)
{
    void *stream = g->slot_stream[slot];
    engram_status_t st = ENGRAM_OK;
    for (int p = 0; p < ENGRAM_GPU_NUM_PATHS; p++) {
        const unsigned bit = 1u << p;
        if (!(which & g->wait_pending[slot] & bit))
            continue;
        g->wait_pending[slot] &= (uint8_t)~bit;
        engram_status_t ws = g->path[p].ops->queue_wait(g->path[p].state, slot, stream);
        if (st == ENGRAM_OK)
            st = ws;
    }
    if (captured)
        return st; /* no event: see issue() */
    if (g->wait_pending[slot] == 0) {
        cudaError_t ce = cudaEventRecord(g->done[slot], (cudaStream_t)stream);
        if (st == ENGRAM_OK && ce != cudaSuccess)
            st = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "GPU fetch: recording the event behind the wait: %s",
                              cudaGetErrorString(ce));
    }
    if (st != ENGRAM_OK)
        engram_gpu_stream_sync((cudaStream_t)stream);
    return st;
}

/* The paths whose wait the ordering rule (fetch_path.h) queues at the
 * call: every one under capture, as no later host call would; else those
 * with ORDER_AT_CALL unless the caller asked ENGRAM_FETCH_ORDER_AT_WAIT. */
static unsigned waits_at_call(const engram_gpu_table_t *g, const engram_gpu_fetch_t *fx)
{
    unsigned due = 0;
    for (int p = 0; p < ENGRAM_GPU_NUM_PATHS; p++) {
        const engram_gpu_path_ops_t *ops = g->path[p].ops;
        if (ops != NULL && (fx->captured || ((ops->caps & ENGRAM_GPU_CAP_ORDER_AT_CALL) &&
                                             !(fx->f->flags & ENGRAM_FETCH_ORDER_AT_WAIT))))
            due |= 1u << p;
    }
    return due;
}

/* Issues the paths in issue order, then what the ordering rule queues at
 * the call, then the slot's event where one tells completion. */
static engram_status_t issue(engram_gpu_table_t *g, const engram_gpu_fetch_t *fx)
{
    const int slot = fx->slot;
    g->slot_seq[slot] = 0; /* the event tells completion unless the kernel signals */
    g->slot_stream[slot] = fx->stream;
    g->wait_pending[slot] = 0;
    for (int p = 0; p < ENGRAM_GPU_NUM_PATHS; p++) {
        const engram_gpu_path_t *path = &g->path[p];
        if (path->ops == NULL)
            continue;
        bool wait_due = false;
        engram_status_t st = path->ops->issue(path->state, g, fx, &wait_due);
        if (wait_due)
            g->wait_pending[slot] |= (uint8_t)(1u << p);
        if (st == ENGRAM_OK)
            continue;
        /* The other path's gets write into the slot: done before it is
         * free; then what any path queued before failing has run, and
         * nothing of the fetch is in flight. Not under capture: nothing of
         * a captured fetch runs at the call, and synchronizing a capturing
         * stream fails and invalidates the capture. */
        if (g->wait_pending[slot] != 0)
            (void)queue_waits_here(g, slot, fx->captured, ~0u);
        if (!fx->captured)
            engram_gpu_stream_sync((cudaStream_t)fx->stream);
        return st;
    }
    const unsigned due = waits_at_call(g, fx) & g->wait_pending[slot];
    if (due != 0)
        return queue_waits_here(g, slot, fx->captured, due); /* the rows in the stream's order from here */
    if (g->slot_seq[slot] != 0)
        return ENGRAM_OK; /* the local path's kernel signals */
    if (g->wait_pending[slot] != 0)
        return ENGRAM_OK; /* the event follows the last wait (queue_waits_here) */
    /* A captured fetch's event would never be queried (the replays do the
     * work, the host waits for nothing), and an event last recorded into a
     * graph is one CUDA refuses to query: a later fetch in the slot, tested
     * for a fault, would fail with "invalid argument". */
    if (fx->captured)
        return ENGRAM_OK;
    cudaError_t ce = cudaEventRecord(g->done[slot], (cudaStream_t)fx->stream);
    if (ce != cudaSuccess) {
        /* Without the event nothing tells when the slot is free again. */
        engram_gpu_stream_sync((cudaStream_t)fx->stream);
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
    const bool capturing = capture != cudaStreamCaptureStatusNone;
    if (capturing) {
        engram_status_t st = engram_gpu_path_require(g->path, ENGRAM_GPU_NUM_PATHS, ENGRAM_GPU_CAP_CAPTURE,
                                                     "engram_fetch_on_stream",
                                                     "a fetch on a stream capturing a CUDA graph", NULL);
        if (st != ENGRAM_OK)
            return st;
    }
    /* Reclaiming a retired slot queries its event, which capture forbids. */
    int retired = atomic_load(&t->retired_slots);
    if (capturing && retired > 0)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "engram_fetch_on_stream: stream is capturing a CUDA graph, but %d "
                                              "receive slots are retired by timed-out fetches; fetch once outside "
                                              "the capture (a warm-up) to reclaim them", retired);
    /* Outside capture, a slot released in stream order on this stream is
     * taken at once (CUDA orders this fetch after it); under capture only
     * a free one (a graph's replays may run after later fetches). */
    engram_fetch_slot_t *f = engram_fetch_begin(t, 0, t->ctx->num_queues, num_tokens, flags);
    if (f == NULL && !capturing)
        f = engram_gpu_take_ordered(t, stream, num_tokens, flags);
    /* then slots of other streams' fetches seen complete now */
    if (f == NULL && g->released.pending > 0 && !capturing) {
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
                            capturing ? "streams (taken under capture only once free)" : "other streams");
    }
    int slot = (int)(f - t->slots);
    const engram_gpu_fetch_t fx = {
        .f = f,
        .slot = slot,
        .indices = indices,
        .stream = stream,
        .captured = capturing,
        .may_signal = !capturing && g->path[ENGRAM_GPU_PATH_OTHER].ops == NULL,
    };
    f->status = issue(g, &fx);
    if (capturing) {
        /* Captured: the graph's replays do the work, not this call, so the
         * host has nothing to wait for (no event is recorded for it: test,
         * wait and release query none). Every wait was captured at the
         * call, as no later host call would be. Bad indices of replays are
         * zero-filled rows with no report. */
        f->completed = true;
        f->captured = true;
        *out = engram_handle_of(f);
        return ENGRAM_OK;
    }
    f->completed = f->status != ENGRAM_OK; /* nothing in flight after a failed launch */
    for (int p = 0; !f->completed && p < ENGRAM_GPU_NUM_PATHS; p++) {
        const engram_gpu_path_t *path = &g->path[p];
        if (path->ops == NULL || path->ops->issue_host == NULL)
            continue;
        engram_status_t st = path->ops->issue_host(path->state, g, f, slot);
        if (f->status == ENGRAM_OK)
            f->status = st;
    }
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

/* A signalling kernel that faulted never stores its seq: the context's
 * sticky error, which any call returns (here: querying the slot's event,
 * recorded or not), says so. A slot's event may have been recorded again
 * by a later fetch on the same stream (released in stream order): done
 * then still means this one is. */
cudaError_t engram_gpu_report_query(const engram_gpu_table_t *g, uint64_t seq, uint32_t report, int slot,
                                    bool errors)
{
    if (seq == 0)
        return engram_gpu_event_query(g->done[slot]);
    const engram_gpu_bad_t *r = engram_gpu_report(g, report);
    for (int b = 0; b < g->blocks; b++)
        if (__atomic_load_n(&r[b].seq, __ATOMIC_ACQUIRE) != seq) {
            cudaError_t ce = errors ? engram_gpu_event_query(g->done[slot]) : cudaSuccess;
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

/* Queues every pending wait of a fetch not captured (a captured one is
 * complete at the call: see fetch_here); the table's device is current. */
static engram_status_t fetch_order_here(engram_fetch_slot_t *f)
{
    engram_table_t *t = f->table;
    engram_gpu_table_t *g = t->gpu;
    int slot = (int)(f - t->slots);
    if (f->completed || !g->wait_pending[slot])
        return ENGRAM_OK;
    engram_status_t st = queue_waits_here(g, slot, false, ~0u);
    if (st != ENGRAM_OK) {
        f->completed = true;
        f->status = st;
    }
    return st;
}

/* From a call that has not made the table's device current
 * (engram_fetch_buffers, engram_fetch_release_ordered); test and wait
 * enter it once for all their CUDA work (engram_gpu_fetch_test). */
engram_status_t engram_gpu_fetch_order(engram_fetch_slot_t *f)
{
    engram_table_t *t = f->table;
    engram_gpu_table_t *g = t->gpu;
    if (f->completed || !g->wait_pending[f - t->slots])
        return ENGRAM_OK; /* nothing to queue: no device switch */
    int previous = device_enter(g);
    engram_status_t st = fetch_order_here(f);
    device_leave(previous);
    return st;
}

/* engram_gpu_fetch_test past its check, with the table's device current
 * (remote's progress launches its scatter on the fetch's stream). */
static engram_status_t fetch_test_here(engram_fetch_slot_t *f)
{
    engram_table_t *t = f->table;
    engram_gpu_table_t *g = t->gpu;
    int slot = (int)(f - t->slots);
    /* the waits first: what a path's progress queues (remote's scatter of
     * other nodes' rows) then follows every path's work on the slot (the
     * local path's copies) */
    engram_status_t st = fetch_order_here(f);
    if (st != ENGRAM_OK)
        return st;
    for (int p = 0; p < ENGRAM_GPU_NUM_PATHS; p++) {
        const engram_gpu_path_t *path = &g->path[p];
        if (path->ops != NULL && path->ops->progress != NULL &&
            path->ops->progress(path->state, g, f, slot) == ENGRAM_INPROGRESS)
            return ENGRAM_INPROGRESS;
    }
    /* A fetch's first test does not ask CUDA for a kernel fault (an event
     * query, which costs a good part of a kernel launch): a stream-ordered caller
     * tests each fetch once, right after issuing it. Every later test asks,
     * so a wait ends on a fault at its second poll. */
    cudaError_t ce = engram_gpu_report_query(g, g->slot_seq[slot], g->slot_report[slot], slot, f->polled);
    if (ce == cudaErrorNotReady) {
        f->polled = true;
        return ENGRAM_INPROGRESS;
    }
    if (ce != cudaSuccess) {
        f->completed = true;
        f->status = ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "GPU fetch %s failed: %s", engram_gpu_local(g)->ops->work,
                                 cudaGetErrorString(ce));
        return f->status;
    }
    st = f->status;
    for (int p = 0; p < ENGRAM_GPU_NUM_PATHS; p++) {
        const engram_gpu_path_t *path = &g->path[p];
        if (path->ops == NULL || path->ops->test == NULL)
            continue;
        st = path->ops->test(path->state, g, f, slot);
        if (st == ENGRAM_INPROGRESS)
            return st;
    }
    f->completed = true;
    return st;
}

engram_status_t engram_gpu_fetch_test(engram_fetch_slot_t *f)
{
    if (f->completed)
        return f->status;
    int previous = device_enter(f->table->gpu);
    engram_status_t st = fetch_test_here(f);
    device_leave(previous);
    return st;
}

void engram_gpu_fetch_uncapture(engram_fetch_slot_t *f)
{
    engram_table_t *t = f->table;
    engram_gpu_table_t *g = t->gpu;
    int previous = device_enter(g);
    /* A replay still queued would wait for a path that let go; the
     * graph's stream is not known here, so the device is waited for. */
    (void)engram_gpu_device_sync();
    for (int p = 0; p < ENGRAM_GPU_NUM_PATHS; p++) {
        const engram_gpu_path_t *path = &g->path[p];
        if (path->ops != NULL && path->ops->end_captured != NULL)
            path->ops->end_captured(path->state, (int)(f - t->slots));
    }
    device_leave(previous);
}

bool engram_gpu_replay_bad(const engram_fetch_slot_t *f, uint64_t *count, uint64_t *first_row)
{
    const engram_gpu_table_t *g = f->table->gpu;
    const engram_gpu_path_t *local = &g->path[ENGRAM_GPU_PATH_LOCAL];
    if (!f->captured || local->ops == NULL || local->ops->replay_bad == NULL)
        return false;
    local->ops->replay_bad(local->state, (int)(f - f->table->slots), count, first_row);
    return true;
}
