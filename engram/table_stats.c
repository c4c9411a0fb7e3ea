/* engram_table_stats: the counters fetch.c keeps, and how rows arrive. */
#include <string.h>

#include "engram/gpu/gpu_table.h"
#include "engram/internal.h"
#include "hal/log.h"

engram_status_t engram_table_stats(const engram_table_t *t, engram_table_stats_t *out)
{
    if (t == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_table_stats: table and out must not be NULL");
    if (out->size < sizeof(out->size))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_table_stats: out->size is %zu; set it to "
                                                "sizeof(engram_table_stats_t)", out->size);
    engram_table_t *m = (engram_table_t *)t; /* the counters are atomics */
    engram_table_stats_t s = {
        .size = sizeof(s),
        .fetches = atomic_load_explicit(&m->stat_fetches, memory_order_relaxed),
        .rows = atomic_load_explicit(&m->stat_rows, memory_order_relaxed),
        .bytes = atomic_load_explicit(&m->stat_bytes, memory_order_relaxed),
        .bad_rows = atomic_load_explicit(&m->stat_bad_rows, memory_order_relaxed),
        .repeats = atomic_load_explicit(&m->stat_repeats, memory_order_relaxed),
        .wait_ns = atomic_load_explicit(&m->stat_wait_ns, memory_order_relaxed),
        .cache_hits = atomic_load_explicit(&m->stat_cache_hits, memory_order_relaxed),
        .path = "transport",
        .shard_huge_pages = t->shard != NULL && t->shard->huge_pages,
        .shard_bytes = t->shard != NULL ? t->shard->size : 0,
    };
    if (t->params.recv == ENGRAM_RECV_CUDA)
        s.path = engram_gpu_table_path(t, &s.gather_threads, &s.cache_rows);
    /* the fields the caller's struct has room for; its size stays its own */
    size_t n = out->size < sizeof(s) ? out->size : sizeof(s);
    memcpy((char *)out + sizeof(out->size), (const char *)&s + sizeof(s.size), n - sizeof(s.size));
    return ENGRAM_OK;
}
