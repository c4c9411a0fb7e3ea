/* State shared by the mlx5dv transport's files (internal). */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_INTERNAL_H
#define ENGRAM_TRANSPORTS_MLX5DV_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "engram/plugin/transport.h"
#include "engram/plugin/free_list.h"
#include "engram/plugin/segment.h"
#include "transports/mlx5dv/mlx5_ring.h"

#define MLX5_QUEUES 4
/* WQEBBs per send queue (one WQE each). */
#define MLX5_SQ_DEPTH 256

/* One RC QP: (queue, peer). Counters are WQE counts since creation; the
 * 16-bit WQE index and the ring slot are their low bits. */
typedef struct mlx5_conn {
    engram_mlx5_rings_t rings;
    engram_mlx5_qp_t *qp;
    uint64_t pi;      /* WQEs written */
    uint64_t rung;    /* WQEs announced by the doorbell */
    uint64_t done;    /* WQEs completed (successfully or flushed) */
    uint64_t done_ok; /* WQEs completed successfully */
    uint32_t cq_ci;   /* CQEs consumed */
    uint32_t window;  /* WQEs outstanding at most: max_rd_atomic and ring slots */
    uint32_t signal_every;
    uint32_t unsignaled; /* WQEs since the last signalled one */
    engram_status_t error; /* set by the first error CQE: the QP is in error */
    int queue, peer, rank;
} mlx5_conn_t;

struct engram_request {
    mlx5_conn_t *conn;
    uint64_t seq; /* complete when conn->done_ok reaches it */
};

/* Flush requests allocated at a time. */
#define MLX5_REQUEST_BLOCK 64

typedef struct mlx5_queue {
    mlx5_conn_t *conns; /* [npeers] */
    engram_free_list_t reqs; /* flush requests */
} __attribute__((aligned(64))) mlx5_queue_t;

struct engram_region {
    engram_region_t *next; /* the transport's list, so close frees leftovers */
    engram_mlx5_mr_t *mr;
    char *local_base; /* local regions: where gets land */
    uint64_t size;    /* bytes of the local region, or addressable per peer */
    uint32_t lkey;
    int npeers;              /* 0 for local regions */
    uint64_t *remote_addr;   /* [npeers] */
    uint32_t *rkey;          /* [npeers] */
    engram_segment_span_t node_span; /* hybrid: node-mates' segments back to back */
    void *peers;             /* the rings' attach_peers state */
};

struct engram_transport {
    const engram_mlx5_ring_ops_t *rings;
    engram_mlx5_dev_t *dev;
    engram_group_t *group;
    engram_transport_shape_t shape;
    int nqueues;
    uint32_t rd_atom;
    uint64_t timeout_ns;
    mlx5_queue_t *queues;
    engram_region_t *regions;
};

engram_status_t engram_mlx5_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                          engram_region_t **out);
engram_status_t engram_mlx5_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out);
void engram_mlx5_dereg(engram_transport_t *t, engram_region_t *region);

engram_status_t engram_mlx5_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                                uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                                unsigned flags);
engram_status_t engram_mlx5_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req);
engram_status_t engram_mlx5_test(engram_transport_t *t, engram_request_t *req);
void engram_mlx5_request_free(engram_transport_t *t, engram_request_t *req);
/* Sets up a connection's counters for its window. */
void engram_mlx5_conn_init(mlx5_conn_t *c, uint32_t rd_atom);

#endif
