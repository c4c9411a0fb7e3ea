#include "transports/mlx5dv/mlx5_wqe.h"

#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <string.h>

_Static_assert(sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(struct mlx5_wqe_raddr_seg) +
                       sizeof(struct mlx5_wqe_data_seg) == ENGRAM_MLX5_READ_DS * 16,
               "a READ WQE is three 16-byte segments");
_Static_assert(ENGRAM_MLX5_READ_DS * 16 <= MLX5_SEND_WQE_BB, "a READ WQE fits one WQEBB");

void engram_mlx5_wqe_read(void *wqe, uint16_t idx, uint32_t qpn, bool signaled, uint64_t raddr, uint32_t rkey,
                          uint64_t laddr, uint32_t lkey, uint32_t len)
{
    struct mlx5_wqe_ctrl_seg *ctrl = wqe;
    struct mlx5_wqe_raddr_seg *raddr_seg = (struct mlx5_wqe_raddr_seg *)(ctrl + 1);
    struct mlx5_wqe_data_seg *data = (struct mlx5_wqe_data_seg *)(raddr_seg + 1);
    mlx5dv_set_ctrl_seg(ctrl, idx, MLX5_OPCODE_RDMA_READ, 0, qpn, signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0,
                        ENGRAM_MLX5_READ_DS, 0, 0);
    ctrl->dci_stream_channel_id = 0; /* DCI only; zero so a WQE is fully determined */
    raddr_seg->raddr = htobe64(raddr);
    raddr_seg->rkey = htobe32(rkey);
    raddr_seg->reserved = 0;
    mlx5dv_set_data_seg(data, len, lkey, (uintptr_t)laddr);
}

void engram_mlx5_wqe_fence_nop(void *wqe, uint16_t idx, uint32_t qpn)
{
    struct mlx5_wqe_ctrl_seg *ctrl = wqe;
    mlx5dv_set_ctrl_seg(ctrl, idx, MLX5_OPCODE_NOP, 0, qpn,
                        MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE, ENGRAM_MLX5_NOP_DS, 0, 0);
    ctrl->dci_stream_channel_id = 0;
}

void engram_mlx5_wqe_decode(const void *wqe, engram_mlx5_wqe_fields_t *out)
{
    struct mlx5_wqe_ctrl_seg ctrl;
    struct mlx5_wqe_raddr_seg raddr_seg;
    struct mlx5_wqe_data_seg data;
    memcpy(&ctrl, wqe, sizeof(ctrl));
    memcpy(&raddr_seg, (const char *)wqe + sizeof(ctrl), sizeof(raddr_seg));
    memcpy(&data, (const char *)wqe + sizeof(ctrl) + sizeof(raddr_seg), sizeof(data));
    uint32_t op = be32toh(ctrl.opmod_idx_opcode), qpn_ds = be32toh(ctrl.qpn_ds);
    *out = (engram_mlx5_wqe_fields_t){
        .opcode = (uint8_t)op,
        .idx = (uint16_t)(op >> 8),
        .opmod = (uint8_t)(op >> 24),
        .qpn = qpn_ds >> 8,
        .ds = (uint8_t)qpn_ds,
        .fm_ce_se = ctrl.fm_ce_se,
        .signature = ctrl.signature,
        .imm = be32toh(ctrl.imm),
        .raddr = be64toh(raddr_seg.raddr),
        .rkey = be32toh(raddr_seg.rkey),
        .byte_count = be32toh(data.byte_count),
        .lkey = be32toh(data.lkey),
        .laddr = be64toh(data.addr),
    };
}
