/* The engram layer's flush policy and routing, checked against a recording
 * transport in one process that plays rank 1 of a 4-rank group:
 * which gets carry AGGREGATE, which (queue, peer) pairs get flushed (none
 * for idle peers), which offsets are read, and that everything registered
 * and requested is released; a GPU-only transport refuses host-receive
 * tables. */
#include <string.h>
#include <unistd.h>

#include "engram/engram.h"
#include "tests/check.h"
#include "tests/recording_transport.h"
#include "tests/single_rank.h"

enum { RANKS = 4, EPR = 100, EPT = 3, TOKENS = 40, ROW = 40 /* stride 64 */ };

static engram_table_t *open_table(engram_group_t *g, engram_context_t **ctx, const char *mode, const char *qps,
                                  const char *depth)
{
    const char *settings[] = {"mode", mode, "num_qps", qps, "flush_depth", depth, NULL};
    CHECK_OK(test_context_open(g, "recording", settings, ctx));
    engram_table_t *t;
    CHECK_OK(test_host_table_open(*ctx, EPR, ROW, EPT, TOKENS, &t));
    return t;
}

/* Rows owned by ranks 0..2 only (rank 3 idle), in a fixed pattern. */
static void make_indices(int64_t *idx)
{
    for (int i = 0; i < TOKENS * EPT; i++)
        idx[i] = (int64_t)((i % 3) * EPR + (i * 7) % EPR);
}

static void check_direct(engram_group_t *g)
{
    engram_context_t *ctx;
    engram_table_t *t = open_table(g, &ctx, "direct", "2", "4");
    CHECK(recording_log.last_span == ENGRAM_REG_RANK);
    int64_t idx[TOKENS * EPT];
    make_indices(idx);
    recording_log.num_ops = 0;
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(t, idx, TOKENS, 0, &f));
    int count[2][RANKS] = {{0}};
    int flushes[2][RANKS] = {{0}};
    int gets = 0;
    for (int i = 0; i < recording_log.num_ops; i++) {
        const recorded_op_t *op = &recording_log.ops[i];
        CHECK(op->queue >= 0 && op->queue < 2 && op->peer >= 0 && op->peer < RANKS);
        if (op->kind == 'g') {
            /* token = row / EPT; queue = token * 2 / TOKENS */
            uint64_t row = op->local_off / ROW;
            CHECK(op->queue == (int)((row / EPT) * 2 / TOKENS));
            CHECK(op->peer == (int)(idx[row] / EPR));
            CHECK(op->remote_off == (uint64_t)(idx[row] % EPR) * 64);
            CHECK(op->len == ROW);
            int n = ++count[op->queue][op->peer];
            CHECK(op->flags == (n % 4 == 0 ? 0u : ENGRAM_GET_AGGREGATE));
            CHECK(flushes[op->queue][op->peer] == 0); /* flushes come after every get */
            gets++;
        } else {
            CHECK(op->kind == 'f');
            CHECK(count[op->queue][op->peer] > 0); /* no flush for an idle (queue, peer) */
            flushes[op->queue][op->peer]++;
        }
    }
    CHECK(gets == TOKENS * EPT);
    for (int q = 0; q < 2; q++)
        for (int p = 0; p < RANKS; p++)
            CHECK(flushes[q][p] == (count[q][p] > 0 ? 1 : 0));
    CHECK(count[0][3] == 0 && count[1][3] == 0);
    const void *rows;
    CHECK_OK(engram_wait(f, &rows, NULL));
    uint64_t tag[2];
    memcpy(tag, (const char *)rows + 5 * ROW, sizeof(tag));
    CHECK(tag[0] == (uint64_t)(idx[5] / EPR) && tag[1] == (uint64_t)(idx[5] % EPR) * 64);
    engram_fetch_release(f);
    CHECK(recording_log.open_requests == 0);
    CHECK_OK(engram_table_destroy(t));
    CHECK_OK(engram_context_destroy(ctx));
    CHECK(recording_log.open_regions == 0);
}

/* Hybrid, 2 nodes x 2: peer = node, offset = intra * rank_stride + local * stride. */
static void check_hybrid(engram_group_t *g)
{
    engram_context_t *ctx;
    engram_table_t *t = open_table(g, &ctx, "hybrid", "1", "768");
    CHECK(recording_log.last_span == ENGRAM_REG_NODE_SPAN);
    int64_t idx[TOKENS * EPT];
    for (int i = 0; i < TOKENS * EPT; i++)
        idx[i] = (int64_t)((i % RANKS) * EPR + i % EPR);
    recording_log.num_ops = 0;
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(t, idx, TOKENS, 0, &f));
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const uint64_t rank_stride = (EPR * 64 + page - 1) / page * page; /* the shard, page-rounded */
    int flushes = 0;
    for (int i = 0; i < recording_log.num_ops; i++) {
        const recorded_op_t *op = &recording_log.ops[i];
        if (op->kind == 'f') {
            flushes++;
            continue;
        }
        uint64_t row = op->local_off / ROW;
        uint64_t owner = (uint64_t)idx[row] / EPR;
        CHECK(op->peer == (int)(owner / 2));
        CHECK(op->remote_off == (owner % 2) * rank_stride + (uint64_t)(idx[row] % EPR) * 64);
        CHECK(op->flags == ENGRAM_GET_AGGREGATE); /* 120 gets < depth 768: all aggregated */
    }
    CHECK(flushes == 2); /* one queue, two nodes */
    CHECK_OK(engram_wait(f, NULL, NULL));
    engram_fetch_release(f);
    CHECK_OK(engram_table_destroy(t));
    CHECK_OK(engram_context_destroy(ctx));
}

/* A transport that posts gets only from GPU kernels takes no host-receive
 * table, with a clear error, and nothing stays registered. */
static void check_host_table_refused(engram_group_t *g)
{
    recording_caps.flags = ENGRAM_CAP_GPU_INITIATED;
    engram_config_t *cfg;
    CHECK_OK(engram_config_create(&cfg));
    CHECK_OK(engram_config_set(cfg, "transport", "recording"));
    engram_context_t *ctx;
    CHECK_OK(engram_context_create(cfg, g, &ctx));
    engram_config_destroy(cfg);
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = EPR, .row_bytes = ROW,
                               .entries_per_token = EPT, .max_tokens = TOKENS, .recv = ENGRAM_RECV_HOST};
    engram_table_t *t = NULL;
    CHECK_STATUS(engram_table_create(ctx, &p, &t), ENGRAM_ERR_UNSUPPORTED);
    CHECK(t == NULL && strstr(engram_last_error(), "posts gets only from GPU kernels") != NULL);
    CHECK(recording_log.open_regions == 0);
    CHECK_OK(engram_context_destroy(ctx));
    recording_caps_reset();
}

int main(void)
{
    engram_group_t *g;
    CHECK_OK(replicated_group_create(1, RANKS, 2, &g));
    check_direct(g);
    check_hybrid(g);
    check_host_table_refused(g);
    engram_group_destroy(g);
    puts("engram_flush_test: ok");
    return 0;
}
