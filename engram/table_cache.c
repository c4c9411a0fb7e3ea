/* engram_table_cache_rows / engram_table_cache_profile: the checks every
 * build makes, then the GPU's cache (engram_gpu_cache_set). */
#include <stdlib.h>

#include "engram/gpu/gpu_table.h"
#include "engram/gpu/hot_select.h"
#include "engram/internal.h"
#include "hal/log.h"

/* The global rows of this rank's node: its ranks are consecutive. */
static void node_rows(const engram_table_t *t, int64_t *lo, int64_t *hi)
{
    const engram_group_t *g = t->ctx->group;
    const uint64_t first = (uint64_t)(engram_group_rank(g) - engram_group_local_rank(g));
    *lo = (int64_t)(first * t->params.entries_per_rank);
    *hi = (int64_t)((first + (uint64_t)engram_group_local_size(g)) * t->params.entries_per_rank);
}

static engram_status_t check_table(engram_table_t *t, const char *fn)
{
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: table is NULL", fn);
    if (t->params.recv != ENGRAM_RECV_CUDA)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: the hot-row cache is GPU memory, for recv=CUDA tables; this "
                                                "table receives in host memory", fn);
    if (t->writing || !t->written)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "%s: the table is %s; the cache copies written rows", fn,
                            t->writing ? "being written (engram_write_begin)" : "not written yet");
    return engram_table_check_idle(t, fn);
}

engram_status_t engram_table_cache_rows(engram_table_t *t, const int64_t *rows, uint64_t n)
{
    engram_status_t st = check_table(t, "engram_table_cache_rows");
    if (st != ENGRAM_OK)
        return st;
    if (rows == NULL && n > 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_table_cache_rows: rows is NULL for %llu rows",
                            (unsigned long long)n);
    if (n > INT32_MAX)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "engram_table_cache_rows: %llu rows exceed the cache's %d",
                            (unsigned long long)n, INT32_MAX);
    int64_t lo, hi;
    node_rows(t, &lo, &hi);
    for (uint64_t i = 0; i < n; i++)
        if (rows[i] < lo || rows[i] >= hi) {
            if (rows[i] >= 0 && (uint64_t)rows[i] < t->sizes.total_entries)
                return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                                    "engram_table_cache_rows: row %lld (entry %llu) is owned by rank %llu on another "
                                    "node; the cache holds rows of this node's shards [%lld, %lld)",
                                    (long long)rows[i], (unsigned long long)i,
                                    (unsigned long long)((uint64_t)rows[i] / t->params.entries_per_rank),
                                    (long long)lo, (long long)hi);
            return ENGRAM_ERROR(ENGRAM_ERR_BAD_INDEX, "engram_table_cache_rows: row %lld (entry %llu) is outside "
                                "the table's %llu rows", (long long)rows[i], (unsigned long long)i,
                                (unsigned long long)t->sizes.total_entries);
        }
    return engram_gpu_cache_set(t, rows, n);
}

engram_status_t engram_table_cache_profile(engram_table_t *t, const int64_t *indices, uint64_t n, uint64_t max_rows)
{
    engram_status_t st = check_table(t, "engram_table_cache_profile");
    if (st != ENGRAM_OK)
        return st;
    if (max_rows > INT32_MAX)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "engram_table_cache_profile: max_rows %llu exceeds the cache's %d",
                            (unsigned long long)max_rows, INT32_MAX);
    int64_t lo, hi, *rows = NULL;
    uint64_t k = 0;
    node_rows(t, &lo, &hi);
    st = engram_hot_pick(indices, n, lo, hi, max_rows, &rows, &k);
    if (st == ENGRAM_OK)
        st = engram_gpu_cache_set(t, rows, k);
    free(rows);
    return st;
}
