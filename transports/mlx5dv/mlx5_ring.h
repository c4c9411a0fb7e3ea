/* The rings of one QP as the data path sees them, and the ops that create
 * them. The verbs implementation (mlx5_setup.c) takes a real NIC's rings
 * from mlx5dv_init_obj; the software NIC model (testing/mlx5_model.h)
 * allocates its own and plays the NIC on them. The data path
 * (mlx5_transport.c) is the same code on both: it writes WQEs, rings the
 * doorbell through `doorbell` and polls CQEs by owner bit. */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_RING_H
#define ENGRAM_TRANSPORTS_MLX5DV_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engram/plugin/group.h"
#include "engram/plugin/segment.h"
#include "engram/status.h"
#include "engram/plugin/transport.h"

/* The CQ doorbell record's consumer-index word (rdma-core keeps the
 * name internal: MLX5_CQ_SET_CI). */
#define ENGRAM_MLX5_CQ_SET_CI 0

typedef struct engram_mlx5_rings {
    /* send queue */
    uint8_t *sq_buf;     /* sq_wqe_cnt WQEBBs of 64 bytes */
    uint32_t sq_wqe_cnt; /* power of two */
    uint32_t qpn;
    uint32_t *dbrec;     /* [MLX5_SND_DBR]: 16-bit producer index, big-endian */
    void *bf_reg;        /* doorbell register: the BlueFlame page */
    uint32_t bf_size;    /* the register alternates between two halves of this size */
    uint32_t bf_offset;
    /* completion queue */
    uint8_t *cq_buf;     /* cqe_cnt CQEs of 64 bytes */
    uint32_t cqe_cnt;    /* power of two */
    uint32_t *cq_dbrec;  /* [ENGRAM_MLX5_CQ_SET_CI]: 24-bit consumer index, big-endian */
} engram_mlx5_rings_t;

typedef struct engram_mlx5_dev engram_mlx5_dev_t; /* provider state: device, PD */
typedef struct engram_mlx5_qp engram_mlx5_qp_t;   /* provider state: QP and CQ */
typedef struct engram_mlx5_mr engram_mlx5_mr_t;   /* provider state: a registration */

/* What a rank publishes so a peer can connect to one of its QPs. */
typedef struct engram_mlx5_qp_addr {
    uint8_t gid[16];
    uint32_t qpn;
    uint32_t psn;
    uint16_t lid;
    uint8_t rd_atom; /* reads this QP can have outstanding as initiator */
    uint8_t reserved;
    int32_t rank;
} engram_mlx5_qp_addr_t;

/* One rank's symmetric registration, as every rank learns it. */
typedef struct engram_mlx5_mr_info {
    uint64_t addr;
    uint64_t len;
    uint32_t rkey;
    int32_t ok; /* 0: this rank failed to register */
} engram_mlx5_mr_info_t;

typedef struct engram_mlx5_ring_ops {
    size_t size; /* sizeof(engram_mlx5_ring_ops_t) */
    const char *name;
    /* false with *why ("no mlx5 device") when it cannot run here. */
    bool (*available)(const char **why);
    /* device: the mlx5dv_device key; "" or NULL = the first mlx5 device. */
    engram_status_t (*open)(const char *device, int rank, engram_mlx5_dev_t **out);
    void (*close)(engram_mlx5_dev_t *dev);
    /* The initiator depth the device allows per QP (max_qp_init_rd_atom). */
    uint32_t (*max_rd_atomic)(const engram_mlx5_dev_t *dev);
    void (*describe)(const engram_mlx5_dev_t *dev, char *buf, size_t len);
    /* remote_read: peers read it (symmetric); else the NIC writes it (local). */
    engram_status_t (*reg_mr)(engram_mlx5_dev_t *dev, void *addr, size_t len, bool remote_read,
                              engram_mlx5_mr_t **out, uint32_t *lkey, uint32_t *rkey);
    void (*dereg_mr)(engram_mlx5_dev_t *dev, engram_mlx5_mr_t *mr);
    /* Optional (NULL for a real NIC, which reaches peers over the wire).
     * Collective, after every rank registered `seg` under `span` and
     * infos[r] is rank r's registration: lets a model reach the peers'
     * memory. *peers is released by detach_peers. */
    engram_status_t (*attach_peers)(engram_mlx5_dev_t *dev, engram_group_t *group, engram_segment_t *seg,
                                    engram_reg_span_t span, const engram_mlx5_mr_info_t *infos, void **peers);
    void (*detach_peers)(engram_mlx5_dev_t *dev, void *peers);
    /* An RC QP with a send queue of `depth` WQEBBs and a CQ of
     * 2 * depth entries (so flushed-in-error WQEs always fit), in INIT. */
    engram_status_t (*qp_create)(engram_mlx5_dev_t *dev, uint32_t depth, engram_mlx5_qp_t **qp,
                                 engram_mlx5_rings_t *rings, engram_mlx5_qp_addr_t *addr);
    /* RTR then RTS towards `remote`, with `rd_atom` reads outstanding. */
    engram_status_t (*qp_connect)(engram_mlx5_dev_t *dev, engram_mlx5_qp_t *qp, const engram_mlx5_qp_addr_t *local,
                                  const engram_mlx5_qp_addr_t *remote, uint8_t rd_atom);
    void (*qp_destroy)(engram_mlx5_dev_t *dev, engram_mlx5_qp_t *qp);
    /* Announces WQEs up to producer index `pi`: the doorbell record, then
     * the doorbell register with the first 8 bytes of the last WQE's
     * control segment `ctrl`, each behind the barrier it needs. */
    void (*doorbell)(engram_mlx5_rings_t *rings, uint32_t pi, const void *ctrl);
} engram_mlx5_ring_ops_t;

/* The rings every mlx5dv transport opens on: a real NIC's. Tests put the
 * software NIC model in their place at link time (testing/mlx5_model.h),
 * so production code has no switch for it. */
extern const engram_mlx5_ring_ops_t engram_mlx5_verbs_rings;

#endif
