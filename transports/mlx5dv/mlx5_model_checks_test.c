/* The model is not a rubber stamp: WQEs broken one field at a time on a
 * bare model QP (ring ops only, no transport) get the error CQE a NIC
 * would write, and each malformed field is recorded as a violation. */
#include <string.h>
#include <time.h>

#include "tests/check.h"
#include "transports/mlx5dv/mlx5_cqe.h"
#include "transports/mlx5dv/mlx5_wqe.h"
#include "transports/mlx5dv/testing/mlx5_model.h"

static const engram_mlx5_ring_ops_t *R = &engram_mlx5_model_rings;

typedef struct wqe_case {
    const char *name;
    int patch_at;      /* byte of the WQE to overwrite, -1: none */
    uint8_t patch;
    bool read;         /* a READ (else a fenced NOP) */
    uint16_t idx;      /* the index written into the WQE (0 is due) */
    uint8_t syndrome;  /* expected, 0: a good completion */
    bool violation;    /* the model must record one */
} wqe_case_t;

static const wqe_case_t cases[] = {
    {"good NOP", -1, 0, false, 0, 0, false},
    {"index not due", -1, 0, false, 5, 0x02, true},
    {"wrong qpn", 6, 0xee, false, 0, 0x02, true},
    {"NOP ds 2", 7, 2, false, 0, 0x02, true},
    {"READ ds 4", 7, 4, true, 0, 0x02, true},
    {"RDMA WRITE opcode", 3, 0x08, true, 0, 0x02, true},
    {"CQE-on-error signalling bits", 11, 0x04, false, 0, 0x02, true},
    {"nonzero signature", 8, 0x5a, false, 0, 0x02, true},
    {"zero-length READ", 35, 0, true, 0, 0x02, true},
    {"unknown lkey", 39, 0x77, true, 0, 0x04, false},
    {"unregistered rkey", 27, 0x99, true, 0, 0x13, false},
};

/* Waits (bounded) for the CQE at index 0. */
static engram_mlx5_cqe_kind_t first_cqe(const engram_mlx5_rings_t *rings, engram_mlx5_cqe_info_t *info)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        engram_mlx5_cqe_kind_t k = engram_mlx5_cqe_parse(rings->cq_buf, 0, rings->cqe_cnt, info);
        if (k != ENGRAM_MLX5_CQE_EMPTY)
            return k;
        clock_gettime(CLOCK_MONOTONIC, &now);
        CHECK(now.tv_sec - t0.tv_sec < 10);
    }
}

static void run_case(engram_mlx5_dev_t *dev, const wqe_case_t *c, char *dst, uint32_t lkey)
{
    engram_mlx5_qp_t *qp;
    engram_mlx5_rings_t rings;
    engram_mlx5_qp_addr_t a;
    CHECK_OK(R->qp_create(dev, 16, &qp, &rings, &a));
    a.rank = 0;
    CHECK_OK(R->qp_connect(dev, qp, &a, &a, 1));
    engram_mlx5_model_stats_t before, after;
    engram_mlx5_model_stats(&before);
    if (c->read)
        engram_mlx5_wqe_read(rings.sq_buf, c->idx, rings.qpn, true, 0x1000, 0xabc, (uint64_t)(uintptr_t)dst, lkey,
                             64);
    else
        engram_mlx5_wqe_fence_nop(rings.sq_buf, c->idx, rings.qpn);
    if (c->patch_at >= 0)
        rings.sq_buf[c->patch_at] = c->patch;
    R->doorbell(&rings, 1, rings.sq_buf);
    engram_mlx5_cqe_info_t info;
    engram_mlx5_cqe_kind_t k = first_cqe(&rings, &info);
    engram_mlx5_model_stats(&after);
    if (k != (c->syndrome ? ENGRAM_MLX5_CQE_ERROR : ENGRAM_MLX5_CQE_OK) || info.syndrome != c->syndrome ||
        (after.violations != before.violations) != c->violation) {
        fprintf(stderr, "case '%s': CQE kind %d syndrome 0x%02x, violations %llu -> %llu\n", c->name, (int)k,
                info.syndrome, (unsigned long long)before.violations, (unsigned long long)after.violations);
        CHECK(false);
    }
    CHECK(info.wqe_counter == (uint16_t)0 && info.qpn == rings.qpn);
    R->qp_destroy(dev, qp);
}

int main(void)
{
    engram_mlx5_dev_t *dev;
    CHECK_OK(R->open(NULL, 0, &dev));
    static char dst[4096];
    engram_mlx5_mr_t *mr;
    uint32_t lkey, rkey;
    CHECK_OK(R->reg_mr(dev, dst, sizeof(dst), false, &mr, &lkey, &rkey));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(dev, &cases[i], dst, lkey);
    R->dereg_mr(dev, mr);
    R->close(dev);
    printf("mlx5_model_checks_test: ok\n");
    return 0;
}
