/* The WQE builder byte by byte against the mlx5 layout (offsets and
 * big-endian encodings written out here, not taken from the builder), and
 * the decoder as its inverse. */
#include "transports/mlx5dv/mlx5_wqe.h"
#include "transports/mlx5dv/testing/mlx5_wqe_decode.h"

#include <stdio.h>
#include <string.h>

#include "tests/check.h"

static uint64_t be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

static void check_read(uint16_t idx, uint32_t qpn, bool signaled)
{
    uint8_t w[64];
    memset(w, 0xaa, sizeof(w));
    const uint64_t raddr = 0x1122334455667788ull, laddr = 0x7f0011223344ull;
    const uint32_t rkey = 0xa1b2c3d4, lkey = 0x01020304, len = 256;
    engram_mlx5_wqe_read(w, idx, qpn, signaled, raddr, rkey, laddr, lkey, len);
    /* control segment */
    CHECK(w[0] == 0x00);                      /* opmod */
    CHECK(be(w + 1, 2) == idx);               /* wqe index */
    CHECK(w[3] == 0x10);                      /* MLX5_OPCODE_RDMA_READ */
    CHECK(be(w + 4, 3) == (qpn & 0xffffff));  /* qpn */
    CHECK(w[7] == 3);                         /* ds: three 16-byte segments */
    CHECK(w[8] == 0 && w[9] == 0 && w[10] == 0); /* signature, DCI stream */
    CHECK(w[11] == (signaled ? 0x08 : 0x00)); /* fm_ce_se: CQ update (ce = 2) */
    CHECK(be(w + 12, 4) == 0);                /* imm */
    /* remote address segment */
    CHECK(be(w + 16, 8) == raddr);
    CHECK(be(w + 24, 4) == rkey);
    CHECK(be(w + 28, 4) == 0);
    /* data segment */
    CHECK(be(w + 32, 4) == len);
    CHECK(be(w + 36, 4) == lkey);
    CHECK(be(w + 40, 8) == laddr);
    for (int i = 48; i < 64; i++)
        CHECK(w[i] == 0xaa); /* nothing written past the 48 bytes of ds */

    engram_mlx5_wqe_fields_t f;
    engram_mlx5_wqe_decode(w, &f);
    CHECK(f.opcode == 0x10 && f.opmod == 0 && f.idx == idx && f.qpn == (qpn & 0xffffff) && f.ds == 3);
    CHECK(f.fm_ce_se == (signaled ? 0x08 : 0) && f.signature == 0 && f.imm == 0);
    CHECK(f.raddr == raddr && f.rkey == rkey && f.byte_count == len && f.lkey == lkey && f.laddr == laddr);
}

static void check_nop(uint16_t idx, uint32_t qpn)
{
    uint8_t w[64];
    memset(w, 0xaa, sizeof(w));
    engram_mlx5_wqe_fence_nop(w, idx, qpn);
    CHECK(w[0] == 0 && be(w + 1, 2) == idx && w[3] == 0x00); /* MLX5_OPCODE_NOP */
    CHECK(be(w + 4, 3) == qpn && w[7] == 1);
    CHECK(w[11] == (0x08 | 0x20)); /* CQ update + initiator small fence */
    CHECK(be(w + 12, 4) == 0);
    for (int i = 16; i < 64; i++)
        CHECK(w[i] == 0xaa);
    engram_mlx5_wqe_fields_t f;
    engram_mlx5_wqe_decode(w, &f);
    CHECK(f.opcode == 0 && f.idx == idx && f.qpn == qpn && f.ds == 1 && f.fm_ce_se == 0x28);
}

int main(void)
{
    check_read(0, 0x000abc, false);
    check_read(1, 0x123456, true);
    check_read(0xffff, 0xffffff, true); /* the index's top value, before it wraps to 0 */
    check_read(0x8001, 0x000001, false);
    check_nop(0, 0x42);
    check_nop(0xfffe, 0xfedcba);
    printf("mlx5_wqe_test: ok\n");
    return 0;
}
