/* Gets a CPU transport holds until a doorbell and then copies in one loop
 * that prefetches the rows ahead: recording a get costs a few stores and no
 * cache miss, and the copy overlaps the rows' misses as a NIC reading many
 * rows at once would (loopback; ucx's direct gets). Header-only: a
 * transport compiles its own copy. */
#ifndef ENGRAM_PLUGIN_HELD_COPY_H
#define ENGRAM_PLUGIN_HELD_COPY_H

#include <stddef.h>
#include <string.h>

/* Rows ahead whose first bytes the copy loop prefetches: enough to keep
 * several rows' misses in flight (loopback_perf_test measures the copy
 * against a plain memcpy gather). */
#define ENGRAM_HELD_PREFETCH_AHEAD 8
#define ENGRAM_HELD_PREFETCH_BYTES 256

typedef struct engram_held_copy {
    char *dst;
    const char *src;
    size_t len;
} engram_held_copy_t;

/* Copies h[0..n) in issue order. */
static inline void engram_held_copy_run(const engram_held_copy_t *h, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (i + ENGRAM_HELD_PREFETCH_AHEAD < n)
            for (size_t b = 0; b < h[i + ENGRAM_HELD_PREFETCH_AHEAD].len && b < ENGRAM_HELD_PREFETCH_BYTES; b += 64)
                __builtin_prefetch(h[i + ENGRAM_HELD_PREFETCH_AHEAD].src + b);
        memcpy(h[i].dst, h[i].src, h[i].len);
    }
}

#endif
