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

engram_status_t single_rank_open(const char *transport, const char *const *settings, engram_group_t **group,
                                 engram_context_t **ctx)
{
    engram_status_t st = replicated_group_create(0, 1, 1, group);
    if (st != ENGRAM_OK)
        return st;
    engram_config_t *cfg = NULL;
    st = engram_config_create(&cfg);
    if (st == ENGRAM_OK)
        st = engram_config_set(cfg, "transport", transport);
    if (st == ENGRAM_OK)
        st = engram_config_set(cfg, "huge_pages", "off");
    for (int i = 0; st == ENGRAM_OK && settings != NULL && settings[i] != NULL; i += 2)
        st = engram_config_set(cfg, settings[i], settings[i + 1]);
    if (st == ENGRAM_OK)
        st = engram_context_create(cfg, *group, ctx);
    engram_config_destroy(cfg);
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
