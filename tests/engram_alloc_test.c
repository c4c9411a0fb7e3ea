/* The engram layer with a transport that provides symmetric memory
 * (alloc_symmetric, played by the recording transport on a one-rank
 * group): a direct table's shard is that memory (engram_write lands in
 * it); UNSUPPORTED falls back to a host segment and reg_symmetric; another
 * failure fails the table with nothing left registered; hybrid tables and
 * huge_pages=on never ask. */
#include <stdio.h>
#include <string.h>

#include "engram/engram.h"
#include "engram/log.h"
#include "tests/check.h"
#include "tests/recording_transport.h"

enum { EPR = 64, ROW = 40, STRIDE = 64, EPT = 2, TOKENS = 4 };

static engram_status_t open_table(engram_group_t *g, const char *mode, const char *huge, engram_context_t **ctx,
                                  engram_table_t **t)
{
    engram_config_t *cfg;
    CHECK_OK(engram_config_create(&cfg));
    CHECK_OK(engram_config_set(cfg, "transport", "recording"));
    CHECK_OK(engram_config_set(cfg, "mode", mode));
    CHECK_OK(engram_config_set(cfg, "huge_pages", huge));
    CHECK_OK(engram_context_create(cfg, g, ctx));
    engram_config_destroy(cfg);
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = EPR, .row_bytes = ROW,
                               .entries_per_token = EPT, .max_tokens = TOKENS, .recv = ENGRAM_RECV_HOST};
    recording_alloc_calls = 0;
    recording_alloc_addr = NULL;
    return engram_table_create(*ctx, &p, t);
}

/* The table's "cannot provide the shard's memory" info line. */
static char decline_line[ENGRAM_LAST_ERROR_BYTES];

static void keep_decline_line(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg, (void)level, (void)file, (void)line;
    if (strstr(msg, "cannot provide the shard's memory") != NULL)
        snprintf(decline_line, sizeof(decline_line), "%s", msg);
}

static void close_table(engram_context_t *ctx, engram_table_t *t)
{
    CHECK_OK(engram_table_destroy(t));
    CHECK_OK(engram_context_destroy(ctx));
    CHECK(recording_log.open_regions == 0);
}

static void write_rows(engram_table_t *t, char *rows)
{
    for (int i = 0; i < EPR * ROW; i++)
        rows[i] = (char)(i * 7 + 1);
    CHECK_OK(engram_write(t, rows, ROW, NULL));
}

int main(void)
{
    engram_group_t *g;
    CHECK_OK(engram_group_solo_create(&g));
    engram_context_t *ctx;
    engram_table_t *t;
    static char rows[EPR * ROW];

    /* Provided: the shard is the transport's memory, rows at the stride. */
    recording_alloc_status = ENGRAM_OK;
    CHECK_OK(open_table(g, "direct", "auto", &ctx, &t));
    CHECK(recording_alloc_calls == 1 && recording_log.last_span == ENGRAM_REG_RANK);
    CHECK(recording_log.open_regions == 2); /* shard + receive slots */
    write_rows(t, rows);
    for (int i = 0; i < EPR; i++)
        CHECK(memcmp((char *)recording_alloc_addr + i * STRIDE, rows + i * ROW, ROW) == 0);
    close_table(ctx, t);

    /* Declined: a host segment, registered. The transport gave no
     * message, so the info line must not quote an older error as its
     * reason. */
    recording_alloc_status = ENGRAM_ERR_UNSUPPORTED;
    (void)ENGRAM_ERROR(ENGRAM_ERR_INVALID, "an older error");
    engram_log_set_handler(keep_decline_line, NULL);
    CHECK_OK(open_table(g, "direct", "auto", &ctx, &t));
    engram_log_set_handler(NULL, NULL);
    CHECK(strstr(decline_line, "no reason given") != NULL && strstr(decline_line, "older") == NULL);
    CHECK(recording_alloc_calls == 1 && recording_alloc_addr == NULL && recording_log.open_regions == 2);
    write_rows(t, rows);
    close_table(ctx, t);

    /* Failed: the table fails, nothing stays registered. */
    recording_alloc_status = ENGRAM_ERR_NOMEM;
    CHECK_STATUS(open_table(g, "direct", "auto", &ctx, &t), ENGRAM_ERR_NOMEM);
    CHECK(recording_alloc_calls == 1 && recording_log.open_regions == 0);
    CHECK_OK(engram_context_destroy(ctx));

    /* Never asked: hybrid (node-mates map host segments by fd) and
     * huge_pages=on (only host segments promise huge pages; without them
     * on this machine the table may fail, but not by asking). */
    recording_alloc_status = ENGRAM_OK;
    CHECK_OK(open_table(g, "hybrid", "auto", &ctx, &t));
    CHECK(recording_alloc_calls == 0 && recording_log.last_span == ENGRAM_REG_NODE_SPAN);
    close_table(ctx, t);
    engram_status_t st = open_table(g, "direct", "on", &ctx, &t);
    CHECK(recording_alloc_calls == 0);
    if (st == ENGRAM_OK)
        CHECK_OK(engram_table_destroy(t));
    CHECK_OK(engram_context_destroy(ctx));

    engram_group_destroy(g);
    puts("engram_alloc_test: ok");
    return 0;
}
