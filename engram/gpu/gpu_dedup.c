/* dedup for GPU tables: the marking tables and the launches around the
 * gather kernel (design in gpu_dedup.h). */
#include <stdlib.h>

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

engram_status_t engram_gpu_dedup_alloc(engram_table_t *t, engram_gpu_dedup_t **out)
{
    uint64_t rows = (uint64_t)t->params.max_tokens * t->params.entries_per_token;
    if (rows > ((uint64_t)1 << MAX_ROWS_LOG2))
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW,
                            "dedup: %llu rows per fetch (max_tokens * entries_per_token) exceed the %llu its table "
                            "holds; set dedup=off",
                            (unsigned long long)rows, (unsigned long long)1 << MAX_ROWS_LOG2);
    uint64_t cap = (uint64_t)1 << table_log2(rows); /* <= 2^31 */
    uint64_t per_slot = cap + rows, total;
    if (__builtin_mul_overflow(per_slot, (uint64_t)t->num_slots * sizeof(uint32_t), &total))
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "dedup: %d slots of %llu entries overflow 64 bits", t->num_slots,
                            (unsigned long long)per_slot);
    engram_gpu_dedup_t *dd = calloc(1, sizeof(*dd));
    if (dd == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "dedup: out of memory for its state");
    dd->rows = rows;
    dd->cap = cap;
    /* no clearing here: each fetch's mark clears its slot's table on the
     * fetch's stream (a cudaMemset here would not be ordered before it) */
    cudaError_t ce = cudaMalloc((void **)&dd->table, total);
    if (ce != cudaSuccess) {
        free(dd);
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "GPU table: allocating dedup's %llu bytes of GPU memory: %s",
                            (unsigned long long)total, cudaGetErrorString(ce));
    }
    dd->first = dd->table + dd->cap * (uint64_t)t->num_slots;
    *out = dd;
    return ENGRAM_OK;
}

void engram_gpu_dedup_free(engram_gpu_dedup_t *dd)
{
    if (dd == NULL)
        return;
    cudaFree(dd->table);
    free(dd);
}

int engram_gpu_dedup_before(const engram_gpu_dedup_t *dd, int blocks, int slot, engram_gpu_gather_args_t *a,
                            void *stream)
{
    if (dd == NULL || a->num_rows < 2)
        return cudaSuccess;
    uint32_t *first = dd->first + (uint64_t)slot * dd->rows;
    a->first = first;
    return engram_gpu_dedup_mark_launch(a, dd->table + (uint64_t)slot * dd->cap, table_log2(a->num_rows), first,
                                        blocks, stream);
}

int engram_gpu_dedup_after(const engram_gpu_gather_args_t *a, int blocks, void *stream)
{
    if (a->first == NULL)
        return cudaSuccess;
    return engram_gpu_dedup_copy_launch(a->first, a->num_rows, a->row_bytes, a->rows, blocks, stream);
}
