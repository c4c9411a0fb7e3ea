/* Gets as UCP active messages, where no lane reads remote memory itself
 * and the endpoints report peer failure (tcp; t->am_gets).
 *
 * Why not ucp_get_nbx there: UCP 1.13 (and UCX master) then emulates the
 * get with its own active messages, and the owner answers inside the
 * request's handler (rma_sw.c: ucp_get_req_handler -> ucp_request_send),
 * where any send error but NO_RESOURCE is ucs_fatal ("unexpected error:
 * Endpoint timeout", ucp_request.inl). A requester that dies with gets
 * on their way (its requests already in the owner's socket buffer) then
 * aborts the owner, whatever the endpoints' error handling mode.
 *
 * Here the requester sends {address, length, token} and the owner's
 * handler, run by ucp_worker_progress of the same queue's worker, answers
 * with ucp_am_send_nbx, whose send errors complete the request with a
 * status instead: a reply to a vanished requester is dropped. The owner
 * serves only bytes inside one of its symmetric regions as peers were told
 * them (anything else is answered with an error), and the requester
 * accepts a reply only for a get it has outstanding with that peer. */
#include <stdlib.h>
#include <string.h>

#include "engram/log.h"
#include "transports/ucx/ucx_internal.h"

enum { AM_GET_REQUEST = 1, AM_GET_REPLY = 2 };

#define SLOT_NONE UINT32_MAX

/* struct ucx_am_get_hdr (ucx_internal.h) goes with each request, and back
 * as the reply's header. */

/* The bytes [addr, +len) of one of this rank's symmetric regions as peers
 * were told them (base and remote_size), or NULL. */
static const char *owned_bytes(const engram_transport_t *t, uint64_t addr, uint64_t len)
{
    for (const engram_region_t *r = t->regions; r != NULL; r = r->next) {
        uint64_t base = (uint64_t)(uintptr_t)r->local_base;
        if (r->symmetric && r->local_base != NULL && addr >= base && addr - base <= r->remote_size &&
            len <= r->remote_size - (addr - base))
            return (const char *)(uintptr_t)addr;
    }
    return NULL;
}

static void reply_sent(void *request, ucs_status_t status, void *user_data)
{
    (void)status; /* failed: the requester is gone, nothing waits for it */
    free(user_data);
    ucp_request_free(request);
}

/* Owner side. Replies are eager, so their data always lands with the
 * reply's handler (no rendezvous to receive). */
static ucs_status_t serve_get(void *arg, const void *header, size_t header_length, void *data, size_t length,
                              const ucp_am_recv_param_t *param)
{
    (void)data;
    (void)length;
    (void)param;
    ucx_queue_t *q = arg;
    engram_transport_t *t = q->t;
    struct ucx_am_get_hdr req;
    if (header_length != sizeof(req))
        return UCS_OK;
    memcpy(&req, header, sizeof(req));
    if (req.rank < 0 || req.rank >= t->shape.size || q->conns == NULL || q->conns[req.rank].ep == NULL ||
        engram_ucx_peer_is_dead(t, req.rank))
        return UCS_OK;
    struct ucx_am_get_hdr *rep = malloc(sizeof(*rep));
    if (rep == NULL)
        return UCS_OK; /* the requester's flush ends by its timeout */
    const char *src = owned_bytes(t, req.addr, req.len);
    *rep = req;
    rep->rank = t->shape.rank;
    rep->status = src != NULL ? 0 : 1;
    ucp_request_param_t sp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = reply_sent,
        .user_data = rep,
        .flags = UCP_AM_SEND_FLAG_EAGER,
    };
    ucs_status_ptr_t sent = ucp_am_send_nbx(q->conns[req.rank].ep, AM_GET_REPLY, rep, sizeof(*rep), src,
                                            src != NULL ? req.len : 0, &sp);
    if (!UCS_PTR_IS_PTR(sent))
        free(rep); /* done, or failed at once: dropped */
    return UCS_OK;
}

static void slot_release(ucx_queue_t *q, uint32_t token)
{
    ucx_am_slot_t *s = &q->am_slots[token];
    s->conn->inflight--;
    q->inflight--;
    s->conn = NULL;
    s->next_free = q->am_free;
    q->am_free = token;
}

/* Requester side: a reply for a get still outstanding with that peer. */
static ucs_status_t land_get(void *arg, const void *header, size_t header_length, void *data, size_t length,
                             const ucp_am_recv_param_t *param)
{
    ucx_queue_t *q = arg;
    struct ucx_am_get_hdr rep;
    if (header_length != sizeof(rep))
        return UCS_OK;
    memcpy(&rep, header, sizeof(rep));
    if (rep.token >= q->am_nslots || rep.rank < 0 || rep.rank >= q->t->shape.size)
        return UCS_OK;
    ucx_am_slot_t *s = &q->am_slots[rep.token];
    ucx_conn_t *conn = &q->conns[rep.rank];
    if (s->conn != conn || s->hdr.seq != rep.seq)
        return UCS_OK; /* reclaimed when the peer was found dead */
    if (rep.status != 0 || length != s->hdr.len || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        if (conn->get_error == UCS_OK)
            conn->get_error = rep.status != 0 ? UCS_ERR_INVALID_ADDR : UCS_ERR_MESSAGE_TRUNCATED;
    } else
        memcpy(s->dst, data, length);
    slot_release(q, rep.token);
    return UCS_OK;
}

static ucs_status_t set_handler(ucp_worker_h worker, unsigned id, ucp_am_recv_callback_t cb, void *arg)
{
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = id,
        .cb = cb,
        .arg = arg,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
    };
    return ucp_worker_set_am_recv_handler(worker, &hp);
}

engram_status_t engram_ucx_am_init(engram_transport_t *t, ucx_queue_t *q)
{
    q->t = t;
    q->am_nslots = t->window;
    q->am_slots = calloc(q->am_nslots, sizeof(*q->am_slots));
    if (q->am_slots == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx open: out of memory for %u get slots (ucx_window)", t->window);
    for (uint32_t i = 0; i < q->am_nslots; i++)
        q->am_slots[i].next_free = i + 1 < q->am_nslots ? i + 1 : SLOT_NONE;
    q->am_free = 0;
    ucs_status_t us = set_handler(q->worker, AM_GET_REQUEST, serve_get, q);
    if (us == UCS_OK)
        us = set_handler(q->worker, AM_GET_REPLY, land_get, q);
    if (us != UCS_OK)
        return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx open: ucp_worker_set_am_recv_handler failed: %s",
                            ucs_status_string(us));
    return ENGRAM_OK;
}

engram_status_t engram_ucx_am_get(ucx_conn_t *conn, uint64_t remote_addr, char *dst, size_t len)
{
    ucx_queue_t *q = conn->queue;
    if (q->am_free == SLOT_NONE) /* the window keeps one free; this is a bug, not a state */
        return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx get: no free get slot on a queue (%u in flight)", q->inflight);
    uint32_t token = q->am_free;
    ucx_am_slot_t *s = &q->am_slots[token];
    /* The header stays in the slot: UCP reads it until the send completes. */
    s->hdr = (struct ucx_am_get_hdr){.addr = remote_addr, .len = len, .seq = ++conn->am_issued, .token = token,
                                     .rank = conn->queue->t->shape.rank};
    s->dst = dst;
    ucp_request_param_t sp = {0};
    ucs_status_ptr_t sent = ucp_am_send_nbx(conn->ep, AM_GET_REQUEST, &s->hdr, sizeof(s->hdr), NULL, 0, &sp);
    if (UCS_PTR_IS_ERR(sent))
        return ENGRAM_ERROR(engram_ucx_peer_is_dead(conn->t, conn->rank) ? ENGRAM_ERR_PEER : ENGRAM_ERR_TRANSPORT,
                            "ucx get: sending a get request to rank %d failed: %s", conn->rank,
                            ucs_status_string(UCS_PTR_STATUS(sent)));
    if (sent != NULL)
        ucp_request_free(sent); /* UCX releases it once sent */
    q->am_free = s->next_free;
    s->conn = conn;
    conn->inflight++;
    q->inflight++;
    return ENGRAM_OK;
}

bool engram_ucx_am_flushed(const ucx_conn_t *conn, uint64_t seq)
{
    if (conn->inflight == 0)
        return true;
    const ucx_queue_t *q = conn->queue;
    for (uint32_t i = 0; i < q->am_nslots; i++) {
        if (q->am_slots[i].conn == conn && q->am_slots[i].hdr.seq <= seq)
            return false;
    }
    return true;
}

void engram_ucx_am_reclaim(ucx_conn_t *conn)
{
    ucx_queue_t *q = conn->queue;
    for (uint32_t i = 0; conn->inflight > 0 && i < q->am_nslots; i++) {
        if (q->am_slots[i].conn == conn)
            slot_release(q, i);
    }
}
