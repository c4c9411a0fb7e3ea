/* The WQE builder's inverse (test only): the software NIC model reads the
 * WQEs the data path wrote with it, and mlx5_wqe_test checks it against
 * hand-laid bytes. */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_TESTING_WQE_DECODE_H
#define ENGRAM_TRANSPORTS_MLX5DV_TESTING_WQE_DECODE_H

#include <stdint.h>

/* Every field of a WQE in host order. */
typedef struct engram_mlx5_wqe_fields {
    uint8_t opcode, opmod, ds, fm_ce_se, signature;
    uint16_t idx;
    uint32_t qpn, imm;
    /* READ only */
    uint64_t raddr;
    uint32_t rkey;
    uint32_t byte_count, lkey;
    uint64_t laddr;
} engram_mlx5_wqe_fields_t;

void engram_mlx5_wqe_decode(const void *wqe, engram_mlx5_wqe_fields_t *out);

#endif
