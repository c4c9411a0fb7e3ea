#include "tests/single_rank.h"

#include <stdlib.h>
#include <string.h>

static int replicated_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    int n = *(int *)ctx;
    for (int r = 0; r < n; r++)
        memcpy((char *)recv + (size_t)r * bytes, send, bytes);
    return 0;
}

static int replicated_barrier(void *ctx)
{
    (void)ctx;
    return 0;
}

engram_status_t replicated_group_create(int rank, int nranks, int local_size, engram_group_t **out)
{
    int *n = malloc(sizeof(*n));
    if (n == NULL)
        return ENGRAM_ERR_NOMEM;
    *n = nranks;
    engram_group_callbacks_t cb = {.size = sizeof(cb), .rank = rank, .nranks = nranks, .local_size = local_size,
                                   .ctx = n, .allgather = replicated_allgather, .barrier = replicated_barrier,
                                   .destroy = free};
    engram_status_t st = engram_group_callbacks_create(&cb, out);
    if (st != ENGRAM_OK)
        free(n);
    return st;
}

engram_status_t test_context_open(engram_group_t *group, const char *transport, const char *const *settings,
                                  engram_context_t **ctx)
{
    engram_config_t *cfg = NULL;
    engram_status_t st = engram_config_create(&cfg);
    if (st == ENGRAM_OK)
        st = engram_config_set(cfg, "transport", transport);
    if (st == ENGRAM_OK)
        st = engram_config_set(cfg, "huge_pages", "off");
    for (int i = 0; st == ENGRAM_OK && settings != NULL && settings[i] != NULL; i += 2)
        st = engram_config_set(cfg, settings[i], settings[i + 1]);
    if (st == ENGRAM_OK)
        st = engram_context_create(cfg, group, ctx);
    engram_config_destroy(cfg);
    return st;
}

engram_status_t test_host_table_open(engram_context_t *ctx, uint64_t entries_per_rank, uint32_t row_bytes,
                                     uint32_t entries_per_token, uint32_t max_tokens, engram_table_t **table)
{
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = entries_per_rank, .row_bytes = row_bytes,
                               .entries_per_token = entries_per_token, .max_tokens = max_tokens,
                               .recv = ENGRAM_RECV_HOST};
    engram_status_t st = engram_table_create(ctx, &p, table);
    if (st != ENGRAM_OK)
        return st;
    void *rows = calloc(entries_per_rank, row_bytes);
    st = rows != NULL ? engram_write(*table, rows, row_bytes, NULL) : ENGRAM_ERR_NOMEM;
    free(rows);
    if (st != ENGRAM_OK)
        (void)engram_table_destroy(*table);
    return st;
}

engram_status_t single_rank_open(const char *transport, const char *const *settings, engram_group_t **group,
                                 engram_context_t **ctx)
{
    engram_status_t st = replicated_group_create(0, 1, 1, group);
    if (st != ENGRAM_OK)
        return st;
    st = test_context_open(*group, transport, settings, ctx);
    if (st != ENGRAM_OK)
        engram_group_destroy(*group);
    return st;
}

engram_status_t single_rank_close(engram_group_t *group, engram_context_t *ctx)
{
    engram_status_t st = engram_context_destroy(ctx);
    engram_group_destroy(group);
    return st;
}
