#include "transports/mlx5dv/testing/mlx5_wqe_decode.h"

#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <string.h>

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
