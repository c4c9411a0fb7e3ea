/* The hot-row cache's lookup: global row index -> cache slot, an
 * open-addressing table with linear probing, header-only so the GPU
 * kernels (gather.cu) and the host (the builder's tests, the CPU tier's
 * fakes) probe the one table the same way. Built once per cache set
 * (hot_select.h); never written while fetches read it. */
#ifndef ENGRAM_GPU_HOT_HASH_H
#define ENGRAM_GPU_HOT_HASH_H

#include <stdint.h>
#include "engram/plugin/routing.h" /* ENGRAM_HOST_DEVICE */

#define ENGRAM_HOT_EMPTY ((int64_t)-1) /* a free key (row indices are >= 0) */
#define ENGRAM_HOT_MISS UINT32_MAX

typedef struct engram_hot_hash {
    const int64_t *keys;  /* [1 << log2]: row index, or ENGRAM_HOT_EMPTY */
    const uint32_t *vals; /* [1 << log2]: the key's cache slot */
    uint32_t log2;        /* 0: no cache (every probe misses) */
} engram_hot_hash_t;

ENGRAM_HOST_DEVICE uint64_t engram_hot_home(int64_t idx, uint32_t log2)
{
    return ((uint64_t)idx * 0x9e3779b97f4a7c15ull) >> (64 - log2);
}

/* The cache slot holding row idx, or ENGRAM_HOT_MISS. The table is at
 * most half full, so a probe ends at an empty key within a few steps. */
ENGRAM_HOST_DEVICE uint32_t engram_hot_find(const engram_hot_hash_t *h, int64_t idx)
{
    if (h->log2 == 0 || idx < 0)
        return ENGRAM_HOT_MISS;
    const uint64_t mask = ((uint64_t)1 << h->log2) - 1;
    for (uint64_t at = engram_hot_home(idx, h->log2);; at = (at + 1) & mask) {
        const int64_t k = h->keys[at];
        if (k == idx)
            return h->vals[at];
        if (k == ENGRAM_HOT_EMPTY)
            return ENGRAM_HOT_MISS;
    }
}

#endif
