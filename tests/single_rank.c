#include "tests/single_rank.h"

#include <string.h>

static int one_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    (void)ctx;
    memcpy(recv, send, bytes);
    return 0;
}

static int one_barrier(void *ctx)
{
    (void)ctx;
    return 0;
}

engram_status_t single_rank_open(const char *transport, const char *const *settings, engram_group_t **group,
                                 engram_context_t **ctx)
{
    engram_group_callbacks_t cb = {.size = sizeof(cb), .rank = 0, .nranks = 1, .local_size = 1,
                                   .allgather = one_allgather, .barrier = one_barrier};
    engram_status_t st = engram_group_from_callbacks(&cb, group);
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
