/* Choosing and indexing the hot-row cache's rows (CUDA-free: the CPU tier
 * tests it). */
#ifndef ENGRAM_GPU_HOT_SELECT_H
#define ENGRAM_GPU_HOT_SELECT_H

#include <stdint.h>
#include "engram/gpu/hot_hash.h"
#include "hal/status.h"

/* The most frequent rows of a profile: indices[n] (any order, repeats
 * counted; entries outside [lo, hi) ignored), at most max_rows of them,
 * most frequent first, ties to the lower index. *out is malloc'd (free
 * it), *out_n its length (0: *out NULL). */
engram_status_t engram_hot_pick(const int64_t *indices, uint64_t n, int64_t lo, int64_t hi, uint64_t max_rows,
                                int64_t **out, uint64_t *out_n);

/* The lookup table for rows[n] (slot k holds rows[k]): keys and vals
 * malloc'd with 1 << *log2 entries, at most half full. Refuses a row
 * listed twice or outside [0, total_entries), naming it. n >= 1. */
engram_status_t engram_hot_hash_build(const int64_t *rows, uint64_t n, uint64_t total_entries, int64_t **keys,
                                      uint32_t **vals, uint32_t *log2);

#endif
