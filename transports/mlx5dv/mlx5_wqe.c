#include "transports/mlx5dv/mlx5_wqe.h"

#include <endian.h>
#include <infiniband/mlx5dv.h>

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
