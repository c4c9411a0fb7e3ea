/* The CQE parser on hand-made CQEs (bytes laid out here per the PRM):
 * owner bit against the consumer index's wrap parity, invalid opcode,
 * wqe_counter, qpn, error CQEs with their syndromes named. */
#include "transports/mlx5dv/mlx5_cqe.h"

#include <stdio.h>
#include <string.h>

#include "tests/check.h"

#define CNT 8 /* CQEs in the ring under test */

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* A requester CQE: qpn at 56 (sop_drop_qpn), wqe_counter at 60, op_own at 63. */
static void make_req(uint8_t *c, uint32_t qpn, uint16_t counter, uint8_t owner)
{
    memset(c, 0, 64);
    put_be(c + 56, qpn, 4);
    put_be(c + 60, counter, 2);
    c[63] = (uint8_t)(0x0 << 4 | owner); /* MLX5_CQE_REQ */
}

/* An error CQE: vendor syndrome 54, syndrome 55, opcode|qpn 56, counter 60. */
static void make_err(uint8_t *c, uint32_t qpn, uint16_t counter, uint8_t syndrome, uint8_t owner)
{
    memset(c, 0, 64);
    c[54] = 0x77;
    c[55] = syndrome;
    put_be(c + 56, (uint32_t)0x10 << 24 | qpn, 4); /* failed WQE was an RDMA READ */
    put_be(c + 60, counter, 2);
    c[63] = (uint8_t)(13 << 4 | owner); /* MLX5_CQE_REQ_ERR */
}

int main(void)
{
    uint8_t c[64];
    engram_mlx5_cqe_info_t info;

    /* Freshly created ring: opcode invalid, owner 0: empty on the first pass. */
    memset(c, 0, sizeof(c));
    c[63] = 0xf0;
    CHECK(engram_mlx5_cqe_parse(c, 0, CNT, &info) == ENGRAM_MLX5_CQE_EMPTY);
    CHECK(engram_mlx5_cqe_parse(c, CNT, CNT, &info) == ENGRAM_MLX5_CQE_EMPTY);

    /* First pass (ci 0..CNT-1): owner 0 is software's, 1 is still the NIC's. */
    make_req(c, 0x1234, 41, 0);
    CHECK(engram_mlx5_cqe_parse(c, 3, CNT, &info) == ENGRAM_MLX5_CQE_OK);
    CHECK(info.opcode == 0 && info.wqe_counter == 41 && info.qpn == 0x1234);
    /* The same bytes seen one pass later are stale. */
    CHECK(engram_mlx5_cqe_parse(c, 3 + CNT, CNT, &info) == ENGRAM_MLX5_CQE_EMPTY);
    /* Second pass: the NIC writes owner 1. */
    make_req(c, 0x1234, 0xffff, 1);
    CHECK(engram_mlx5_cqe_parse(c, 3, CNT, &info) == ENGRAM_MLX5_CQE_EMPTY);
    CHECK(engram_mlx5_cqe_parse(c, 3 + CNT, CNT, &info) == ENGRAM_MLX5_CQE_OK);
    CHECK(info.wqe_counter == 0xffff);
    /* Third pass: parity back to 0; a consumer index far along still works. */
    make_req(c, 0xabcdef, 7, 0);
    CHECK(engram_mlx5_cqe_parse(c, 3 + 2 * CNT, CNT, &info) == ENGRAM_MLX5_CQE_OK);
    CHECK(engram_mlx5_cqe_parse(c, 3 + 1001 * CNT, CNT, &info) == ENGRAM_MLX5_CQE_EMPTY);
    CHECK(engram_mlx5_cqe_parse(c, 3 + 1000 * CNT, CNT, &info) == ENGRAM_MLX5_CQE_OK);
    CHECK(info.qpn == 0xabcdef && info.wqe_counter == 7);

    /* Error CQE: syndrome and the failed WQE named. */
    make_err(c, 0x42, 300, 0x13, 1);
    CHECK(engram_mlx5_cqe_parse(c, CNT + 1, CNT, &info) == ENGRAM_MLX5_CQE_ERROR);
    CHECK(info.syndrome == 0x13 && info.vendor_syndrome == 0x77 && info.qpn == 0x42 && info.wqe_counter == 300);
    CHECK(info.wqe_opcode == 0x10);
    char msg[160];
    engram_mlx5_cqe_describe(&info, msg, sizeof(msg));
    CHECK(strstr(msg, "remote access error (syndrome 0x13") != NULL);
    CHECK(strstr(msg, "RDMA READ WQE 300") != NULL);
    make_err(c, 0x42, 301, 0x05, 0);
    CHECK(engram_mlx5_cqe_parse(c, 2, CNT, &info) == ENGRAM_MLX5_CQE_ERROR);
    engram_mlx5_cqe_describe(&info, msg, sizeof(msg));
    CHECK(strstr(msg, "flushed in error (syndrome 0x05") != NULL);
    CHECK(strcmp(engram_mlx5_syndrome_str(0x04), "local protection error") == 0);
    CHECK(strcmp(engram_mlx5_syndrome_str(0xee), "unknown syndrome") == 0);

    /* A responder CQE (opcode 2, MLX5_CQE_RESP_SEND) on a send-only QP. */
    make_req(c, 1, 1, 0);
    c[63] = 2 << 4;
    CHECK(engram_mlx5_cqe_parse(c, 0, CNT, &info) == ENGRAM_MLX5_CQE_UNEXPECTED);
    printf("mlx5_cqe_test: ok\n");
    return 0;
}
