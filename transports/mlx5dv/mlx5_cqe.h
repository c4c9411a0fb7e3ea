/* Parsing 64-byte mlx5 CQEs (struct mlx5_cqe64 / mlx5_err_cqe in mlx5dv.h).
 * A CQE belongs to software when its opcode is valid and its owner bit
 * equals the wrap parity of the consumer index: the NIC flips the bit it
 * writes on every pass over the ring, so stale entries from the previous
 * pass read as empty without the ring ever being cleared. */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_CQE_H
#define ENGRAM_TRANSPORTS_MLX5DV_CQE_H

#include <stddef.h>
#include <stdint.h>

#include "engram/status.h"

typedef enum engram_mlx5_cqe_kind {
    ENGRAM_MLX5_CQE_EMPTY = 0, /* still the NIC's: nothing new */
    ENGRAM_MLX5_CQE_OK,        /* a requester completion */
    ENGRAM_MLX5_CQE_ERROR,     /* a requester error: syndrome says why */
    ENGRAM_MLX5_CQE_UNEXPECTED /* an opcode a send-only RC QP never gets */
} engram_mlx5_cqe_kind_t;

typedef struct engram_mlx5_cqe_info {
    uint8_t opcode;      /* MLX5_CQE_* */
    uint16_t wqe_counter; /* producer index of the WQE it completes */
    uint32_t qpn;
    uint8_t syndrome, vendor_syndrome; /* errors only */
    uint8_t wqe_opcode;                /* errors only: the failed WQE's opcode */
} engram_mlx5_cqe_info_t;

/* The CQE at consumer index `ci` of a ring of `cqe_cnt` (a power of two)
 * entries; *info is filled unless EMPTY. Reads the owner byte first, with
 * acquire ordering, so the rest is read only once the NIC has written it. */
engram_mlx5_cqe_kind_t engram_mlx5_cqe_parse(const void *cqe, uint32_t ci, uint32_t cqe_cnt,
                                             engram_mlx5_cqe_info_t *info);

/* "remote access error" for 0x13, ...; "unknown syndrome" otherwise. */
const char *engram_mlx5_syndrome_str(uint8_t syndrome);

/* "remote access error (syndrome 0x13, vendor syndrome 0x88) on RDMA READ
 * WQE 17" into buf. */
void engram_mlx5_cqe_describe(const engram_mlx5_cqe_info_t *info, char *buf, size_t len);

#endif
