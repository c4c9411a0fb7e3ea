/* The hot-row cache of a GPU table (design in <engram/engram.h> and
 * hot_cache.h): built from a row list, loaded from the shards, reloaded
 * after every write. */
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/copy_in.h"
#include "engram/gpu/gpu_state.h"
#include "engram/gpu/gpu_table.h"
#include "engram/gpu/hot_cache.h"
#include "engram/gpu/hot_select.h"
#include "hal/log.h"

void engram_gpu_hot_free(engram_gpu_hot_t *hot)
{
    if (hot == NULL)
        return;
    cudaFree((void *)hot->dev.keys);
    cudaFree((void *)hot->dev.vals);
    cudaFree(hot->list_dev);
    cudaFree(hot->rows_dev);
    free(hot->list);
    free(hot);
}

/* The listed rows into the cache, by the local path (fetch_path.h's load_rows). */
static engram_status_t load(engram_table_t *t, engram_gpu_table_t *g, engram_gpu_hot_t *hot)
{
    const engram_gpu_path_t *local = engram_gpu_local(g);
    return local->ops->load_rows(t, g, local->state, hot->list, hot->list_dev, hot->rows, hot->rows_dev);
}

static engram_status_t build(engram_table_t *t, const int64_t *rows, uint64_t n, engram_gpu_hot_t **out)
{
    engram_gpu_hot_t *hot = calloc(1, sizeof(*hot));
    if (hot == NULL || (hot->list = malloc((size_t)n * sizeof(*hot->list))) == NULL) {
        free(hot);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "hot-row cache: out of memory for %llu rows", (unsigned long long)n);
    }
    hot->rows = n;
    hot->blocks = ((engram_gpu_table_t *)t->gpu)->blocks;
    hot->device = ((engram_gpu_table_t *)t->gpu)->device;
    memcpy(hot->list, rows, (size_t)n * sizeof(*rows));
    int64_t *host_keys = NULL;
    uint32_t *host_vals = NULL, log2 = 0;
    engram_status_t st = engram_hot_hash_build(rows, n, t->sizes.total_entries, &host_keys, &host_vals, &log2);
    if (st != ENGRAM_OK) {
        engram_gpu_hot_free(hot);
        return st;
    }
    const size_t cap = (size_t)1 << log2;
    void *keys = NULL, *vals = NULL;
    cudaError_t ce = cudaMalloc(&keys, cap * sizeof(int64_t));
    if (ce == cudaSuccess)
        ce = cudaMalloc(&vals, cap * sizeof(uint32_t));
    hot->dev = (engram_hot_hash_t){.keys = keys, .vals = vals, .log2 = log2};
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&hot->list_dev, (size_t)n * sizeof(int64_t));
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&hot->rows_dev, (size_t)n * t->params.row_bytes);
    if (ce == cudaSuccess)
        ce = engram_gpu_copy_in(keys, host_keys, cap * sizeof(int64_t));
    if (ce == cudaSuccess)
        ce = engram_gpu_copy_in(vals, host_vals, cap * sizeof(uint32_t));
    if (ce == cudaSuccess)
        ce = engram_gpu_copy_in(hot->list_dev, rows, (size_t)n * sizeof(int64_t));
    free(host_keys);
    free(host_vals);
    if (ce != cudaSuccess) {
        engram_gpu_hot_free(hot);
        return ENGRAM_ERROR(ce == cudaErrorMemoryAllocation ? ENGRAM_ERR_NOMEM : ENGRAM_ERR_UNSUPPORTED,
                            "hot-row cache: %llu rows of %u bytes (%llu MiB with the index) in GPU memory: %s",
                            (unsigned long long)n, t->params.row_bytes,
                            (unsigned long long)(((uint64_t)n * t->params.row_bytes + cap * 12 + n * 8) >> 20),
                            cudaGetErrorString(ce));
    }
    *out = hot;
    return ENGRAM_OK;
}

engram_status_t engram_gpu_cache_set(engram_table_t *t, const int64_t *rows, uint64_t n)
{
    engram_gpu_table_t *g = t->gpu;
    engram_gpu_hot_t *hot = NULL;
    engram_status_t st = n > 0 ? build(t, rows, n, &hot) : ENGRAM_OK;
    if (st == ENGRAM_OK && hot != NULL)
        st = load(t, g, hot);
    if (st != ENGRAM_OK) {
        engram_gpu_hot_free(hot); /* the previous set stays */
        return st;
    }
    engram_gpu_hot_free(g->hot);
    g->hot = hot;
    ENGRAM_INFO("hot-row cache: %llu rows (%llu MiB of GPU memory)", (unsigned long long)n,
                (unsigned long long)((n * t->params.row_bytes) >> 20));
    return ENGRAM_OK;
}

engram_status_t engram_gpu_table_after_write(engram_table_t *t)
{
    engram_gpu_table_t *g = t->gpu;
    if (g->hot == NULL)
        return ENGRAM_OK;
    engram_status_t st = load(t, g, g->hot);
    if (st == ENGRAM_OK)
        return ENGRAM_OK;
    engram_gpu_hot_free(g->hot);
    g->hot = NULL;
    return ENGRAM_ERROR(st, "engram_write: the rows are written, but reloading the hot-row cache failed (%s); the "
                            "cache is dropped (engram_table_cache_rows sets it again)", engram_status_str(st));
}
