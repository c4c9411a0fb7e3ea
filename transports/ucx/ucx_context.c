/* UCX transport lifetime: context, one worker per queue, endpoints to every
 * rank from every worker, and their orderly teardown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "engram/plugin/config.h"
#include "engram/log.h"
#include "transports/ucx/ucx.h"
#include "transports/ucx/ucx_internal.h"

bool engram_ucx_peer_is_dead(const engram_transport_t *t, int rank)
{
    return __atomic_load_n(&t->peer_dead[rank], __ATOMIC_RELAXED) != 0;
}

/* Runs inside ucp_worker_progress of the endpoint's worker. UCX then fails
 * the endpoint's outstanding requests, which is what turns a dead peer
 * into an error instead of a hang. */
static void conn_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    ucx_conn_t *conn = arg;
    if (__atomic_exchange_n(&conn->t->peer_dead[conn->rank], 1, __ATOMIC_RELAXED) == 0)
        ENGRAM_WARN("ucx: peer rank %d failed (%s); its gets and flushes now fail", conn->rank,
                    ucs_status_string(status));
}

static engram_status_t context_create(ucp_context_h *ctx, size_t estimated_eps)
{
    ucp_config_t *config;
    /* NULL prefix and file: UCX's own environment (UCX_TLS, UCX_NET_DEVICES,
     * ...) is what configures it. */
    ucs_status_t us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "ucx: reading the UCX configuration failed: %s",
                            ucs_status_string(us));
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS,
        /* AM: gets where no lane does RMA (ucx_am_get.c) */
        .features = UCP_FEATURE_RMA | UCP_FEATURE_AM,
        .estimated_num_eps = estimated_eps,
    };
    us = ucp_init(&params, config, ctx);
    ucp_config_release(config);
    if (us != UCS_OK)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "ucx: ucp_init failed: %s (check UCX_TLS / UCX_NET_DEVICES)",
                            ucs_status_string(us));
    return ENGRAM_OK;
}

static bool ucx_available(engram_group_t *group, const char **why)
{
    (void)group;
    static __thread char reason[256];
    ucp_context_h ctx;
    if (context_create(&ctx, 1) != ENGRAM_OK) {
        snprintf(reason, sizeof(reason), "%s", engram_last_error());
        *why = reason;
        return false;
    }
    ucp_cleanup(ctx);
    return true;
}

/* Closes every endpoint of the queue, bounded by the timeout. FORCE where
 * UCX allows it (peers may already be gone, and a flushing close would
 * wait on them) or the peer is dead; without failure reports a live
 * peer's endpoint is flushed, as UCX requires. */
static void queue_close_endpoints(engram_transport_t *t, ucx_queue_t *q)
{
    ucs_status_ptr_t *pending = calloc((size_t)t->shape.size, sizeof(*pending));
    for (int r = 0; r < t->shape.size; r++) {
        if (q->conns[r].ep == NULL)
            continue;
        bool force = t->err_mode_peer || engram_ucx_peer_is_dead(t, r);
        ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                     .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
        ucs_status_ptr_t req = ucp_ep_close_nbx(q->conns[r].ep, &param);
        q->conns[r].ep = NULL;
        if (!UCS_PTR_IS_PTR(req))
            continue;
        if (pending != NULL) {
            pending[r] = req;
            continue;
        }
        /* No room to track it: UCX releases it when it completes. */
        ucp_request_free(req);
    }
    if (pending == NULL)
        return;
    /* Bounded by time without progress: each close that finishes restarts
     * it, so a thousand endpoints closing slowly are not cut off; within a
     * teardown the group's bound stops it as well (engram_group_timeout is
     * what is left of it then). */
    int timeout_ms = engram_group_timeout(t->group);
    engram_deadline_t deadline = engram_deadline_start(timeout_ms);
    int unfinished = 0, first = -1;
    for (int r = 0; r < t->shape.size; r++) {
        if (pending[r] == NULL)
            continue;
        while (ucp_request_check_status(pending[r]) == UCS_INPROGRESS && !engram_deadline_expired(&deadline))
            ucp_worker_progress(q->worker);
        if (ucp_request_check_status(pending[r]) != UCS_INPROGRESS)
            deadline = engram_deadline_start(engram_group_timeout(t->group));
        else if (unfinished++ == 0)
            first = r;
        ucp_request_free(pending[r]);
    }
    if (unfinished > 0)
        ENGRAM_WARN("ucx: closing endpoints made no progress for %d ms; %d did not finish (the first to rank %d)",
                    timeout_ms, unfinished, first);
    free(pending);
}

/* Endpoints closed, then the worker destroyed: nothing is served after. */
static void queue_shutdown(engram_transport_t *t, ucx_queue_t *q)
{
    if (q->conns != NULL)
        queue_close_endpoints(t, q);
    /* Before the conns: gets a dead peer never answered are cancelled here,
     * and their callbacks still name their conn. */
    if (q->worker != NULL)
        ucp_worker_destroy(q->worker);
    q->worker = NULL;
}

/* A get reply queued in UCX still reads the owner's rows when it is sent,
 * closed endpoints included, and UCP 1.13 cannot force a close without
 * failure reports (shared memory): only a destroyed worker stops serving.
 * Its keys and requests go first; closing its endpoints may still serve,
 * while the memory is mapped. */
void engram_ucx_quiesce(engram_transport_t *t, const char *why)
{
    if (t->quiesced[0] != '\0')
        return;
    ENGRAM_WARN("ucx: %s, so peers may still have gets on their way to memory that is being deregistered; "
                "every worker is destroyed first (this transport now fails gets and flushes)", why);
    snprintf(t->quiesced, sizeof(t->quiesced), "%s", why);
    /* Held direct gets are dropped: at close their memory may be gone
     * (dereg copies them before it gets here). */
    for (int i = 0; i < t->nqueues; i++)
        t->queues[i].nheld = 0;
    engram_ucx_rkeys_destroy(t);
    for (int i = 0; i < t->nqueues; i++) {
        engram_ucx_queue_enter(&t->queues[i]);
        engram_ucx_requests_cancel(t, &t->queues[i]);
        queue_shutdown(t, &t->queues[i]);
        engram_ucx_queue_leave(&t->queues[i]);
    }
}

static void ucx_close(engram_transport_t *t)
{
    if (t == NULL)
        return;
    /* The caller may have freed it already: nothing is served after this. */
    if (t->regions != NULL)
        engram_ucx_quiesce(t, "a region was still registered at close");
    while (t->regions != NULL)
        engram_ucx_dereg(t, t->regions);
    for (int q = 0; q < t->nqueues; q++) {
        queue_shutdown(t, &t->queues[q]);
        free(t->queues[q].conns);
        free(t->queues[q].held);
        free(t->queues[q].am_slots);
    }
    free(t->queues);
    if (t->ctx != NULL)
        ucp_cleanup(t->ctx);
    engram_ucx_liveness_close(t);
    free(t->peer_dead);
    free(t);
}

static ucs_status_t ep_create(ucx_queue_t *q, ucx_conn_t *conn, const ucp_address_t *addr, bool err_mode_peer)
{
    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = addr,
        .err_mode = err_mode_peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
        .err_handler = {.cb = conn_error, .arg = conn},
    };
    return ucp_ep_create(q->worker, &params, &conn->ep);
}

/* Peer failure reports are asked for; the first endpoint (to another rank
 * where there is one: self says nothing about the fabric) tells whether
 * the selected transports can give them (UCX 1.13's shared-memory ones
 * cannot), and the rest follow, so every endpoint closes the same way. */
static engram_status_t conn_create(engram_transport_t *t, ucx_queue_t *q, ucx_conn_t *conn,
                                   const ucp_address_t *addr, bool first)
{
    ucs_status_t us = ep_create(q, conn, addr, first || t->err_mode_peer);
    if (us == UCS_OK && first)
        t->err_mode_peer = true;
    if (us == UCS_ERR_UNREACHABLE && first) {
        ENGRAM_INFO("ucx: the selected transports (UCX_TLS=%s) cannot report peer failure; dead peers on this "
                    "host are found by pid, others by the timeout", getenv("UCX_TLS") ? getenv("UCX_TLS") : "");
        us = ep_create(q, conn, addr, false);
    }
    if (us != UCS_OK) {
        conn->ep = NULL;
        return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx: no endpoint to rank %d: %s (UCX_TLS=%s)", conn->rank,
                            ucs_status_string(us), getenv("UCX_TLS") ? getenv("UCX_TLS") : "<unset>");
    }
    return ENGRAM_OK;
}

/* Every worker's address goes to every rank; worker q then connects to
 * worker q of each rank (itself included, so conns index by rank; gets
 * from the own region are a memcpy and never use that endpoint). */
static engram_status_t queue_connect(engram_transport_t *t, ucx_queue_t *q)
{
    ucp_address_t *addr;
    size_t addr_len;
    ucs_status_t us = ucp_worker_get_address(q->worker, &addr, &addr_len);
    if (us != UCS_OK)
        return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx: ucp_worker_get_address failed: %s", ucs_status_string(us));
    char *addrs;
    size_t stride, *lens;
    engram_status_t st = engram_ucx_allgather_blobs(t->group, addr, addr_len, &addrs, &stride, &lens);
    ucp_worker_release_address(q->worker, addr);
    if (st != ENGRAM_OK)
        return st;
    q->conns = calloc((size_t)t->shape.size, sizeof(*q->conns));
    if (q->conns == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx: out of memory for %d endpoints", t->shape.size);
        goto free_addrs;
    }
    for (int i = 0; i < t->shape.size; i++) {
        int r = (t->shape.rank + 1 + i) % t->shape.size;
        q->conns[r] = (ucx_conn_t){.queue = q, .t = t, .rank = r, .get_error = UCS_OK};
        st = conn_create(t, q, &q->conns[r], (const ucp_address_t *)(addrs + (size_t)r * stride),
                         q == &t->queues[0] && i == 0);
        if (st != ENGRAM_OK)
            goto free_addrs;
    }
free_addrs:
    free(addrs);
    free(lens);
    return st;
}

/* The keys ucx declares (read through the view at open). */
static const engram_config_key_decl_t ucx_keys[] = {
    {"ucx_window", ENGRAM_CONFIG_INT, "256", "1..65536", "outstanding gets per worker before progress is forced"},
};

static engram_status_t ucx_open(engram_group_t *group, const engram_config_view_t *cfg, engram_transport_t **out)
{
    if (group == NULL || cfg == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx open: group, cfg and out must not be NULL");
    int64_t mode, window, timeout_ms, num_qps;
    engram_status_t st = cfg->get_int(cfg, "mode", &mode);
    if (st == ENGRAM_OK)
        st = cfg->get_int(cfg, "ucx_window", &window);
    if (st == ENGRAM_OK)
        st = cfg->get_int(cfg, "timeout_ms", &timeout_ms);
    if (st == ENGRAM_OK)
        st = cfg->get_int(cfg, "num_qps", &num_qps);
    if (st != ENGRAM_OK)
        return st;
    engram_transport_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx open: out of memory");
    t->group = group;
    t->shape = engram_transport_shape_of(group, mode);
    t->window = (unsigned)window;
    t->timeout_ns = (uint64_t)timeout_ms * 1000000u;
    t->nqueues = num_qps > 0 ? (int)num_qps : UCX_DEFAULT_QUEUES;

    t->peer_dead = calloc((size_t)t->shape.size, sizeof(*t->peer_dead));
    t->queues = calloc((size_t)t->nqueues, sizeof(*t->queues));
    if (t->peer_dead == NULL || t->queues == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx open: out of memory for %d queues", t->nqueues);
        goto close_t;
    }
    /* Every rank must agree on the queue count: worker q talks to worker q. */
    int *nq = malloc((size_t)t->shape.size * sizeof(*nq));
    if (nq == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx open: out of memory");
        goto close_t;
    }
    st = engram_group_allgather(group, &t->nqueues, nq, sizeof(*nq));
    for (int r = 0; st == ENGRAM_OK && r < t->shape.size; r++) {
        if (nq[r] != t->nqueues)
            st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx open: rank %d uses %d queues, this rank %d; set num_qps "
                              "the same everywhere", r, nq[r], t->nqueues);
    }
    free(nq);
    if (st != ENGRAM_OK)
        goto close_t;
    st = engram_ucx_liveness_init(t);
    if (st != ENGRAM_OK)
        goto close_t;
    st = context_create(&t->ctx, (size_t)t->shape.size * (size_t)t->nqueues);
    if (st != ENGRAM_OK)
        goto close_t;
    for (int q = 0; q < t->nqueues; q++) {
        t->queues[q].held = malloc(UCX_HELD_DEPTH * sizeof(*t->queues[q].held));
        if (t->queues[q].held == NULL) {
            st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx open: out of memory for queue %d's held gets", q);
            goto close_t;
        }
        /* One thread at a time per queue (the transport contract). */
        ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                  .thread_mode = UCS_THREAD_MODE_SINGLE};
        ucs_status_t us = ucp_worker_create(t->ctx, &wp, &t->queues[q].worker);
        if (us != UCS_OK) {
            t->queues[q].worker = NULL;
            st = ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "ucx open: ucp_worker_create for queue %d failed: %s", q,
                              ucs_status_string(us));
            goto close_t;
        }
        st = engram_ucx_am_init(t, &t->queues[q]);
        if (st != ENGRAM_OK)
            goto close_t;
        st = queue_connect(t, &t->queues[q]);
        if (st != ENGRAM_OK)
            goto close_t;
    }
    char lanes[512];
    t->target_progress = !engram_ucx_lanes(t, lanes, sizeof(lanes));
    /* Only endpoints that report peer failure make UCP's emulated get fail
     * a send, which it turns into an abort (ucx_am_get.c); on shared memory
     * a send to a dead peer never fails, and UCP's own emulation is faster
     * (ucx_rate_bench, UCX_TLS=posix, measures the get rate). */
    t->am_gets = t->target_progress && t->err_mode_peer;
    engram_ucx_describe(t, lanes, sizeof(lanes));
    ENGRAM_INFO("ucx: rank %d of %d, %d queues: %s", t->shape.rank, t->shape.size, t->nqueues, lanes);
    *out = t;
    return ENGRAM_OK;
close_t:
    ucx_close(t);
    return st;
}

static void ucx_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    *caps = (engram_transport_caps_t){
        .flags = ENGRAM_CAP_HOST_INITIATED | ENGRAM_CAP_HYBRID | ENGRAM_CAP_CROSS_HOST |
                 (t->target_progress ? ENGRAM_CAP_OWNER_PROGRESS : 0),
        .read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST),
        .write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST),
        .max_queues = t->nqueues,
        .max_outstanding = (int)t->window,
    };
}

void engram_ucx_queue_enter(ucx_queue_t *q)
{
    while (__atomic_exchange_n(&q->busy, 1, __ATOMIC_ACQUIRE) != 0)
        ;
}

void engram_ucx_queue_leave(ucx_queue_t *q)
{
    __atomic_store_n(&q->busy, 0, __ATOMIC_RELEASE);
}

void engram_ucx_serve_others(engram_transport_t *t, const ucx_queue_t *self)
{
    if (!t->target_progress)
        return;
    for (int i = 0; i < t->nqueues; i++) {
        ucx_queue_t *q = &t->queues[i];
        if (q == self || __atomic_exchange_n(&q->busy, 1, __ATOMIC_ACQUIRE) != 0)
            continue;
        if (q->worker != NULL)
            ucp_worker_progress(q->worker);
        engram_ucx_queue_leave(q);
    }
}

engram_status_t engram_ucx_progress(engram_transport_t *t)
{
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ucx progress: transport must not be NULL");
    unsigned events = 0;
    for (int i = 0; i < t->nqueues; i++) {
        engram_ucx_queue_enter(&t->queues[i]);
        if (t->queues[i].worker != NULL)
            events += ucp_worker_progress(t->queues[i].worker);
        engram_ucx_queue_leave(&t->queues[i]);
    }
    /* Nothing to serve: with more ranks than cores the one that has work
     * gets the core (owner progress is a busy loop otherwise). */
    if (events == 0 && t->target_progress)
        sched_yield();
    return ENGRAM_OK;
}

const engram_transport_ops_t engram_ucx_ops = {
    .name = "ucx",
    .available = ucx_available,
    .open = ucx_open,
    .caps = ucx_caps,
    .reg_symmetric = engram_ucx_reg_symmetric,
    .reg_local = engram_ucx_reg_local,
    .dereg = engram_ucx_dereg,
    .get = engram_ucx_get,
    .flush = engram_ucx_flush,
    .test = engram_ucx_test,
    .request_free = engram_ucx_request_free,
    .describe = engram_ucx_describe,
    .close = ucx_close,
    .progress = engram_ucx_progress,
    .alloc_symmetric = engram_ucx_alloc_symmetric,
    .config_keys = ucx_keys,
    .num_config_keys = sizeof(ucx_keys) / sizeof(ucx_keys[0]),
};
