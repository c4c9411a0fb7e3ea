/* The data path: READ WQEs written straight into the send queue, the
 * doorbell deferred while gets carry AGGREGATE, CQEs polled by owner bit.
 * A QP has at most `window` WQEs outstanding (its max_rd_atomic and the
 * ring's slots); the WQE that fills the window and every signal_every-th
 * one ask for a CQE, so a full window always has a completion coming. */
#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <sched.h>
#include <time.h>

#include "engram/plugin/deadline.h"
#include "engram/log.h"
#include "transports/mlx5dv/mlx5_barrier.h"
#include "transports/mlx5dv/mlx5_cqe.h"
#include "transports/mlx5dv/mlx5_internal.h"
#include "transports/mlx5dv/mlx5_wqe.h"

void engram_mlx5_conn_init(mlx5_conn_t *c, uint32_t rd_atom)
{
    uint32_t slots = c->rings.sq_wqe_cnt - 1; /* one kept free, as every mlx5 SQ */
    c->window = rd_atom < slots ? rd_atom : slots;
    if (c->window == 0)
        c->window = 1;
    /* Half a window: a completion frees room while the other half is in flight. */
    c->signal_every = c->window / 2 ? c->window / 2 : 1;
}

/* A full window waits on the NIC, not on this CPU: every this many CQ
 * polls it reads the clock and yields the core to the peer's process. */
#define MLX5_SPINS_PER_YIELD 256u

static void *wqe_slot(const mlx5_conn_t *c, uint64_t n)
{
    return c->rings.sq_buf + ((n & (c->rings.sq_wqe_cnt - 1)) << MLX5_SEND_WQE_SHIFT);
}

static void conn_ring(engram_transport_t *t, mlx5_conn_t *c)
{
    if (c->rung == c->pi)
        return;
    t->rings->doorbell(&c->rings, (uint32_t)c->pi, wqe_slot(c, c->pi - 1));
    c->rung = c->pi;
}

static __attribute__((cold, noinline)) void conn_fail(mlx5_conn_t *c, const engram_mlx5_cqe_info_t *info)
{
    char what[160];
    engram_mlx5_cqe_describe(info, what, sizeof(what));
    if (c->error == ENGRAM_OK)
        c->error = ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "mlx5dv queue %d peer %d (rank %d, qpn 0x%x): %s", c->queue,
                                c->peer, c->rank, c->rings.qpn, what);
}

/* Consumes every CQE the NIC has written; a CQE for WQE n completes all
 * WQEs up to n (RC completes in order). */
static void conn_poll(mlx5_conn_t *c)
{
    uint32_t start = c->cq_ci;
    for (;;) {
        const uint8_t *cqe = c->rings.cq_buf + (size_t)(c->cq_ci & (c->rings.cqe_cnt - 1)) * sizeof(struct mlx5_cqe64);
        engram_mlx5_cqe_info_t info;
        engram_mlx5_cqe_kind_t kind = engram_mlx5_cqe_parse(cqe, c->cq_ci, c->rings.cqe_cnt, &info);
        if (kind == ENGRAM_MLX5_CQE_EMPTY)
            break;
        c->cq_ci++;
        /* wqe_counter is 16 bits: the distance from `done` recovers the count. */
        uint64_t through = c->done + (uint16_t)(info.wqe_counter - (uint16_t)c->done) + 1;
        if (through > c->pi) {
            info.syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
            kind = ENGRAM_MLX5_CQE_UNEXPECTED;
        }
        if (kind == ENGRAM_MLX5_CQE_OK) {
            c->done = c->done_ok = through;
            continue;
        }
        if (kind == ENGRAM_MLX5_CQE_UNEXPECTED && c->error == ENGRAM_OK) {
            c->error = ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "mlx5dv queue %d peer %d (qpn 0x%x): unexpected CQE "
                                    "opcode 0x%x for WQE %u (%llu posted)", c->queue, c->peer, c->rings.qpn,
                                    info.opcode, info.wqe_counter, (unsigned long long)c->pi);
            continue;
        }
        conn_fail(c, &info);
        if (through <= c->pi)
            c->done = through;
    }
    if (c->cq_ci != start) {
        /* The CQE reads complete before the consumer-index store that lets
         * the NIC overwrite those entries (a load -> store ordering). */
        engram_mlx5_from_device_barrier();
        c->rings.cq_dbrec[ENGRAM_MLX5_CQ_SET_CI] = htobe32(c->cq_ci & 0xffffff);
    }
}

/* Waits, polling the CQ, until the window has room; rings first so the
 * WQEs it waits on are announced. */
static engram_status_t conn_make_room(engram_transport_t *t, mlx5_conn_t *c)
{
    conn_ring(t, c);
    engram_deadline_t deadline = engram_deadline_start((int64_t)(t->timeout_ns / 1000000));
    for (unsigned spins = 0; c->pi - c->done >= c->window;) {
        conn_poll(c);
        if (c->error != ENGRAM_OK)
            return c->error;
        if (engram_spin_due(&spins, MLX5_SPINS_PER_YIELD)) {
            if (engram_deadline_expired(&deadline))
                return ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT, "mlx5dv queue %d peer %d: %llu WQEs outstanding (window "
                                    "%u), no completion within %llu ms", c->queue, c->peer,
                                    (unsigned long long)(c->pi - c->done), c->window,
                                    (unsigned long long)(t->timeout_ns / 1000000));
            sched_yield();
        }
    }
    return ENGRAM_OK;
}

/* Says which check a refused get failed; out of line so the get stays a
 * handful of compares. */
static __attribute__((cold, noinline)) engram_status_t get_refused(const engram_transport_t *t, int queue, int peer,
                                                                   const engram_region_t *remote,
                                                                   uint64_t remote_off, const engram_region_t *local,
                                                                   uint64_t local_off, size_t len)
{
    engram_status_t st = engram_get_args_status("mlx5dv", queue, t->nqueues, remote != NULL && local != NULL,
                                                remote != NULL && remote->npeers != 0,
                                                local != NULL && local->npeers == 0, peer,
                                                remote != NULL ? remote->npeers : 0);
    if (st != ENGRAM_OK)
        return st;
    if (len == 0 || len > INT32_MAX)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv get: length %zu outside [1, 2^31)", len);
    st = ENGRAM_DEBUG_CHECKS ? engram_get_bounds_status("mlx5dv", remote_off, remote->size, local_off, local->size, len)
                             : ENGRAM_OK;
    if (st != ENGRAM_OK)
        return st;
    return ENGRAM_ERROR(t->queues[queue].conns[peer].error, "mlx5dv get: queue %d peer %d is in error after an "
                        "earlier failure", queue, peer);
}

engram_status_t engram_mlx5_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                                uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                                unsigned flags)
{
    /* Unsigned compares fold the negative cases in. */
    if (__builtin_expect((unsigned)queue >= (unsigned)t->nqueues || remote == NULL || local == NULL ||
                             local->npeers != 0 || (unsigned)peer >= (unsigned)remote->npeers || len == 0 ||
                             len > INT32_MAX ||
                             ENGRAM_DEBUG_CHECK(!engram_range_inside(remote_off, len, remote->size) ||
                                                !engram_range_inside(local_off, len, local->size)) ||
                             t->queues[queue].conns[peer].error != ENGRAM_OK,
                         0))
        return get_refused(t, queue, peer, remote, remote_off, local, local_off, len);
    mlx5_conn_t *c = &t->queues[queue].conns[peer];
    if (c->pi - c->done >= c->window) {
        engram_status_t st = conn_make_room(t, c);
        if (st != ENGRAM_OK)
            return st;
    }
    bool signaled = ++c->unsignaled >= c->signal_every || c->pi + 1 - c->done >= c->window;
    if (signaled)
        c->unsignaled = 0;
    engram_mlx5_wqe_read(wqe_slot(c, c->pi), (uint16_t)c->pi, c->rings.qpn, signaled,
                         remote->remote_addr[peer] + remote_off, remote->rkey[peer],
                         (uint64_t)(uintptr_t)(local->local_base + local_off), local->lkey, (uint32_t)len);
    c->pi++;
    if (!(flags & ENGRAM_GET_AGGREGATE))
        conn_ring(t, c);
    return ENGRAM_OK;
}

engram_status_t engram_mlx5_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    if (t == NULL || req == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv flush: transport and req must not be NULL");
    if (queue < 0 || queue >= t->nqueues || peer < 0 || peer >= t->shape.npeers)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv flush: queue %d / peer %d out of range [0, %d) / [0, %d)",
                            queue, peer, t->nqueues, t->shape.npeers);
    mlx5_queue_t *q = &t->queues[queue];
    mlx5_conn_t *c = &q->conns[peer];
    if (c->error != ENGRAM_OK)
        return c->error;
    engram_status_t st = c->pi - c->done >= c->window ? conn_make_room(t, c) : ENGRAM_OK;
    if (st != ENGRAM_OK)
        return st;
    engram_request_t *r = engram_free_list_take(&q->reqs);
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv flush: out of memory for requests on queue %d", queue);
    engram_mlx5_wqe_fence_nop(wqe_slot(c, c->pi), (uint16_t)c->pi, c->rings.qpn);
    c->pi++;
    c->unsignaled = 0;
    conn_ring(t, c);
    r->conn = c;
    r->seq = c->pi;
    *req = r;
    return ENGRAM_OK;
}

engram_status_t engram_mlx5_test(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    if (req == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv test: req is NULL");
    mlx5_conn_t *c = req->conn;
    if (c->done_ok < req->seq)
        conn_poll(c);
    if (c->done_ok >= req->seq)
        return ENGRAM_OK;
    return c->error != ENGRAM_OK ? c->error : ENGRAM_INPROGRESS;
}

void engram_mlx5_request_free(engram_transport_t *t, engram_request_t *req)
{
    if (t == NULL || req == NULL)
        return;
    engram_free_list_put(&t->queues[req->conn->queue].reqs, req);
}
