/* The mlx5dv transport: open creates one RC QP per (queue, peer) on the
 * installed rings (a real NIC through verbs, or the software NIC model in
 * tests), exchanges QP addresses through the group and connects them;
 * the data path is mlx5_post.c, registration mlx5_region.c. */
#include "transports/mlx5dv/mlx5dv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/config.h"
#include "engram/plugin/config.h"
#include "engram/plugin/group.h"
#include "engram/log.h"
#include "transports/mlx5dv/mlx5_internal.h"

static bool mlx5_available(engram_group_t *group, const char **why)
{
    (void)group;
    return engram_mlx5_verbs_rings.available(why);
}

static void queues_free(engram_transport_t *t)
{
    for (int q = 0; q < t->nqueues; q++) {
        mlx5_queue_t *mq = &t->queues[q];
        for (int p = 0; mq->conns != NULL && p < t->shape.npeers; p++)
            if (mq->conns[p].qp != NULL)
                t->rings->qp_destroy(t->dev, mq->conns[p].qp);
        free(mq->conns);
        engram_free_list_destroy(&mq->reqs);
    }
    free(t->queues);
}

static engram_status_t queues_create(engram_transport_t *t, engram_mlx5_qp_addr_t *mine)
{
    t->queues = aligned_alloc(_Alignof(mlx5_queue_t), (size_t)MLX5_QUEUES * sizeof(mlx5_queue_t));
    if (t->queues == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv open: out of memory for %d queues", MLX5_QUEUES);
    memset(t->queues, 0, (size_t)MLX5_QUEUES * sizeof(mlx5_queue_t));
    t->nqueues = MLX5_QUEUES;
    for (int q = 0; q < t->nqueues; q++) {
        engram_free_list_init(&t->queues[q].reqs, sizeof(engram_request_t), MLX5_REQUEST_BLOCK);
        t->queues[q].conns = calloc((size_t)t->shape.npeers, sizeof(mlx5_conn_t));
        if (t->queues[q].conns == NULL)
            return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv open: out of memory for %d connections", t->shape.npeers);
        for (int p = 0; p < t->shape.npeers; p++) {
            mlx5_conn_t *c = &t->queues[q].conns[p];
            c->queue = q;
            c->peer = p;
            c->rank = engram_transport_peer_rank(&t->shape, t->shape.span, p);
            engram_mlx5_qp_addr_t *a = &mine[(size_t)q * (size_t)t->shape.npeers + (size_t)p];
            engram_status_t st = t->rings->qp_create(t->dev, MLX5_SQ_DEPTH, &c->qp, &c->rings, a);
            if (st != ENGRAM_OK)
                return st;
            a->rank = t->shape.rank;
        }
    }
    return ENGRAM_OK;
}

/* The peer index under which rank `rank` reaches this rank. */
static int my_peer_at(const engram_transport_t *t)
{
    return t->shape.span == ENGRAM_REG_NODE_SPAN ? t->shape.rank / t->shape.local_size : t->shape.rank;
}

static engram_status_t queues_connect(engram_transport_t *t, const engram_mlx5_qp_addr_t *all,
                                      const engram_mlx5_qp_addr_t *mine)
{
    size_t per_rank = (size_t)t->nqueues * (size_t)t->shape.npeers;
    for (int q = 0; q < t->nqueues; q++) {
        for (int p = 0; p < t->shape.npeers; p++) {
            mlx5_conn_t *c = &t->queues[q].conns[p];
            const engram_mlx5_qp_addr_t *remote =
                &all[(size_t)c->rank * per_rank + (size_t)q * (size_t)t->shape.npeers + (size_t)my_peer_at(t)];
            const engram_mlx5_qp_addr_t *local = &mine[(size_t)q * (size_t)t->shape.npeers + (size_t)p];
            /* The initiator may not have more reads out than the responder takes. */
            uint8_t rd_atom = local->rd_atom < remote->rd_atom ? local->rd_atom : remote->rd_atom;
            engram_status_t st = t->rings->qp_connect(t->dev, c->qp, local, remote, rd_atom);
            if (st != ENGRAM_OK)
                return st;
            engram_mlx5_conn_init(c, rd_atom);
        }
    }
    return ENGRAM_OK;
}

static engram_status_t check_shape(const engram_transport_t *t)
{
    if (t->shape.span == ENGRAM_REG_NODE_SPAN && t->shape.size % t->shape.local_size != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv open: hybrid mode needs whole nodes: %d ranks, %d per node",
                            t->shape.size, t->shape.local_size);
    return ENGRAM_OK;
}

/* Local setup: device, QPs and this rank's addresses, or the reason not. */
static engram_status_t open_local(engram_transport_t *t, const char *device, engram_mlx5_qp_addr_t *mine)
{
    engram_status_t st = check_shape(t);
    if (st == ENGRAM_OK)
        st = t->rings->open(device, t->shape.rank, &t->dev);
    if (st != ENGRAM_OK)
        return st;
    uint32_t rd = t->rings->max_rd_atomic(t->dev);
    t->rd_atom = rd > 255 ? 255 : rd;
    st = queues_create(t, mine);
    for (size_t i = 0; st == ENGRAM_OK && i < (size_t)t->nqueues * (size_t)t->shape.npeers; i++)
        mine[i].rd_atom = (uint8_t)t->rd_atom;
    return st;
}

static void transport_free(engram_transport_t *t)
{
    if (t->queues != NULL)
        queues_free(t);
    if (t->dev != NULL)
        t->rings->close(t->dev);
    free(t);
}

/* The keys mlx5dv declares (read through the view at open). */
static const engram_config_key_decl_t mlx5_keys[] = {
    {"mlx5dv_device", ENGRAM_CONFIG_STRING, "", "an RDMA device name (mlx5_0, ...)",
     "the device to open; empty = the first mlx5 device"},
};

/* A NULL view (tests) means the defaults. */
static engram_status_t read_config(const engram_config_view_t *cfg, int64_t *mode, int64_t *timeout_ms,
                                   const char **device)
{
    *mode = ENGRAM_MODE_DIRECT;
    *timeout_ms = ENGRAM_DEFAULT_TIMEOUT_MS;
    *device = "";
    if (cfg == NULL)
        return ENGRAM_OK;
    engram_status_t st = cfg->get_int(cfg, "mode", mode);
    if (st == ENGRAM_OK)
        st = cfg->get_int(cfg, "timeout_ms", timeout_ms);
    if (st == ENGRAM_OK)
        st = cfg->get_string(cfg, "mlx5dv_device", device);
    return st;
}

static engram_status_t mlx5_open(engram_group_t *group, const engram_config_view_t *cfg, engram_transport_t **out)
{
    if (group == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5dv open: group and out must not be NULL");
    int64_t mode, timeout_ms;
    const char *device;
    engram_status_t cst = read_config(cfg, &mode, &timeout_ms, &device);
    if (cst != ENGRAM_OK)
        return cst;
    engram_transport_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv open: out of memory");
    t->rings = &engram_mlx5_verbs_rings;
    t->group = group;
    t->shape = engram_transport_shape_of(group, mode);
    t->timeout_ns = (uint64_t)timeout_ms * 1000000u;
    size_t per_rank = (size_t)MLX5_QUEUES * (size_t)t->shape.npeers;
    engram_mlx5_qp_addr_t *mine = calloc(per_rank, sizeof(*mine));
    engram_mlx5_qp_addr_t *all = calloc(per_rank * (size_t)t->shape.size, sizeof(*all));
    engram_status_t st = mine == NULL || all == NULL
                             ? ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv open: out of memory for %zu QP addresses",
                                            per_rank * (size_t)t->shape.size)
                             : open_local(t, device, mine);
    /* Every rank takes part in each exchange, so none waits on one that gave up. */
    st = engram_group_agree_step(group, st, "create its QPs");
    if (st == ENGRAM_OK)
        st = engram_group_allgather(group, mine, all, per_rank * sizeof(*mine));
    if (st == ENGRAM_OK)
        st = engram_group_agree_step(group, queues_connect(t, all, mine), "connect its QPs");
    free(all);
    free(mine);
    if (st != ENGRAM_OK) {
        transport_free(t);
        return st;
    }
    *out = t;
    return ENGRAM_OK;
}

/* max_outstanding is per (queue, peer), one QP: the smallest QP window. */
static void mlx5_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    uint32_t window = 0;
    for (int q = 0; q < t->nqueues; q++)
        for (int p = 0; p < t->shape.npeers; p++)
            if (window == 0 || t->queues[q].conns[p].window < window)
                window = t->queues[q].conns[p].window;
    *caps = (engram_transport_caps_t){
        .flags = ENGRAM_CAP_HOST_INITIATED | ENGRAM_CAP_HYBRID | ENGRAM_CAP_CROSS_HOST,
        .read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST),
        .write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST),
        .max_queues = t->nqueues,
        .max_outstanding = (int)window,
    };
}

static void mlx5_describe(const engram_transport_t *t, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    char dev[256];
    t->rings->describe(t->dev, dev, sizeof(dev));
    uint32_t window = t->queues[0].conns[0].window, every = t->queues[0].conns[0].signal_every;
    snprintf(buf, len, "mlx5dv on %s: %d queues x %d peers (%s), RC QPs of %d WQEs, %u reads outstanding per QP "
             "(max_rd_atomic %u), every %u-th WQE signalled", dev, t->nqueues, t->shape.npeers,
             t->shape.span == ENGRAM_REG_NODE_SPAN ? "nodes through rail ranks" : "ranks", MLX5_SQ_DEPTH, window,
             t->rd_atom, every);
}

static void mlx5_close(engram_transport_t *t)
{
    if (t == NULL)
        return;
    while (t->regions != NULL)
        engram_mlx5_dereg(t, t->regions);
    transport_free(t);
}

const engram_transport_ops_t engram_mlx5dv_ops = {
    .name = "mlx5dv",
    .available = mlx5_available,
    .open = mlx5_open,
    .caps = mlx5_caps,
    .reg_symmetric = engram_mlx5_reg_symmetric,
    .reg_local = engram_mlx5_reg_local,
    .dereg = engram_mlx5_dereg,
    .get = engram_mlx5_get,
    .flush = engram_mlx5_flush,
    .test = engram_mlx5_test,
    .request_free = engram_mlx5_request_free,
    .describe = mlx5_describe,
    .close = mlx5_close,
    .config_keys = mlx5_keys,
    .num_config_keys = sizeof(mlx5_keys) / sizeof(mlx5_keys[0]),
};
