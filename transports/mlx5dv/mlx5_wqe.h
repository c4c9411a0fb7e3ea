/* RDMA READ and NOP work queue entries in the mlx5 send-queue layout
 * (mlx5dv.h, the PRM): one 64-byte WQEBB each, every field big-endian.
 * The builder is the data path's; its inverse, the decoder the software
 * NIC model and the tests check each field with, is test-only
 * (testing/mlx5_wqe_decode.h). */
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

#endif
