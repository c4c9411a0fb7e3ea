#include "transports/mlx5dv/mlx5_cqe.h"

#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <stdio.h>
#include <string.h>

#include "transports/mlx5dv/mlx5_barrier.h"

_Static_assert(sizeof(struct mlx5_cqe64) == 64 && sizeof(struct mlx5_err_cqe) == 64, "CQEs are 64 bytes");

engram_mlx5_cqe_kind_t engram_mlx5_cqe_parse(const void *cqe, uint32_t ci, uint32_t cqe_cnt,
                                             engram_mlx5_cqe_info_t *info)
{
    const struct mlx5_cqe64 *c = cqe;
    /* Relaxed: the ordering with the NIC's writes is the barrier below. */
    uint8_t op_own = __atomic_load_n(&c->op_own, __ATOMIC_RELAXED);
    uint8_t opcode = op_own >> 4;
    uint8_t parity = (ci & cqe_cnt) ? 1 : 0;
    if (opcode == MLX5_CQE_INVALID || (op_own & MLX5_CQE_OWNER_MASK) != parity)
        return ENGRAM_MLX5_CQE_EMPTY;
    engram_mlx5_from_device_barrier(); /* the CQE's fields read after its owner bit */
    info->opcode = opcode;
    info->wqe_counter = be16toh(c->wqe_counter);
    info->syndrome = info->vendor_syndrome = info->wqe_opcode = 0;
    if (opcode == MLX5_CQE_REQ_ERR || opcode == MLX5_CQE_RESP_ERR) {
        const struct mlx5_err_cqe *e = cqe;
        uint32_t op_qpn = be32toh(e->s_wqe_opcode_qpn);
        info->qpn = op_qpn & 0xffffff;
        info->wqe_opcode = (uint8_t)(op_qpn >> 24);
        info->syndrome = e->syndrome;
        info->vendor_syndrome = e->vendor_err_synd;
        return ENGRAM_MLX5_CQE_ERROR;
    }
    info->qpn = be32toh(c->sop_drop_qpn) & 0xffffff;
    return opcode == MLX5_CQE_REQ ? ENGRAM_MLX5_CQE_OK : ENGRAM_MLX5_CQE_UNEXPECTED;
}

const char *engram_mlx5_syndrome_str(uint8_t syndrome)
{
    switch (syndrome) {
    case MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR: return "local length error";
    case MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR: return "local QP operation error";
    case MLX5_CQE_SYNDROME_LOCAL_PROT_ERR: return "local protection error";
    case MLX5_CQE_SYNDROME_WR_FLUSH_ERR: return "flushed in error";
    case MLX5_CQE_SYNDROME_MW_BIND_ERR: return "memory window bind error";
    case MLX5_CQE_SYNDROME_BAD_RESP_ERR: return "bad response error";
    case MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR: return "local access error";
    case MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR: return "remote invalid request error";
    case MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR: return "remote access error";
    case MLX5_CQE_SYNDROME_REMOTE_OP_ERR: return "remote operation error";
    case MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR: return "remote aborted error";
    default: return "unknown syndrome";
    }
}

static const char *wqe_opcode_str(uint8_t opcode)
{
    switch (opcode) {
    case MLX5_OPCODE_RDMA_READ: return "RDMA READ";
    case MLX5_OPCODE_NOP: return "NOP";
    default: return "other";
    }
}

void engram_mlx5_cqe_describe(const engram_mlx5_cqe_info_t *info, char *buf, size_t len)
{
    snprintf(buf, len, "%s (syndrome 0x%02x, vendor syndrome 0x%02x) on %s WQE %u",
             engram_mlx5_syndrome_str(info->syndrome), info->syndrome, info->vendor_syndrome,
             wqe_opcode_str(info->wqe_opcode), info->wqe_counter);
}
