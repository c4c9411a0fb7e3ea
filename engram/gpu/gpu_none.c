/* Builds without CUDA: recv=CUDA tables are refused when their params are
 * checked, so the other hooks are never reached with a table. */
#include "engram/gpu/gpu_table.h"
#include "hal/log.h"

engram_status_t engram_gpu_table_check(const engram_context_t *ctx, const engram_table_params_t *p)
{
    (void)ctx;
    (void)p;
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                        "recv=CUDA needs the GPU fetch path: build with --config=cuda where nvcc and CUDA exist");
}

engram_status_t engram_gpu_table_create(engram_context_t *ctx, engram_table_t *t, engram_status_t st)
{
    (void)t;
    return engram_group_agree(ctx->group, st == ENGRAM_OK ? engram_gpu_table_check(ctx, NULL) : st);
}

engram_status_t engram_gpu_table_write_rows(engram_table_t *t, uint64_t first, uint64_t n, const void *rows)
{
    (void)first;
    (void)n;
    (void)rows;
    return engram_gpu_table_check(t->ctx, &t->params);
}

engram_status_t engram_gpu_table_write_end(engram_table_t *t, const uint32_t *scales)
{
    (void)scales;
    return engram_gpu_table_check(t->ctx, &t->params);
}

void engram_gpu_table_destroy(engram_table_t *t)
{
    (void)t;
}

const char *engram_gpu_table_path(const engram_table_t *t, int *gather_threads, uint64_t *cache_rows)
{
    (void)t;
    *gather_threads = 0;
    *cache_rows = 0;
    return "none";
}

engram_status_t engram_gpu_table_after_write(engram_table_t *t)
{
    return engram_gpu_table_check(t->ctx, &t->params);
}

char *engram_gpu_table_host_rows(const engram_table_t *t)
{
    (void)t;
    return NULL;
}

engram_status_t engram_gpu_cache_set(engram_table_t *t, const int64_t *rows, uint64_t n)
{
    (void)rows;
    (void)n;
    return engram_gpu_table_check(t->ctx, &t->params);
}
engram_status_t engram_gpu_fetch_test(engram_fetch_slot_t *f)
{
    return engram_gpu_table_check(f->table->ctx, &f->table->params);
}

engram_status_t engram_gpu_fetch_order(engram_fetch_slot_t *f)
{
    return engram_gpu_table_check(f->table->ctx, &f->table->params);
}

void engram_gpu_fetch_end(engram_fetch_slot_t *f)
{
    (void)f;
}

bool engram_gpu_replay_bad(const engram_fetch_slot_t *f, uint64_t *count, uint64_t *first_row)
{
    (void)f;
    (void)count;
    (void)first_row;
    return false;
}

uint32_t engram_gpu_released_running(engram_table_t *t)
{
    (void)t;
    return 0;
}

engram_status_t engram_gpu_release_ordered(engram_fetch_slot_t *f, uint64_t cookie)
{
    (void)cookie;
    return engram_gpu_table_check(f->table->ctx, &f->table->params);
}

engram_status_t engram_gpu_poll_released(engram_table_t *t, engram_fetch_completion_t *out, uint32_t max, int wait,
                                         uint32_t *n, uint32_t *pending)
{
    (void)out;
    (void)max;
    (void)wait;
    (void)n;
    (void)pending;
    return engram_gpu_table_check(t->ctx, &t->params);
}

engram_status_t engram_fetch_on_stream(engram_table_t *t, const int64_t *indices, uint32_t num_tokens, unsigned flags,
                                       void *stream, engram_fetch_t **out)
{
    (void)indices;
    (void)num_tokens;
    (void)flags;
    (void)stream;
    (void)out;
    return engram_gpu_table_check(t ? t->ctx : NULL, NULL);
}

engram_status_t engram_gpu_path_report(const engram_context_t *ctx, uint64_t node_table_bytes,
                                       engram_gpu_path_report_t *out)
{
    (void)node_table_bytes;
    if (ctx == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_gpu_path_report: ctx and out must not be NULL");
    return engram_gpu_table_check(ctx, NULL);
}
