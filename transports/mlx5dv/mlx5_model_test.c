/* The mlx5dv transport on the software NIC model, between forked ranks:
 * gets from every peer (direct and hybrid), 16-bit WQE counter and CQ
 * owner-bit wrap-around over 70,000 reads, ring-full back-pressure
 * (max_rd_atomic bound, then ring-slot bound), a bounds violation turned
 * into a remote access error CQE by the model and reported with its
 * syndrome, and injected errors flushing the QP. The model must see no
 * malformed WQE throughout. */
#include <stdio.h>
#include <string.h>

#include "hal/config_keys.h"
#include "hal/registry.h"
#include "memory/host_segment.h"
#include "tests/check.h"
#include "tests/transport_testing.h"
#include "transports/mlx5dv/mlx5dv.h"
#include "transports/mlx5dv/testing/mlx5_model.h"

static const engram_transport_ops_t *ops = &engram_mlx5dv_ops;

#define SEG_BYTES (64 * 1024)
#define DST_BYTES (256 * 1024)
#define ROW 64

typedef struct fixture {
    engram_group_t *g;
    engram_config_t *cfg;
    engram_transport_t *t;
    engram_segment_t *seg, *dst;
    engram_region_t *remote, *local;
    bool hybrid;
} fixture_t;

static void fixture_open(fixture_t *f, engram_group_t *g, bool hybrid, const char *timeout_ms)
{
    const char *why = NULL;
    CHECK(ops->available(g, &why));
    f->g = g;
    f->hybrid = hybrid;
    CHECK_OK(engram_config_create(&f->cfg));
    CHECK_OK(engram_config_set(f->cfg, "mode", hybrid ? "hybrid" : "direct"));
    CHECK_OK(engram_config_set(f->cfg, "timeout_ms", timeout_ms));
    CHECK_OK(engram_transport_open(ops, g, f->cfg, &f->t));
    f->seg = testing_host_segment(SEG_BYTES, ENGRAM_HUGE_OFF);
    unsigned char *b = f->seg->addr;
    for (size_t i = 0; i < f->seg->size; i++)
        b[i] = testing_pattern(engram_group_rank(g), i);
    f->dst = testing_host_segment(DST_BYTES, ENGRAM_HUGE_OFF);
    CHECK_OK(ops->reg_symmetric(f->t, f->seg, hybrid ? ENGRAM_REG_NODE_SPAN : ENGRAM_REG_RANK, &f->remote));
    CHECK_OK(ops->reg_local(f->t, f->dst, &f->local));
}

static void fixture_close(fixture_t *f)
{
    engram_mlx5_model_stats_t s;
    engram_mlx5_model_stats(&s);
    if (s.violations != 0)
        fprintf(stderr, "model violation: %s\n", s.first_violation);
    CHECK(s.violations == 0);
    CHECK_OK(engram_group_barrier(f->g)); /* no rank unmaps while another still reads */
    ops->dereg(f->t, f->local);
    ops->close(f->t);
    engram_config_destroy(f->cfg);
    engram_host_segment_ops.free(f->dst);
    engram_host_segment_ops.free(f->seg);
}

static engram_status_t flush_wait(fixture_t *f, int queue, int peer)
{
    engram_request_t *req = NULL;
    engram_status_t st = ops->flush(f->t, queue, peer, &req);
    if (st != ENGRAM_OK)
        return st;
    while ((st = ops->test(f->t, req)) == ENGRAM_INPROGRESS)
        ;
    ops->request_free(f->t, req);
    return st;
}

/* The rank and segment offset behind (peer, remote offset). */
static void source_of(const fixture_t *f, int peer, uint64_t off, int *rank, uint64_t *seg_off)
{
    int local = engram_group_local_size(f->g);
    if (f->hybrid) {
        *rank = peer * local + (int)(off / f->seg->size);
        *seg_off = off % f->seg->size;
    } else {
        *rank = peer;
        *seg_off = off;
    }
}

static void check_row(const fixture_t *f, uint64_t dst_off, int peer, uint64_t off, size_t len)
{
    const unsigned char *d = (const unsigned char *)f->dst->addr + dst_off;
    for (size_t i = 0; i < len; i++) {
        int rank;
        uint64_t so;
        source_of(f, peer, off + i, &rank, &so);
        CHECK(d[i] == testing_pattern(rank, so));
    }
}

static int npeers(const fixture_t *f)
{
    int n = engram_group_size(f->g);
    return f->hybrid ? n / engram_group_local_size(f->g) : n;
}

/* Every queue reads rows from every peer, each queue into its own area. */
static void check_every_peer(fixture_t *f)
{
    uint64_t region = f->hybrid ? f->seg->size * (uint64_t)engram_group_local_size(f->g) : f->seg->size;
    for (int q = 0; q < 4; q++) {
        for (int p = 0; p < npeers(f); p++) {
            for (int i = 0; i < 40; i++) {
                uint64_t off = ((uint64_t)i * 7919 * ROW + (uint64_t)q * 100) % (region - ROW);
                uint64_t dst = ((uint64_t)(q * npeers(f) + p) * 40 + (uint64_t)i) * ROW;
                CHECK_OK(ops->get(f->t, q, p, f->remote, off, f->local, dst, ROW, i % 5 ? ENGRAM_GET_AGGREGATE : 0));
            }
            CHECK_OK(flush_wait(f, q, p));
            for (int i = 0; i < 40; i++) {
                uint64_t off = ((uint64_t)i * 7919 * ROW + (uint64_t)q * 100) % (region - ROW);
                check_row(f, ((uint64_t)(q * npeers(f) + p) * 40 + (uint64_t)i) * ROW, p, off, ROW);
            }
        }
    }
}

static int rank_basic(engram_group_t *g, void *arg)
{
    fixture_t f;
    fixture_open(&f, g, *(bool *)arg, "30000");
    check_every_peer(&f);
    fixture_close(&f);
    return 0;
}

/* 70,000 reads on one QP: the 16-bit WQE index wraps once, the CQ's owner
 * bit flips hundreds of times; every row is checked. */
static int rank_wrap(engram_group_t *g, void *arg)
{
    (void)arg;
    fixture_t f;
    fixture_open(&f, g, false, "30000");
    int peer = (engram_group_rank(g) + 1) % engram_group_size(g);
    const uint32_t total = 70000, batch = DST_BYTES / ROW;
    for (uint32_t done = 0; done < total;) {
        uint32_t n = total - done < batch ? total - done : batch;
        memset(f.dst->addr, 0, DST_BYTES);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t off = (uint64_t)((done + i) * 131u % (SEG_BYTES / ROW)) * ROW;
            CHECK_OK(ops->get(f.t, 1, peer, f.remote, off, f.local, (uint64_t)i * ROW, ROW, ENGRAM_GET_AGGREGATE));
        }
        CHECK_OK(flush_wait(&f, 1, peer));
        for (uint32_t i = 0; i < n; i++)
            check_row(&f, (uint64_t)i * ROW, peer, (uint64_t)((done + i) * 131u % (SEG_BYTES / ROW)) * ROW, ROW);
        done += n;
    }
    engram_mlx5_model_stats_t s;
    engram_mlx5_model_stats(&s);
    CHECK(s.reads >= total);
    CHECK(s.wqes > 65536);            /* the WQE index wrapped */
    CHECK(s.cqes > 8 * 2 * 256);      /* the 512-entry CQ went round many times */
    CHECK(s.error_cqes == 0);
    fixture_close(&f);
    return 0;
}

/* With the NIC paused, exactly `window` WQEs fit; the next get waits for
 * a completion and times out. Resumed, 10,000 more reads (far more than
 * the window and the ring) go through with back-pressure. */
static void check_backpressure(fixture_t *f, uint32_t window)
{
    int peer = engram_group_rank(f->g);
    engram_mlx5_model_pause(true);
    for (uint32_t i = 0; i < window; i++)
        CHECK_OK(ops->get(f->t, 2, peer, f->remote, (uint64_t)i * ROW, f->local, (uint64_t)i * ROW, ROW,
                          ENGRAM_GET_AGGREGATE));
    CHECK_STATUS(ops->get(f->t, 2, peer, f->remote, 0, f->local, 0, ROW, ENGRAM_GET_AGGREGATE), ENGRAM_ERR_TIMEOUT);
    CHECK(strstr(engram_last_error(), "WQEs outstanding") != NULL);
    engram_mlx5_model_pause(false);
    CHECK_OK(flush_wait(f, 2, peer));
    engram_mlx5_model_stats_t s;
    engram_mlx5_model_stats(&s);
    CHECK(s.max_pending == window); /* the doorbell announced the full window at once, never more */
    for (uint32_t i = 0; i < 10000; i++) {
        uint64_t slot = i % (DST_BYTES / ROW);
        CHECK_OK(ops->get(f->t, 2, peer, f->remote, (uint64_t)(i % (SEG_BYTES / ROW)) * ROW, f->local, slot * ROW,
                          ROW, ENGRAM_GET_AGGREGATE));
    }
    CHECK_OK(flush_wait(f, 2, peer));
    for (uint32_t i = 10000 - DST_BYTES / ROW; i < 10000; i++)
        check_row(f, (uint64_t)(i % (DST_BYTES / ROW)) * ROW, peer, (uint64_t)(i % (SEG_BYTES / ROW)) * ROW, ROW);
    engram_mlx5_model_stats(&s);
    CHECK(s.max_pending <= window);
    engram_transport_caps_t caps;
    ops->caps(f->t, &caps);
    CHECK(caps.max_outstanding == (int)window); /* per (queue, peer): one QP's window */
}

static int rank_backpressure(engram_group_t *g, void *arg)
{
    (void)arg;
    fixture_t f;
    engram_mlx5_model_set_max_rd_atomic(16); /* a ConnectX's initiator depth: the bound */
    fixture_open(&f, g, false, "300");
    check_backpressure(&f, 16);
    fixture_close(&f);
    engram_mlx5_model_set_max_rd_atomic(1024); /* deeper than the ring: its 255 usable slots bound */
    fixture_open(&f, g, false, "300");
    check_backpressure(&f, 255);
    fixture_close(&f);
    return 0;
}

/* Rows that lie inside the transport's bounds but outside what the model
 * now lets peers read: remote access error, named with its syndrome; the
 * QP is then in error and refuses more work. Injected errors: a remote
 * access error flushes the WQEs behind it (flush-error CQEs). */
static int rank_errors(engram_group_t *g, void *arg)
{
    (void)arg;
    fixture_t f;
    fixture_open(&f, g, false, "30000");
    int peer = (engram_group_rank(g) + 1) % engram_group_size(g);
    CHECK_OK(ops->get(f.t, 0, peer, f.remote, 8192, f.local, 0, ROW, 0));
    CHECK_OK(flush_wait(&f, 0, peer));
    engram_mlx5_model_limit_peers(4096);
    CHECK_OK(ops->get(f.t, 0, peer, f.remote, 4096 - ROW, f.local, 0, ROW, ENGRAM_GET_AGGREGATE)); /* still inside */
    CHECK_OK(ops->get(f.t, 0, peer, f.remote, 8192, f.local, ROW, ROW, ENGRAM_GET_AGGREGATE));
    CHECK_STATUS(flush_wait(&f, 0, peer), ENGRAM_ERR_TRANSPORT);
    CHECK(strstr(engram_last_error(), "remote access error (syndrome 0x13") != NULL);
    CHECK(strstr(engram_last_error(), "queue 0 peer") != NULL);
    CHECK_STATUS(ops->get(f.t, 0, peer, f.remote, 0, f.local, 0, ROW, 0), ENGRAM_ERR_TRANSPORT);
    engram_request_t *req = NULL;
    CHECK_STATUS(ops->flush(f.t, 0, peer, &req), ENGRAM_ERR_TRANSPORT);
    engram_mlx5_model_stats_t s;
    engram_mlx5_model_stats(&s);
    CHECK(s.error_cqes == 2); /* the failed READ, then the flush NOP behind it */

    /* Other QPs are unaffected; an injected error on the 4th of 10 reads. */
    engram_mlx5_model_inject(0x13, 3);
    for (int i = 0; i < 10; i++)
        CHECK_OK(ops->get(f.t, 3, peer, f.remote, 0, f.local, (uint64_t)i * ROW, ROW, ENGRAM_GET_AGGREGATE));
    CHECK_STATUS(flush_wait(&f, 3, peer), ENGRAM_ERR_TRANSPORT);
    CHECK(strstr(engram_last_error(), "remote access error (syndrome 0x13, vendor syndrome 0x88) on RDMA READ WQE 3") !=
          NULL);
    engram_mlx5_model_stats(&s);
    CHECK(s.error_cqes == 2 + 1 + 6 + 1); /* the failed READ, 6 READs and the NOP flushed */
    /* An injected flush error is reported by its name too. */
    engram_mlx5_model_inject(0x05, 0);
    CHECK_OK(ops->get(f.t, 2, peer, f.remote, 0, f.local, 0, ROW, 0));
    CHECK_STATUS(flush_wait(&f, 2, peer), ENGRAM_ERR_TRANSPORT);
    CHECK(strstr(engram_last_error(), "flushed in error (syndrome 0x05") != NULL);
    CHECK_OK(ops->get(f.t, 1, peer, f.remote, 0, f.local, 0, ROW, 0));
    CHECK_OK(flush_wait(&f, 1, peer));
    check_row(&f, 0, peer, 0, ROW);
    fixture_close(&f);
    return 0;
}

int main(void)
{
    bool direct = false, hybrid = true;
    CHECK_OK(engram_group_fork_run(4, 4, rank_basic, &direct, NULL));
    CHECK_OK(engram_group_fork_run(4, 2, rank_basic, &direct, NULL));
    CHECK_OK(engram_group_fork_run(4, 2, rank_basic, &hybrid, NULL));
    CHECK_OK(engram_group_fork_run(2, 2, rank_wrap, NULL, NULL));
    CHECK_OK(engram_group_fork_run(2, 2, rank_backpressure, NULL, NULL));
    CHECK_OK(engram_group_fork_run(2, 2, rank_errors, NULL, NULL));
    printf("mlx5_model_test: ok\n");
    return 0;
}
