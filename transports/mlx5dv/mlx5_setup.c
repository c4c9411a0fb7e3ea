/* The rings of a real ConnectX NIC through rdma-core: device open by name
 * (config mlx5dv_device, empty = the first mlx5 device), PD, memory
 * registration, RC QPs taken INIT -> RTR -> RTS, and mlx5dv_init_obj to
 * hand the send queue, doorbell record, BlueFlame register and CQ buffer
 * to the data path. Port 1; RoCE peers are addressed by their first
 * RoCE v2 GID, InfiniBand peers by LID. */
#include <endian.h>
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/plugin/config.h"
#include "engram/log.h"
#include "transports/mlx5dv/mlx5_barrier.h"
#include "transports/mlx5dv/mlx5_psn.h"
#include "transports/mlx5dv/mlx5_ring.h"

#define PORT 1

struct engram_mlx5_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_port_attr port;
    struct ibv_device_attr attr;
    int gid_index; /* -1: InfiniBand, addressed by LID */
    union ibv_gid gid;
    char name[IBV_SYSFS_NAME_MAX];
};

struct engram_mlx5_qp {
    struct ibv_qp *qp;
    struct ibv_cq *cq;
};

struct engram_mlx5_mr {
    struct ibv_mr *mr;
};

/* The named mlx5 device, or the first one when name is empty. */
static struct ibv_device *find_device(struct ibv_device **list, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (mlx5dv_is_supported(list[i]) && (name[0] == '\0' || strcmp(ibv_get_device_name(list[i]), name) == 0))
            return list[i];
    return NULL;
}

static bool verbs_available(const char **why)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    bool found = list != NULL && find_device(list, n, "") != NULL;
    if (list != NULL)
        ibv_free_device_list(list);
    if (!found && why != NULL)
        *why = "no mlx5 device";
    return found;
}

/* RoCE: the first RoCE v2 GID of the port. */
static engram_status_t pick_gid(engram_mlx5_dev_t *d)
{
    d->gid_index = -1;
    if (d->port.link_layer != IBV_LINK_LAYER_ETHERNET)
        return ENGRAM_OK;
    for (int i = 0; i < d->port.gid_tbl_len; i++) {
        struct ibv_gid_entry e;
        if (ibv_query_gid_ex(d->ctx, PORT, (uint32_t)i, &e, 0) == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2) {
            d->gid_index = i;
            d->gid = e.gid;
            return ENGRAM_OK;
        }
    }
    return ENGRAM_ERROR(ENGRAM_ERR_NOT_FOUND, "mlx5dv: %s port %d has no RoCE v2 GID (is an IP address "
                        "configured on its netdev?)", d->name, PORT);
}

static engram_status_t verbs_open(const char *want, int rank, engram_mlx5_dev_t **out)
{
    (void)rank;
    if (want == NULL)
        want = "";
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOT_FOUND, "mlx5dv: ibv_get_device_list failed: %s", strerror(errno));
    struct ibv_device *dev = find_device(list, n, want);
    engram_status_t st;
    engram_mlx5_dev_t *d = calloc(1, sizeof(*d));
    if (dev == NULL || d == NULL) {
        st = d == NULL ? ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv open: out of memory")
                       : ENGRAM_ERROR(ENGRAM_ERR_NOT_FOUND, "mlx5dv: no mlx5 device%s%s%s", want[0] ? " named '" : "",
                                      want, want[0] ? "' (config mlx5dv_device)" : "");
        goto free_list;
    }
    snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(dev));
    d->ctx = ibv_open_device(dev);
    if (d->ctx == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: ibv_open_device(%s) failed: %s", d->name, strerror(errno));
        goto free_dev;
    }
    if (ibv_query_device(d->ctx, &d->attr) != 0 || ibv_query_port(d->ctx, PORT, &d->port) != 0) {
        st = ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: querying %s port %d failed: %s", d->name, PORT, strerror(errno));
        goto close_ctx;
    }
    if (d->port.state != IBV_PORT_ACTIVE) {
        st = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "mlx5dv: %s port %d is not active (state %d)", d->name, PORT,
                          (int)d->port.state);
        goto close_ctx;
    }
    st = pick_gid(d);
    if (st != ENGRAM_OK)
        goto close_ctx;
    d->pd = ibv_alloc_pd(d->ctx);
    if (d->pd == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: ibv_alloc_pd on %s failed: %s", d->name, strerror(errno));
        goto close_ctx;
    }
    ibv_free_device_list(list);
    *out = d;
    return ENGRAM_OK;
close_ctx:
    ibv_close_device(d->ctx);
free_dev:
    free(d);
free_list:
    ibv_free_device_list(list);
    return st;
}

static void verbs_close(engram_mlx5_dev_t *d)
{
    ibv_dealloc_pd(d->pd);
    ibv_close_device(d->ctx);
    free(d);
}

static uint32_t verbs_max_rd_atomic(const engram_mlx5_dev_t *d)
{
    int init = d->attr.max_qp_init_rd_atom, resp = d->attr.max_qp_rd_atom;
    int n = init < resp ? init : resp; /* peers run the same device kind: our responder side bounds theirs */
    return n > 0 ? (uint32_t)n : 1;
}

static void verbs_describe(const engram_mlx5_dev_t *d, char *buf, size_t len)
{
    snprintf(buf, len, "%s port %d (%s)", d->name, PORT, d->gid_index >= 0 ? "RoCE v2" : "InfiniBand");
}

static engram_status_t verbs_reg_mr(engram_mlx5_dev_t *d, void *addr, size_t len, bool remote_read,
                                    engram_mlx5_mr_t **out, uint32_t *lkey, uint32_t *rkey)
{
    engram_mlx5_mr_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv: out of memory for a registration");
    /* Symmetric memory may be a read-only mapping (node-mates' segments). */
    int access = remote_read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_LOCAL_WRITE;
    m->mr = ibv_reg_mr(d->pd, addr, len, access);
    if (m->mr == NULL) {
        free(m);
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: ibv_reg_mr of %zu bytes at %p on %s failed: %s", len, addr,
                            d->name, strerror(errno));
    }
    *lkey = m->mr->lkey;
    *rkey = m->mr->rkey;
    *out = m;
    return ENGRAM_OK;
}

static void verbs_dereg_mr(engram_mlx5_dev_t *d, engram_mlx5_mr_t *m)
{
    (void)d;
    ibv_dereg_mr(m->mr);
    free(m);
}

static engram_status_t qp_to_init(engram_mlx5_dev_t *d, struct ibv_qp *qp)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = PORT,
                            .qp_access_flags = IBV_ACCESS_REMOTE_READ};
    int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    return rc == 0 ? ENGRAM_OK
                   : ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: QP 0x%x on %s to INIT failed: %s", qp->qp_num, d->name,
                                  strerror(rc));
}

static engram_status_t verbs_qp_create(engram_mlx5_dev_t *d, uint32_t depth, engram_mlx5_qp_t **out,
                                       engram_mlx5_rings_t *rings, engram_mlx5_qp_addr_t *addr)
{
    engram_mlx5_qp_t *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5dv: out of memory for a QP");
    engram_status_t st;
    q->cq = ibv_create_cq(d->ctx, (int)(2 * depth), NULL, NULL, 0);
    if (q->cq == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: ibv_create_cq(%u) on %s failed: %s", 2 * depth, d->name,
                          strerror(errno));
        goto free_q;
    }
    struct ibv_qp_init_attr init = {
        .send_cq = q->cq, .recv_cq = q->cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
        .cap = {.max_send_wr = depth - 1, .max_recv_wr = 0, .max_send_sge = 1, .max_recv_sge = 1},
    };
    q->qp = ibv_create_qp(d->pd, &init);
    if (q->qp == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: ibv_create_qp (RC, %u WQEs) on %s failed: %s", depth, d->name,
                          strerror(errno));
        goto destroy_cq;
    }
    st = qp_to_init(d, q->qp);
    if (st != ENGRAM_OK)
        goto destroy_qp;
    struct mlx5dv_qp dqp;
    struct mlx5dv_cq dcq;
    struct mlx5dv_obj obj = {.qp = {.in = q->qp, .out = &dqp}, .cq = {.in = q->cq, .out = &dcq}};
    int rc = mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ);
    if (rc != 0 || dqp.sq.stride != MLX5_SEND_WQE_BB || dcq.cqe_size != sizeof(struct mlx5_cqe64)) {
        st = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "mlx5dv: mlx5dv_init_obj on %s: %s (SQ stride %u, CQE size %u; "
                          "64 and 64 needed)", d->name, rc ? strerror(rc) : "unexpected layout", dqp.sq.stride,
                          dcq.cqe_size);
        goto destroy_qp;
    }
    uint32_t psn;
    st = engram_mlx5_initial_psn(&psn);
    if (st != ENGRAM_OK)
        goto destroy_qp;
    *rings = (engram_mlx5_rings_t){
        .sq_buf = dqp.sq.buf, .sq_wqe_cnt = dqp.sq.wqe_cnt, .qpn = q->qp->qp_num, .dbrec = dqp.dbrec,
        .bf_reg = dqp.bf.reg, .bf_size = dqp.bf.size, .cq_buf = dcq.buf, .cqe_cnt = dcq.cqe_cnt,
        .cq_dbrec = dcq.dbrec,
    };
    *addr = (engram_mlx5_qp_addr_t){.qpn = q->qp->qp_num, .psn = psn, .lid = d->port.lid};
    memcpy(addr->gid, d->gid.raw, sizeof(addr->gid));
    *out = q;
    return ENGRAM_OK;
destroy_qp:
    ibv_destroy_qp(q->qp);
destroy_cq:
    ibv_destroy_cq(q->cq);
free_q:
    free(q);
    return st;
}

static engram_status_t verbs_qp_connect(engram_mlx5_dev_t *d, engram_mlx5_qp_t *q, const engram_mlx5_qp_addr_t *local,
                                        const engram_mlx5_qp_addr_t *remote, uint8_t rd_atom)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR, .path_mtu = d->port.active_mtu, .dest_qp_num = remote->qpn,
        .rq_psn = remote->psn, .max_dest_rd_atomic = rd_atom, .min_rnr_timer = 12,
        .ah_attr = {.dlid = remote->lid, .sl = 0, .port_num = PORT},
    };
    if (d->gid_index >= 0) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
        a.ah_attr.grh.hop_limit = 64;
        memcpy(a.ah_attr.grh.dgid.raw, remote->gid, sizeof(remote->gid));
    }
    int rc = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: QP 0x%x to RTR (peer rank %d QP 0x%x) failed: %s",
                            q->qp->qp_num, remote->rank, remote->qpn, strerror(rc));
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
                             .sq_psn = local->psn, .max_rd_atomic = rd_atom};
    rc = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: QP 0x%x to RTS failed: %s", q->qp->qp_num, strerror(rc));
    return ENGRAM_OK;
}

static void verbs_qp_destroy(engram_mlx5_dev_t *d, engram_mlx5_qp_t *q)
{
    (void)d;
    ibv_destroy_qp(q->qp);
    ibv_destroy_cq(q->cq);
    free(q);
}

/* The WQEs must reach the NIC before the record, the record before the
 * register write that makes the NIC read it, and the register write (to
 * write-combining memory) must leave the CPU before the next one; the
 * barriers are mlx5_barrier.h's, as rdma-core's mlx5 post_send. */
static void verbs_doorbell(engram_mlx5_rings_t *r, uint32_t pi, const void *ctrl)
{
    engram_mlx5_to_device_barrier();
    r->dbrec[MLX5_SND_DBR] = htobe32(pi & 0xffff);
    engram_mlx5_mmio_wc_start();
    uint64_t first8;
    memcpy(&first8, ctrl, sizeof(first8));
    *(volatile uint64_t *)((char *)r->bf_reg + r->bf_offset) = first8;
    engram_mlx5_mmio_flush_writes();
    r->bf_offset ^= r->bf_size;
}

const engram_mlx5_ring_ops_t engram_mlx5_verbs_rings = {
    .size = sizeof(engram_mlx5_ring_ops_t),
    .name = "verbs",
    .available = verbs_available,
    .open = verbs_open,
    .close = verbs_close,
    .max_rd_atomic = verbs_max_rd_atomic,
    .describe = verbs_describe,
    .reg_mr = verbs_reg_mr,
    .dereg_mr = verbs_dereg_mr,
    .qp_create = verbs_qp_create,
    .qp_connect = verbs_qp_connect,
    .qp_destroy = verbs_qp_destroy,
    .doorbell = verbs_doorbell,
};
