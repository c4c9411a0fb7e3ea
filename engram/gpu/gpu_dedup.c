/* dedup for GPU tables: the marking tables and the launches around the
 * gather kernel (design in gpu_dedup.h). */
#include "engram/gpu/gpu_dedup.h"

#include "hal/log.h"

enum { MIN_TABLE_LOG2 = 4, MAX_ROWS_LOG2 = 30 };

static uint32_t table_log2(uint64_t rows)
{
    uint32_t l = MIN_TABLE_LOG2;
    while (((uint64_t)1 << l) < 2 * rows)
        l++;
    return l;
}

engram_status_t engram_gpu_dedup_alloc(engram_table_t *t, engram_gpu_table_t *g)
{
    if (t->ctx->cfg.dedup != ENGRAM_DEDUP_ON)
        return ENGRAM_OK;
    uint64_t rows = (uint64_t)t->params.max_tokens * t->params.entries_per_token;
    if (rows > ((uint64_t)1 << MAX_ROWS_LOG2))
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW,
                            "dedup: %llu rows per fetch (max_tokens * entries_per_token) exceed the %llu its table "
                            "holds; set dedup=off",
                            (unsigned long long)rows, (unsigned long long)1 << MAX_ROWS_LOG2);
    g->dd_rows = rows;
    g->dd_cap = (uint64_t)1 << table_log2(rows); /* <= 2^31 */
    uint64_t per_slot = g->dd_cap + rows, total;
    if (__builtin_mul_overflow(per_slot, (uint64_t)t->num_slots * sizeof(uint32_t), &total))
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "dedup: %d slots of %llu entries overflow 64 bits", t->num_slots,
                            (unsigned long long)per_slot);
    /* no clearing here: each fetch's mark clears its slot's table on the
     * fetch's stream (a cudaMemset here would not be ordered before it) */
    cudaError_t ce = cudaMalloc((void **)&g->dd_table, total);
    if (ce != cudaSuccess)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "GPU table: allocating dedup's %llu bytes of GPU memory: %s",
                            (unsigned long long)total, cudaGetErrorString(ce));
    g->dd_first = g->dd_table + g->dd_cap * (uint64_t)t->num_slots;
    return ENGRAM_OK;
}

void engram_gpu_dedup_free(engram_gpu_table_t *g)
{
    cudaFree(g->dd_table);
    g->dd_table = g->dd_first = NULL;
}

int engram_gpu_dedup_before(engram_gpu_table_t *g, int slot, engram_gpu_gather_args_t *a, void *stream)
{
    if (g->dd_table == NULL || a->num_rows < 2)
        return cudaSuccess;
    uint32_t *first = g->dd_first + (uint64_t)slot * g->dd_rows;
    a->first = first;
    return engram_gpu_dedup_mark_launch(a, g->dd_table + (uint64_t)slot * g->dd_cap, table_log2(a->num_rows), first,
                                        g->blocks, stream);
}

int engram_gpu_dedup_after(engram_gpu_table_t *g, const engram_gpu_gather_args_t *a, void *stream)
{
    if (a->first == NULL)
        return cudaSuccess;
    return engram_gpu_dedup_copy_launch(a->first, a->num_rows, a->row_bytes, a->rows, g->blocks, stream);
}
