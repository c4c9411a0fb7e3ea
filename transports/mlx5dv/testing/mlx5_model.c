/* The software NIC: see mlx5_model.h. One thread per opened transport
 * services every QP; the lists it walks change only under `lock`, the
 * rings themselves are shared with the host exactly as with a real NIC
 * (doorbell record read with acquire, CQE owner byte written with release). */
#include "transports/mlx5dv/testing/mlx5_model.h"

#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/log.h"
#include "engram/plugin/segment.h"
#include "transports/mlx5dv/mlx5_wqe.h"
#include "transports/mlx5dv/testing/mlx5_wqe_decode.h"

#define MODEL_DEFAULT_RD_ATOMIC 16

typedef struct model_mr {
    struct model_mr *next;
    uint32_t key; /* lkey == rkey */
    char *addr;
    uint64_t len;
    bool remote_read;
} model_mr_t;

/* Where one rank's symmetric registration lies in this process. */
typedef struct model_remote {
    uint64_t addr, len;
    uint32_t rkey;
    const char *base;
} model_remote_t;

typedef struct model_peers {
    struct model_peers *next;
    int size;
    model_remote_t *ranks;            /* [size] */
    engram_segment_t **imports;       /* ENGRAM_REG_RANK: [size], NULL for the own segment */
    engram_segment_span_t *spans;     /* ENGRAM_REG_NODE_SPAN: [nspans] */
    int nspans;
} model_peers_t;

struct engram_mlx5_qp {
    struct engram_mlx5_qp *next;
    uint8_t *sq_buf, *cq_buf;
    uint32_t dbrec[2], cq_dbrec[2]; /* written by the host, big-endian */
    uint64_t bf[64];                /* the "BlueFlame page": two halves */
    uint32_t sq_cnt, cqe_cnt, qpn;
    int remote_rank;
    bool connected, in_error, broken;
    uint32_t consumed; /* WQEs consumed */
    uint32_t cq_pi;    /* CQEs written */
};

struct engram_mlx5_dev {
    int rank;
    uint32_t rd_atom;
    pthread_t thread;
    int stop, paused; /* atomics */
    pthread_mutex_t lock;
    engram_mlx5_qp_t *qps;
    model_mr_t *mrs;
    model_peers_t *peers;
    uint32_t next_key, next_qpn;
    int64_t inject_after; /* -1: none */
    uint8_t inject_syndrome;
    engram_mlx5_model_stats_t stats;
};

static uint32_t next_rd_atomic = MODEL_DEFAULT_RD_ATOMIC;
static engram_mlx5_dev_t *current; /* the open model of this process */

static void violation(engram_mlx5_dev_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(engram_mlx5_dev_t *m, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (m->stats.violations++ == 0)
        snprintf(m->stats.first_violation, sizeof(m->stats.first_violation), "%s", msg);
    ENGRAM_WARN("mlx5 model (rank %d): %s", m->rank, msg);
}

static void cqe_write(engram_mlx5_dev_t *m, engram_mlx5_qp_t *qp, uint16_t wqe_idx, uint8_t wqe_opcode,
                      uint8_t syndrome, uint32_t byte_cnt)
{
    uint8_t *slot = qp->cq_buf + (size_t)(qp->cq_pi & (qp->cqe_cnt - 1)) * sizeof(struct mlx5_cqe64);
    uint8_t owner = (qp->cq_pi & qp->cqe_cnt) ? 1 : 0;
    uint8_t opcode;
    if (syndrome != 0) {
        struct mlx5_err_cqe e;
        memset(&e, 0, sizeof(e));
        e.syndrome = syndrome;
        e.vendor_err_synd = 0x88;
        e.s_wqe_opcode_qpn = htobe32((uint32_t)wqe_opcode << 24 | qp->qpn);
        e.wqe_counter = htobe16(wqe_idx);
        memcpy(slot, &e, sizeof(e) - 1);
        opcode = MLX5_CQE_REQ_ERR;
        m->stats.error_cqes++;
    } else {
        struct mlx5_cqe64 c;
        memset(&c, 0, sizeof(c));
        c.byte_cnt = htobe32(byte_cnt);
        c.sop_drop_qpn = htobe32(qp->qpn);
        c.wqe_counter = htobe16(wqe_idx);
        memcpy(slot, &c, sizeof(c) - 1);
        opcode = MLX5_CQE_REQ;
    }
    __atomic_store_n(slot + 63, (uint8_t)(opcode << 4 | owner), __ATOMIC_RELEASE);
    qp->cq_pi++;
    m->stats.cqes++;
}

static const model_mr_t *mr_find(const engram_mlx5_dev_t *m, uint32_t key)
{
    for (const model_mr_t *r = m->mrs; r != NULL; r = r->next)
        if (r->key == key)
            return r;
    return NULL;
}

static const model_remote_t *remote_find(const engram_mlx5_dev_t *m, int rank, uint32_t rkey)
{
    for (const model_peers_t *p = m->peers; p != NULL; p = p->next)
        if (rank < p->size && p->ranks[rank].rkey == rkey)
            return &p->ranks[rank];
    return NULL;
}

/* Field checks every WQE must pass; false (with a violation) if not. */
static bool wqe_valid(engram_mlx5_dev_t *m, const engram_mlx5_qp_t *qp, const engram_mlx5_wqe_fields_t *f)
{
    uint16_t want_idx = (uint16_t)qp->consumed;
    uint8_t known_bits = MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE;
    if (!qp->connected)
        violation(m, "QP 0x%x: WQE posted before the QP reached RTS", qp->qpn);
    else if (f->idx != want_idx)
        violation(m, "QP 0x%x: WQE index %u where %u was due", qp->qpn, f->idx, want_idx);
    else if (f->qpn != qp->qpn)
        violation(m, "QP 0x%x: WQE %u names qpn 0x%x", qp->qpn, f->idx, f->qpn);
    else if (f->opmod != 0 || f->signature != 0 || f->imm != 0)
        violation(m, "QP 0x%x: WQE %u has opmod %u, signature %u, imm %u (0 expected)", qp->qpn, f->idx, f->opmod,
                  f->signature, f->imm);
    else if (f->fm_ce_se & ~known_bits)
        violation(m, "QP 0x%x: WQE %u fm_ce_se 0x%02x has bits other than CQ update and small fence", qp->qpn,
                  f->idx, f->fm_ce_se);
    else if (f->opcode == MLX5_OPCODE_RDMA_READ && f->ds != ENGRAM_MLX5_READ_DS)
        violation(m, "QP 0x%x: READ WQE %u has ds %u, not %u", qp->qpn, f->idx, f->ds, ENGRAM_MLX5_READ_DS);
    else if (f->opcode == MLX5_OPCODE_RDMA_READ && (f->byte_count == 0 || f->byte_count > INT32_MAX))
        violation(m, "QP 0x%x: READ WQE %u of %u bytes (0 would mean 2 GiB)", qp->qpn, f->idx, f->byte_count);
    else if (f->opcode == MLX5_OPCODE_NOP && f->ds != ENGRAM_MLX5_NOP_DS)
        violation(m, "QP 0x%x: NOP WQE %u has ds %u, not %u", qp->qpn, f->idx, f->ds, ENGRAM_MLX5_NOP_DS);
    else if (f->opcode != MLX5_OPCODE_RDMA_READ && f->opcode != MLX5_OPCODE_NOP)
        violation(m, "QP 0x%x: WQE %u has opcode 0x%x (READ or NOP expected)", qp->qpn, f->idx, f->opcode);
    else
        return true;
    return false;
}

/* The syndrome a READ fails with, or 0 after copying it. */
static uint8_t read_execute(engram_mlx5_dev_t *m, const engram_mlx5_qp_t *qp, const engram_mlx5_wqe_fields_t *f)
{
    if (m->inject_after >= 0 && m->inject_after-- == 0)
        return m->inject_syndrome;
    const model_mr_t *l = mr_find(m, f->lkey);
    char *dst = (char *)(uintptr_t)f->laddr;
    if (l == NULL || l->remote_read || dst < l->addr || f->byte_count > l->len ||
        (uint64_t)(dst - l->addr) > l->len - f->byte_count)
        return MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
    const model_remote_t *r = remote_find(m, qp->remote_rank, f->rkey);
    if (r == NULL || f->raddr < r->addr || f->byte_count > r->len || f->raddr - r->addr > r->len - f->byte_count)
        return MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
    memcpy(dst, r->base + (f->raddr - r->addr), f->byte_count);
    m->stats.reads++;
    return 0;
}

/* One WQE: checked, executed, completed. False when the CQ has no room. */
static bool wqe_consume(engram_mlx5_dev_t *m, engram_mlx5_qp_t *qp)
{
    uint32_t cq_ci = be32toh(__atomic_load_n(&qp->cq_dbrec[ENGRAM_MLX5_CQ_SET_CI], __ATOMIC_ACQUIRE)) & 0xffffff;
    if (((qp->cq_pi - cq_ci) & 0xffffff) >= qp->cqe_cnt)
        return false; /* a real NIC would overrun; the host has CQEs to poll */
    engram_mlx5_wqe_fields_t f;
    engram_mlx5_wqe_decode(qp->sq_buf + ((size_t)(qp->consumed & (qp->sq_cnt - 1)) << MLX5_SEND_WQE_SHIFT), &f);
    uint16_t idx = (uint16_t)qp->consumed;
    uint8_t syndrome = 0;
    if (qp->in_error)
        syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
    else if (!wqe_valid(m, qp, &f))
        syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    else if (f.opcode == MLX5_OPCODE_RDMA_READ)
        syndrome = read_execute(m, qp, &f);
    qp->consumed++;
    m->stats.wqes++;
    if (syndrome != 0) {
        qp->in_error = true;
        cqe_write(m, qp, idx, f.opcode, syndrome, 0);
    } else if (f.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) {
        cqe_write(m, qp, idx, f.opcode, 0, f.opcode == MLX5_OPCODE_RDMA_READ ? f.byte_count : 0);
    }
    return true;
}

/* Consumes what the doorbell record announces; true if there was any. */
static bool qp_service(engram_mlx5_dev_t *m, engram_mlx5_qp_t *qp)
{
    if (qp->broken)
        return false;
    uint16_t pi = (uint16_t)be32toh(__atomic_load_n(&qp->dbrec[MLX5_SND_DBR], __ATOMIC_ACQUIRE));
    uint16_t pending = (uint16_t)(pi - (uint16_t)qp->consumed);
    if (pending == 0)
        return false;
    if (pending > qp->sq_cnt) {
        violation(m, "QP 0x%x: doorbell record %u is %u WQEs ahead of the NIC on a ring of %u", qp->qpn, pi,
                  pending, qp->sq_cnt);
        qp->broken = true;
        return false;
    }
    if (pending > m->stats.max_pending)
        m->stats.max_pending = pending;
    for (uint16_t i = 0; i < pending; i++)
        if (!wqe_consume(m, qp))
            break;
    return true;
}

static void *nic_main(void *arg)
{
    engram_mlx5_dev_t *m = arg;
    unsigned idle = 0;
    while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
        bool busy = false;
        if (!__atomic_load_n(&m->paused, __ATOMIC_ACQUIRE)) {
            pthread_mutex_lock(&m->lock);
            for (engram_mlx5_qp_t *qp = m->qps; qp != NULL; qp = qp->next)
                busy |= qp_service(m, qp);
            pthread_mutex_unlock(&m->lock);
        }
        idle = busy ? 0 : idle + 1;
        if (idle > 256)
            usleep(20); /* ranks share few cores: an idle NIC yields them */
        else if (idle > 0)
            sched_yield();
    }
    return NULL;
}

static bool model_available(const char **why)
{
    (void)why;
    return true;
}

static engram_status_t model_open(const char *device, int rank, engram_mlx5_dev_t **out)
{
    (void)device;
    if (current != NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_BUSY, "mlx5 model: one transport per process at a time");
    engram_mlx5_dev_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5 model: out of memory");
    m->rank = rank;
    m->rd_atom = next_rd_atomic;
    /* Keys and QP numbers differ across ranks, so one used on the wrong peer is caught. */
    m->next_key = ((uint32_t)rank + 1) << 16 | 0x100;
    m->next_qpn = ((uint32_t)rank + 1) << 12;
    m->inject_after = -1;
    pthread_mutex_init(&m->lock, NULL);
    int rc = pthread_create(&m->thread, NULL, nic_main, m);
    if (rc != 0) {
        pthread_mutex_destroy(&m->lock);
        free(m);
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5 model: cannot start the NIC thread: %s", strerror(rc));
    }
    current = m;
    *out = m;
    return ENGRAM_OK;
}

static void model_close(engram_mlx5_dev_t *m)
{
    __atomic_store_n(&m->stop, 1, __ATOMIC_RELEASE);
    pthread_join(m->thread, NULL);
    pthread_mutex_destroy(&m->lock);
    if (current == m)
        current = NULL;
    free(m);
}

static uint32_t model_max_rd_atomic(const engram_mlx5_dev_t *m)
{
    return m->rd_atom;
}

static void model_describe(const engram_mlx5_dev_t *m, char *buf, size_t len)
{
    snprintf(buf, len, "the software NIC model (rank %d, max_rd_atomic %u)", m->rank, m->rd_atom);
}

static engram_status_t model_reg_mr(engram_mlx5_dev_t *m, void *addr, size_t len, bool remote_read,
                                    engram_mlx5_mr_t **out, uint32_t *lkey, uint32_t *rkey)
{
    model_mr_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5 model: out of memory for a registration");
    pthread_mutex_lock(&m->lock);
    r->key = m->next_key++;
    r->addr = addr;
    r->len = len;
    r->remote_read = remote_read;
    r->next = m->mrs;
    m->mrs = r;
    pthread_mutex_unlock(&m->lock);
    *lkey = *rkey = r->key;
    *out = (engram_mlx5_mr_t *)r;
    return ENGRAM_OK;
}

static void model_dereg_mr(engram_mlx5_dev_t *m, engram_mlx5_mr_t *mr)
{
    pthread_mutex_lock(&m->lock);
    for (model_mr_t **link = &m->mrs; *link != NULL; link = &(*link)->next)
        if (*link == (model_mr_t *)mr) {
            *link = (*link)->next;
            break;
        }
    pthread_mutex_unlock(&m->lock);
    free(mr);
}

static void peers_free(model_peers_t *p)
{
    for (int r = 0; p->imports != NULL && r < p->size; r++)
        if (p->imports[r] != NULL)
            p->imports[r]->ops->free(p->imports[r]);
    for (int i = 0; i < p->nspans; i++)
        engram_segment_span_unmap(&p->spans[i]);
    free(p->imports);
    free(p->spans);
    free(p->ranks);
    free(p);
}

/* Maps what each rank registered: its segment, or its node's segments
 * back to back (the rail rank's span). */
static engram_status_t peers_map(model_peers_t *p, engram_group_t *group, engram_segment_t *seg,
                                 engram_reg_span_t span, const int *fds)
{
    int rank = engram_group_rank(group), local = engram_group_local_size(group);
    for (int r = 0; r < p->size; r++)
        if (fds[r] < 0)
            return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "mlx5 model: rank %d is on another host; the model reads "
                                "peers' memory through shared segments", r);
    if (span == ENGRAM_REG_RANK) {
        p->imports = calloc((size_t)p->size, sizeof(*p->imports));
        if (p->imports == NULL)
            return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5 model: out of memory for %d imports", p->size);
        for (int r = 0; r < p->size; r++) {
            if (r == rank) {
                p->ranks[r].base = seg->addr;
                continue;
            }
            engram_status_t st = seg->ops->import_fd(fds[r], seg->size, true, NULL, &p->imports[r]);
            if (st != ENGRAM_OK)
                return st;
            p->ranks[r].base = p->imports[r]->addr;
        }
        return ENGRAM_OK;
    }
    int nodes = p->size / local;
    p->spans = calloc((size_t)nodes, sizeof(*p->spans));
    if (p->spans == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5 model: out of memory for %d node spans", nodes);
    for (int n = 0; n < nodes; n++) {
        engram_status_t st = engram_segment_span_map(seg->ops, fds + (size_t)n * (size_t)local, local, seg->size,
                                                     true, &p->spans[n]);
        if (st != ENGRAM_OK)
            return st;
        p->nspans = n + 1;
    }
    for (int r = 0; r < p->size; r++)
        p->ranks[r].base = p->spans[r / local].base;
    return ENGRAM_OK;
}

static engram_status_t model_attach_peers(engram_mlx5_dev_t *m, engram_group_t *group, engram_segment_t *seg,
                                          engram_reg_span_t span, const engram_mlx5_mr_info_t *infos, void **out)
{
    int size = engram_group_size(group), my_fd = -1;
    engram_status_t st = seg->ops->export_fd(seg, &my_fd);
    if (st != ENGRAM_OK)
        return st;
    int *fds = malloc((size_t)size * sizeof(*fds));
    model_peers_t *p = calloc(1, sizeof(*p));
    if (fds == NULL || p == NULL || (p->ranks = calloc((size_t)size, sizeof(*p->ranks))) == NULL) {
        free(fds);
        free(p);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5 model: out of memory for %d peers", size);
    }
    p->size = size;
    st = engram_fd_allgather(group, my_fd, fds);
    if (st != ENGRAM_OK) {
        free(fds);
        peers_free(p);
        return st;
    }
    st = peers_map(p, group, seg, span, fds);
    for (int r = 0; r < size; r++) {
        if (fds[r] >= 0)
            close(fds[r]); /* the mappings keep the memory */
        p->ranks[r].addr = infos[r].addr;
        p->ranks[r].len = infos[r].len;
        p->ranks[r].rkey = infos[r].rkey;
    }
    free(fds);
    if (st != ENGRAM_OK) {
        peers_free(p);
        return st;
    }
    pthread_mutex_lock(&m->lock);
    p->next = m->peers;
    m->peers = p;
    pthread_mutex_unlock(&m->lock);
    *out = p;
    return ENGRAM_OK;
}

static void model_detach_peers(engram_mlx5_dev_t *m, void *peers)
{
    pthread_mutex_lock(&m->lock);
    for (model_peers_t **link = &m->peers; *link != NULL; link = &(*link)->next)
        if (*link == peers) {
            *link = (*link)->next;
            break;
        }
    pthread_mutex_unlock(&m->lock);
    peers_free(peers);
}

/* Page-aligned, as a NIC's rings (aligned_alloc wants whole pages). */
static uint8_t *page_alloc(size_t bytes)
{
    return aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
}

static engram_status_t model_qp_create(engram_mlx5_dev_t *m, uint32_t depth, engram_mlx5_qp_t **out,
                                       engram_mlx5_rings_t *rings, engram_mlx5_qp_addr_t *addr)
{
    engram_mlx5_qp_t *qp = calloc(1, sizeof(*qp));
    if (qp == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5 model: out of memory for a QP");
    qp->sq_cnt = depth;
    qp->cqe_cnt = 2 * depth;
    qp->sq_buf = page_alloc((size_t)depth * MLX5_SEND_WQE_BB);
    qp->cq_buf = page_alloc((size_t)qp->cqe_cnt * sizeof(struct mlx5_cqe64));
    if (qp->sq_buf == NULL || qp->cq_buf == NULL) {
        free(qp->sq_buf);
        free(qp->cq_buf);
        free(qp);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "mlx5 model: out of memory for the rings of a %u-WQE QP", depth);
    }
    memset(qp->sq_buf, 0, (size_t)depth * MLX5_SEND_WQE_BB);
    /* As rdma-core: every CQE invalid, so the first pass reads as empty. */
    for (uint32_t i = 0; i < qp->cqe_cnt; i++) {
        memset(qp->cq_buf + (size_t)i * sizeof(struct mlx5_cqe64), 0, sizeof(struct mlx5_cqe64));
        ((struct mlx5_cqe64 *)qp->cq_buf)[i].op_own = MLX5_CQE_INVALID << 4;
    }
    pthread_mutex_lock(&m->lock);
    qp->qpn = m->next_qpn++;
    qp->next = m->qps;
    m->qps = qp;
    pthread_mutex_unlock(&m->lock);
    *rings = (engram_mlx5_rings_t){
        .sq_buf = qp->sq_buf, .sq_wqe_cnt = depth, .qpn = qp->qpn, .dbrec = qp->dbrec, .bf_reg = qp->bf,
        .bf_size = sizeof(qp->bf) / 2, .cq_buf = qp->cq_buf, .cqe_cnt = qp->cqe_cnt, .cq_dbrec = qp->cq_dbrec,
    };
    *addr = (engram_mlx5_qp_addr_t){.qpn = qp->qpn, .psn = qp->qpn * 7u & 0xffffff, .lid = (uint16_t)(m->rank + 1)};
    *out = qp;
    return ENGRAM_OK;
}

static engram_status_t model_qp_connect(engram_mlx5_dev_t *m, engram_mlx5_qp_t *qp, const engram_mlx5_qp_addr_t *local,
                                        const engram_mlx5_qp_addr_t *remote, uint8_t rd_atom)
{
    if (local->qpn != qp->qpn)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5 model: connecting QP 0x%x with the address of QP 0x%x",
                            qp->qpn, local->qpn);
    if (rd_atom == 0 || rd_atom > m->rd_atom)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5 model: max_rd_atomic %u outside [1, %u]", rd_atom, m->rd_atom);
    if (remote->lid != (uint16_t)(remote->rank + 1))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "mlx5 model: remote address of rank %d has lid %u", remote->rank,
                            remote->lid);
    pthread_mutex_lock(&m->lock);
    qp->remote_rank = remote->rank;
    qp->connected = true;
    pthread_mutex_unlock(&m->lock);
    return ENGRAM_OK;
}

static void model_qp_destroy(engram_mlx5_dev_t *m, engram_mlx5_qp_t *qp)
{
    pthread_mutex_lock(&m->lock);
    for (engram_mlx5_qp_t **link = &m->qps; *link != NULL; link = &(*link)->next)
        if (*link == qp) {
            *link = qp->next;
            break;
        }
    pthread_mutex_unlock(&m->lock);
    free(qp->sq_buf);
    free(qp->cq_buf);
    free(qp);
}

static void model_doorbell(engram_mlx5_rings_t *r, uint32_t pi, const void *ctrl)
{
    __atomic_store_n(&r->dbrec[MLX5_SND_DBR], htobe32(pi & 0xffff), __ATOMIC_RELEASE);
    uint64_t first8;
    memcpy(&first8, ctrl, sizeof(first8));
    __atomic_store_n((uint64_t *)((char *)r->bf_reg + r->bf_offset), first8, __ATOMIC_RELAXED);
    r->bf_offset ^= r->bf_size;
}

const engram_mlx5_ring_ops_t engram_mlx5_model_rings = {
    .size = sizeof(engram_mlx5_ring_ops_t),
    .name = "model",
    .available = model_available,
    .open = model_open,
    .close = model_close,
    .max_rd_atomic = model_max_rd_atomic,
    .describe = model_describe,
    .reg_mr = model_reg_mr,
    .dereg_mr = model_dereg_mr,
    .attach_peers = model_attach_peers,
    .detach_peers = model_detach_peers,
    .qp_create = model_qp_create,
    .qp_connect = model_qp_connect,
    .qp_destroy = model_qp_destroy,
    .doorbell = model_doorbell,
};

/* The link seam: this library links with --wrap=engram_mlx5_verbs_rings,
 * so the transport's references to the verbs rings resolve to
 * __wrap_engram_mlx5_verbs_rings, the model's table under the name the
 * linker looks for. */
extern const engram_mlx5_ring_ops_t __wrap_engram_mlx5_verbs_rings __attribute__((alias("engram_mlx5_model_rings")));

void engram_mlx5_model_set_max_rd_atomic(uint32_t n)
{
    next_rd_atomic = n;
}

void engram_mlx5_model_pause(bool paused)
{
    if (current != NULL)
        __atomic_store_n(&current->paused, paused, __ATOMIC_RELEASE);
}

void engram_mlx5_model_inject(uint8_t syndrome, uint32_t after)
{
    if (current == NULL)
        return;
    pthread_mutex_lock(&current->lock);
    current->inject_syndrome = syndrome;
    current->inject_after = after;
    pthread_mutex_unlock(&current->lock);
}

void engram_mlx5_model_limit_peers(uint64_t bytes)
{
    if (current == NULL)
        return;
    pthread_mutex_lock(&current->lock);
    for (model_peers_t *p = current->peers; p != NULL; p = p->next)
        for (int r = 0; r < p->size; r++)
            if (p->ranks[r].len > bytes)
                p->ranks[r].len = bytes;
    pthread_mutex_unlock(&current->lock);
}

void engram_mlx5_model_stats(engram_mlx5_model_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (current == NULL)
        return;
    pthread_mutex_lock(&current->lock);
    *out = current->stats;
    pthread_mutex_unlock(&current->lock);
}
