/* Software NIC model for the mlx5dv transport (tests only). Linking
 * //transports/mlx5dv:model puts it in place of the verbs rings (a link
 * seam: -Wl,--wrap=engram_mlx5_verbs_rings), so transport=mlx5dv in that
 * program runs on the model: a thread per opened transport plays the NIC. It watches each
 * QP's doorbell record, consumes WQEs from the send queue per the PRM
 * layout, checks every field (opcode, WQE index, qpn, ds, signalling
 * bits), checks keys and bounds against its registration table, copies
 * from the peers' fd-shared segments (so all ranks must share this host),
 * and writes CQEs with the right owner bit and wqe_counter, including
 * error CQEs (then every later WQE of the QP is flushed in error, as on a
 * real NIC).
 *
 * The hooks below act on the model of the calling process's open
 * transport (each forked rank has its own). */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_TESTING_MODEL_H
#define ENGRAM_TRANSPORTS_MLX5DV_TESTING_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "transports/mlx5dv/mlx5_ring.h"

extern const engram_mlx5_ring_ops_t engram_mlx5_model_rings;

/* The device's max_qp_init_rd_atom reported by models opened later (16, as
 * ConnectX, unless set). */
void engram_mlx5_model_set_max_rd_atomic(uint32_t n);

/* While paused the NIC consumes nothing (WQEs stay in the rings). */
void engram_mlx5_model_pause(bool paused);

/* The `after`-th RDMA READ from now (0: the next) completes in error with
 * `syndrome`, as if the NIC had hit it. */
void engram_mlx5_model_inject(uint8_t syndrome, uint32_t after);

/* Every peer registration the model knows now ends after `bytes`, as if
 * the owners had shrunk them: reads beyond fail its bounds check. */
void engram_mlx5_model_limit_peers(uint64_t bytes);

typedef struct engram_mlx5_model_stats {
    uint64_t wqes;        /* consumed */
    uint64_t reads;       /* RDMA READs copied */
    uint64_t cqes;        /* written, errors included */
    uint64_t error_cqes;
    uint64_t violations;  /* malformed WQEs or misuse of the rings */
    uint32_t max_pending; /* most WQEs announced and not consumed, at any look */
    char first_violation[256];
} engram_mlx5_model_stats_t;

/* Totals of the open model (all zero when none is open). */
void engram_mlx5_model_stats(engram_mlx5_model_stats_t *out);

#endif
