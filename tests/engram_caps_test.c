/* The engram layer decides with the transport's capabilities, checked
 * against the recording transport with caps set per case: a table whose
 * shard the transport cannot read, or whose receive slots it cannot
 * write, is refused naming the transport and the memory kind; a group
 * spanning hosts is refused at context create by a transport without
 * ENGRAM_CAP_CROSS_HOST; and the doorbell rings at least every
 * max_outstanding gets per (queue, peer) whatever flush_depth says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/engram.h"
#include "hal/group_provider.h"
#include "tests/check.h"
#include "tests/recording_transport.h"
#include "tests/single_rank.h"

enum { RANKS = 2, EPR = 64, EPT = 4, TOKENS = 10, ROW = 32 };

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = ROW, .entries_per_token = EPT, .max_tokens = TOKENS,
                                             .recv = ENGRAM_RECV_HOST};

static engram_context_t *open_context(engram_group_t *g, const char *flush_depth)
{
    engram_config_t *cfg;
    CHECK_OK(engram_config_create(&cfg));
    CHECK_OK(engram_config_set(cfg, "transport", "recording"));
    CHECK_OK(engram_config_set(cfg, "huge_pages", "off"));
    CHECK_OK(engram_config_set(cfg, "num_qps", "1"));
    CHECK_OK(engram_config_set(cfg, "flush_depth", flush_depth));
    engram_context_t *ctx = NULL;
    CHECK_OK(engram_context_create(cfg, g, &ctx));
    engram_config_destroy(cfg);
    return ctx;
}

static void check_table_refused(engram_group_t *g, const char *why)
{
    engram_context_t *ctx = open_context(g, "768");
    engram_table_t *t = NULL;
    CHECK_STATUS(engram_table_create(ctx, &params, &t), ENGRAM_ERR_UNSUPPORTED);
    CHECK(t == NULL);
    if (strstr(engram_last_error(), why) == NULL) {
        fprintf(stderr, "error '%s' lacks '%s'\n", engram_last_error(), why);
        CHECK(0);
    }
    CHECK(recording_log.open_regions == 0);
    CHECK_OK(engram_context_destroy(ctx));
    recording_caps_reset();
}

static void check_kinds(engram_group_t *g)
{
    recording_caps.read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_CUDA_DEVICE);
    check_table_refused(g, "transport recording cannot read host memory, where this table's shard lies");
    recording_caps.write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_CUDA_HOST_NUMA);
    check_table_refused(g, "transport recording cannot write host memory, where this table's rows are received");
}

/* The group's host map is cached (hal/group.h): setting it plays ranks
 * on two hosts without a second machine (tests/reliability/
 * engram_two_hosts_test makes two hosts of one machine for real). */
static void check_cross_host(void)
{
    engram_group_t *g;
    CHECK_OK(replicated_group_create(0, RANKS, 1, &g));
    engram_group_hosts_t *h = calloc(1, sizeof(*h));
    CHECK(h != NULL && (h->first = malloc(RANKS * sizeof(int))) != NULL);
    h->count = RANKS;
    for (int r = 0; r < RANKS; r++)
        h->first[r] = r;
    snprintf(h->spread, sizeof(h->spread), "rank 1 is elsewhere");
    g->hosts = h; /* freed by engram_group_destroy */
    engram_config_t *cfg;
    CHECK_OK(engram_config_create(&cfg));
    CHECK_OK(engram_config_set(cfg, "transport", "recording"));
    engram_context_t *ctx = NULL;
    CHECK_STATUS(engram_context_create(cfg, g, &ctx), ENGRAM_ERR_UNSUPPORTED);
    CHECK(ctx == NULL);
    CHECK(strstr(engram_last_error(), "transport recording reaches only ranks on its own host") != NULL);
    CHECK(strstr(engram_last_error(), "ranks run on 2 hosts: rank 1 is elsewhere") != NULL);
    recording_caps.flags |= ENGRAM_CAP_CROSS_HOST;
    CHECK_OK(engram_context_create(cfg, g, &ctx));
    CHECK_OK(engram_context_destroy(ctx));
    recording_caps_reset();
    engram_config_destroy(cfg);
    engram_group_destroy(g);
}

/* Every row from peer 1, on one queue: the n-th get rings the doorbell
 * when n is a multiple of `every`. */
static void check_doorbells(engram_group_t *g, int max_outstanding, const char *flush_depth, int every)
{
    recording_caps.max_outstanding = max_outstanding;
    engram_context_t *ctx = open_context(g, flush_depth);
    engram_table_t *t;
    CHECK_OK(engram_table_create(ctx, &params, &t));
    static char rows[EPR * ROW];
    CHECK_OK(engram_write(t, rows, ROW, NULL));
    int64_t idx[TOKENS * EPT];
    for (int i = 0; i < TOKENS * EPT; i++)
        idx[i] = EPR + i % EPR;
    recording_log.num_ops = 0;
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(t, idx, TOKENS, 0, &f));
    int gets = 0;
    for (int i = 0; i < recording_log.num_ops; i++) {
        const recorded_op_t *op = &recording_log.ops[i];
        if (op->kind != 'g')
            continue;
        gets++;
        CHECK(op->queue == 0 && op->peer == 1);
        CHECK(op->flags == (gets % every == 0 ? 0u : ENGRAM_GET_AGGREGATE));
    }
    CHECK(gets == TOKENS * EPT);
    CHECK_OK(engram_wait(f, NULL, NULL));
    CHECK_OK(engram_fetch_release(f));
    CHECK_OK(engram_table_destroy(t));
    CHECK_OK(engram_context_destroy(ctx));
    recording_caps_reset();
}

int main(void)
{
    engram_group_t *g;
    CHECK_OK(replicated_group_create(0, RANKS, 1, &g));
    check_kinds(g);
    check_doorbells(g, 4, "768", 4);     /* capped by the queue */
    check_doorbells(g, 1 << 20, "7", 7); /* flush_depth within it */
    check_doorbells(g, 0, "768", 768);   /* no bound stated */
    engram_group_destroy(g);
    check_cross_host();
    puts("engram_caps_test: ok");
    return 0;
}
