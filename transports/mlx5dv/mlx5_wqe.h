/* RDMA READ and NOP work queue entries in the mlx5 send-queue layout
 * (mlx5dv.h, the PRM): one 64-byte WQEBB each, every field big-endian.
 * The builder is the data path's; the decoder is the inverse, used by the
 * software NIC model and the tests to check each field. */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_WQE_H
#define ENGRAM_TRANSPORTS_MLX5DV_WQE_H

#include <stdbool.h>
#include <stdint.h>

/* Sizes in 16-byte units (the ctrl segment's ds field). */
#define ENGRAM_MLX5_READ_DS 3 /* ctrl + remote address + data segment */
#define ENGRAM_MLX5_NOP_DS 1  /* ctrl only */

/* Writes an RDMA READ of `len` (1..2^31-1) bytes from raddr/rkey into
 * laddr/lkey at `wqe`; `idx` is the 16-bit producer index. A signalled WQE
 * asks for a CQE. */
void engram_mlx5_wqe_read(void *wqe, uint16_t idx, uint32_t qpn, bool signaled, uint64_t raddr, uint32_t rkey,
                          uint64_t laddr, uint32_t lkey, uint32_t len);

/* A signalled NOP behind a small fence: it completes only after every
 * earlier read of its QP, so its CQE stands for all of them (a flush). */
void engram_mlx5_wqe_fence_nop(void *wqe, uint16_t idx, uint32_t qpn);

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
