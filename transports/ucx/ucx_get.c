/* The data path: direct gets (memcpy from peers' memory UCX mapped here),
 * windowed active-message gets where no lane does RMA and endpoints report
 * peer failure (ucx_am_get.c),
 * ucp_get_nbx elsewhere, per-peer flushes, and the test that drives
 * progress. No thread progresses behind the caller. */
#include <stdlib.h>

#include "engram/log.h"
#include "transports/ucx/ucx_internal.h"

/* Runs from ucp_worker_progress of the queue's worker. */
static void get_done(void *request, ucs_status_t status, void *user_data)
{
    ucx_conn_t *conn = user_data;
    conn->queue->inflight--;
    conn->inflight--;
    if (status != UCS_OK && conn->get_error == UCS_OK)
        conn->get_error = status;
    ucp_request_free(request);
}

static engram_status_t check_queue(const engram_transport_t *t, int queue, int peer, const char *what)
{
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx %s: transport must not be NULL", what);
    if (queue < 0 || queue >= t->nqueues)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx %s: queue %d out of range (0..%d)", what, queue,
                            t->nqueues - 1);
    if (peer < 0 || peer >= t->shape.npeers)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx %s: peer %d out of range (0..%d)", what, peer,
                            t->shape.npeers - 1);
    return ENGRAM_OK;
}

#define PEER_CHECK_NS 20000000u /* 20 ms between pid checks of a slow peer */

/* Why an owner-served get times out, for the message: what the caller of
 * the rank that did not answer must change. */
#define OWNER_SERVES_HINT                                                                                    \
    ": over these UCX transports (no lane reads remote memory: tcp) a rank serves its peers' gets only while "  \
    "it is inside an engram call (a fetch, test, wait or engram group collective); one waiting in a plain "      \
    "torch.distributed.barrier() or computing serves none: wait in the engram group's barrier (Python "          \
    "group.barrier(), C engram_group_barrier)"

/* The doorbell of direct gets: the queue's held gets, copied in issue
 * order with the rows ahead prefetched. */
static void queue_ring(ucx_queue_t *q)
{
    engram_held_copy_run(q->held, q->nheld);
    q->nheld = 0;
}

void engram_ucx_ring_all(engram_transport_t *t)
{
    for (int i = 0; i < t->nqueues; i++)
        queue_ring(&t->queues[i]);
}

/* Gets in flight to live peers. A dead peer's gets may never complete
 * (without failure reports UCX does not fail them until close), so they
 * do not hold the window: active-message gets give their slots back. */
static unsigned live_inflight(engram_transport_t *t, ucx_queue_t *q)
{
    unsigned dead = 0;
    for (int r = 0; r < t->shape.size; r++) {
        if (q->conns[r].inflight == 0 || !engram_ucx_check_peer(t, r))
            continue;
        if (t->am_gets)
            engram_ucx_am_reclaim(&q->conns[r]);
        else
            dead += q->conns[r].inflight;
    }
    return q->inflight - dead;
}

/* Progresses the queue's worker until fewer than `window` gets are in
 * flight to live peers. */
static engram_status_t window_drain(engram_transport_t *t, ucx_queue_t *q, unsigned window, int queue)
{
    uint64_t deadline = 0, next_check = 0;
    while (q->inflight >= window) {
        if (ucp_worker_progress(q->worker) != 0)
            continue;
        engram_ucx_serve_others(t, q);
        uint64_t now = (uint64_t)engram_now_ns();
        if (deadline == 0) {
            deadline = now + t->timeout_ns;
            next_check = now + PEER_CHECK_NS;
        } else if (now > next_check) {
            if (live_inflight(t, q) < window)
                return ENGRAM_OK;
            next_check = now + PEER_CHECK_NS;
        } else if (now > deadline)
            return ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT, "ucx get: queue %d still had %u gets in flight after %llu ms%s",
                                queue, q->inflight, (unsigned long long)(t->timeout_ns / 1000000u),
                                t->target_progress ? OWNER_SERVES_HINT : "");
    }
    return ENGRAM_OK;
}

static engram_status_t get_locked(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                                  uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                                  unsigned flags)
{
    engram_status_t st;
    if (remote == NULL || local == NULL || !remote->symmetric)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx get: need a symmetric remote region and a local region");
    st = ENGRAM_DEBUG_CHECKS ? engram_get_bounds_status("ucx", remote_off, remote->remote_size, local_off,
                                                        local->local_size, len)
                             : ENGRAM_OK;
    if (st != ENGRAM_OK)
        return st;
    int rank = engram_transport_peer_rank(&t->shape, remote->span, peer);
    if (engram_ucx_peer_is_dead(t, rank))
        return ENGRAM_ERROR(ENGRAM_ERR_PEER, "ucx get: peer rank %d has failed", rank);
    if (len == 0)
        return ENGRAM_OK;
    if (t->quiesced[0] != '\0')
        return ENGRAM_ERROR(ENGRAM_ERR_PEER, "ucx get: every worker was destroyed after a failure (%s)",
                            t->quiesced);
    ucx_queue_t *q = &t->queues[queue];
    st = window_drain(t, q, t->window, queue);
    if (st != ENGRAM_OK)
        return st;

    ucx_conn_t *conn = &q->conns[rank];
    if (t->am_gets) {
        st = engram_ucx_am_get(conn, remote->remote_base[peer] + remote_off, local->local_base + local_off, len);
        if (st != ENGRAM_OK)
            return st;
        conn->posted++;
        if (!(flags & ENGRAM_GET_AGGREGATE))
            ucp_worker_progress(q->worker);
        return ENGRAM_OK;
    }
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH,
        .cb.send = get_done,
        .user_data = conn,
        .memh = local->memh,
    };
    ucs_status_ptr_t req = ucp_get_nbx(conn->ep, local->local_base + local_off, len,
                                       remote->remote_base[peer] + remote_off,
                                       remote->rkeys[(size_t)queue * (size_t)remote->npeers + (size_t)peer], &param);
    if (UCS_PTR_IS_ERR(req))
        return ENGRAM_ERROR(engram_ucx_peer_is_dead(t, rank) ? ENGRAM_ERR_PEER : ENGRAM_ERR_TRANSPORT,
                            "ucx get: ucp_get_nbx from rank %d failed: %s", rank,
                            ucs_status_string(UCS_PTR_STATUS(req)));
    conn->posted++;
    if (req != NULL) {
        q->inflight++;
        conn->inflight++;
    }
    /* The doorbell: without AGGREGATE the worker gets a chance to send. */
    if (!(flags & ENGRAM_GET_AGGREGATE))
        ucp_worker_progress(q->worker);
    return ENGRAM_OK;
}

static engram_status_t flush_locked(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    if (req == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx flush: req must not be NULL");
    engram_request_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx flush: out of memory for a request");
    int rank = engram_transport_peer_rank(&t->shape, t->shape.span, peer);
    ucx_queue_t *q = &t->queues[queue];
    queue_ring(q);
    r->conn = &q->conns[rank];
    r->next = q->requests;
    if (q->requests != NULL)
        q->requests->prev = r;
    q->requests = r;
    r->deadline_ns = (uint64_t)engram_now_ns() + t->timeout_ns;
    r->next_check_ns = (uint64_t)engram_now_ns() + PEER_CHECK_NS;
    r->result = ENGRAM_INPROGRESS;
    if (t->quiesced[0] != '\0') {
        r->result = ENGRAM_ERROR(ENGRAM_ERR_PEER, "ucx flush: every worker was destroyed after a failure (%s)",
                                 t->quiesced);
        *req = r;
        return ENGRAM_OK;
    }
    if (engram_ucx_peer_is_dead(t, rank)) {
        r->result = ENGRAM_ERROR(ENGRAM_ERR_PEER, "ucx flush: peer rank %d has failed", rank);
        *req = r;
        return ENGRAM_OK;
    }
    /* Direct gets are done by now; an endpoint that carried no
     * ucp_get_nbx since its last flush has nothing to flush. */
    if (r->conn->posted == 0) {
        *req = r;
        return ENGRAM_OK;
    }
    r->conn->posted = 0;
    if (t->am_gets) {
        r->am_seq = r->conn->am_issued;
        *req = r;
        return ENGRAM_OK;
    }
    ucp_request_param_t param = {0};
    ucs_status_ptr_t ucp_req = ucp_ep_flush_nbx(r->conn->ep, &param);
    if (UCS_PTR_IS_PTR(ucp_req))
        r->ucp_req = ucp_req;
    else if (UCS_PTR_IS_ERR(ucp_req))
        r->result = ENGRAM_ERROR(engram_ucx_peer_is_dead(t, rank) ? ENGRAM_ERR_PEER : ENGRAM_ERR_TRANSPORT,
                                 "ucx flush: flushing rank %d failed: %s", rank,
                                 ucs_status_string(UCS_PTR_STATUS(ucp_req)));
    *req = r;
    return ENGRAM_OK;
}

/* The outcome of a finished flush: its own status, else the first failed
 * get on the endpoint since the last flush. */
static engram_status_t flush_result(engram_transport_t *t, ucx_conn_t *conn, ucs_status_t flush_status)
{
    ucs_status_t us = flush_status != UCS_OK ? flush_status : conn->get_error;
    conn->get_error = UCS_OK;
    if (us == UCS_OK)
        return ENGRAM_OK;
    if (t->quiesced[0] != '\0')
        return ENGRAM_ERROR(ENGRAM_ERR_PEER, "ucx: gets from rank %d were cancelled: every worker was destroyed "
                            "after a failure (%s)", conn->rank, t->quiesced);
    if (engram_ucx_peer_is_dead(t, conn->rank))
        return ENGRAM_ERROR(ENGRAM_ERR_PEER, "ucx: peer rank %d failed before its gets completed (%s)", conn->rank,
                            ucs_status_string(us));
    return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx: gets from rank %d failed: %s", conn->rank,
                        ucs_status_string(us));
}

/* Ends a flush still open: its UCP request released (UCX may never finish
 * it; it releases it when it does, at the latest when close cancels the
 * endpoint), its active-message gets no longer awaited. */
static void request_end(engram_request_t *req)
{
    if (req->ucp_req != NULL)
        ucp_request_free(req->ucp_req);
    req->ucp_req = NULL;
    req->am_seq = 0;
}

static engram_status_t test_locked(engram_transport_t *t, engram_request_t *req)
{
    if (req->ucp_req == NULL && req->am_seq == 0) {
        /* Finished at flush time (nothing was outstanding, or it failed). */
        if (req->result == ENGRAM_INPROGRESS)
            req->result = flush_result(t, req->conn, UCS_OK);
        return req->result;
    }
    ucp_worker_progress(req->conn->queue->worker);
    ucs_status_t us = req->ucp_req != NULL ? ucp_request_check_status(req->ucp_req)
                      : engram_ucx_am_flushed(req->conn, req->am_seq) ? UCS_OK : UCS_INPROGRESS;
    if (us == UCS_INPROGRESS) {
        engram_ucx_serve_others(t, req->conn->queue);
        uint64_t now = (uint64_t)engram_now_ns();
        if (now >= req->next_check_ns) {
            req->next_check_ns = now + PEER_CHECK_NS;
            if (engram_ucx_check_peer(t, req->conn->rank)) {
                request_end(req);
                engram_ucx_am_reclaim(req->conn);
                req->conn->get_error = UCS_OK;
                req->result = ENGRAM_ERROR(ENGRAM_ERR_PEER, "ucx: peer rank %d exited before its gets completed",
                                           req->conn->rank);
                return req->result;
            }
        }
        if (now <= req->deadline_ns)
            return ENGRAM_INPROGRESS;
        return ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT, "ucx: flush of rank %d not complete after %llu ms%s",
                            req->conn->rank, (unsigned long long)(t->timeout_ns / 1000000u),
                            t->target_progress ? OWNER_SERVES_HINT : "");
    }
    request_end(req);
    req->result = flush_result(t, req->conn, us);
    return req->result;
}

/* The public entry points hold the queue for the call (see ucx_queue). */

engram_status_t engram_ucx_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                               uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                               unsigned flags)
{
    /* Direct: the peer's memory is mapped here. The queue is not taken:
     * its held gets are the caller's queue's alone. Unsigned compares fold
     * the negative cases in. */
    if (t != NULL && (unsigned)queue < (unsigned)t->nqueues && remote != NULL && local != NULL &&
        remote->direct != NULL && (unsigned)peer < (unsigned)remote->npeers && remote->direct[peer] != NULL &&
        !ENGRAM_DEBUG_CHECK(!engram_range_inside(remote_off, len, remote->remote_size) ||
                            !engram_range_inside(local_off, len, local->local_size))) {
        ucx_queue_t *q = &t->queues[queue];
        engram_held_copy_t *h = &q->held[q->nheld++];
        h->dst = local->local_base + local_off;
        h->src = remote->direct[peer] + remote_off;
        h->len = len;
        if (!(flags & ENGRAM_GET_AGGREGATE) || q->nheld == UCX_HELD_DEPTH)
            queue_ring(q);
        return ENGRAM_OK;
    }
    engram_status_t st = check_queue(t, queue, peer, "get");
    if (st != ENGRAM_OK)
        return st;
    engram_ucx_queue_enter(&t->queues[queue]);
    st = get_locked(t, queue, peer, remote, remote_off, local, local_off, len, flags);
    engram_ucx_queue_leave(&t->queues[queue]);
    return st;
}

engram_status_t engram_ucx_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    engram_status_t st = check_queue(t, queue, peer, "flush");
    if (st != ENGRAM_OK)
        return st;
    engram_ucx_queue_enter(&t->queues[queue]);
    st = flush_locked(t, queue, peer, req);
    engram_ucx_queue_leave(&t->queues[queue]);
    return st;
}

engram_status_t engram_ucx_test(engram_transport_t *t, engram_request_t *req)
{
    if (t == NULL || req == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx test: transport and request must not be NULL");
    engram_ucx_queue_enter(req->conn->queue);
    engram_status_t st = test_locked(t, req);
    engram_ucx_queue_leave(req->conn->queue);
    return st;
}

void engram_ucx_request_free(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    if (req == NULL)
        return;
    ucx_queue_t *q = req->conn->queue;
    engram_ucx_queue_enter(q);
    if (req->prev != NULL)
        req->prev->next = req->next;
    else
        q->requests = req->next;
    if (req->next != NULL)
        req->next->prev = req->prev;
    /* Still in flight: UCX completes it later and releases it itself. */
    if (req->ucp_req != NULL)
        ucp_request_free(req->ucp_req);
    engram_ucx_queue_leave(q);
    free(req);
}

void engram_ucx_requests_cancel(engram_transport_t *t, ucx_queue_t *q)
{
    (void)t;
    for (engram_request_t *r = q->requests; r != NULL; r = r->next) {
        if (r->ucp_req == NULL && r->am_seq == 0)
            continue;
        request_end(r); /* the worker's destruction ends it */
        r->result = ENGRAM_ERR_PEER;
    }
}
