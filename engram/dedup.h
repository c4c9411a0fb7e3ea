/* In-batch dedup (config key dedup): each distinct valid index of a fetch
 * is read once; its other positions are recorded as (copy, first) pairs
 * and copied locally once the reads have landed.
 *
 * One engram_dedup_t per fetch slot, sized at table create for the slot's
 * max rows: an open-addressing table of first positions (row + 1; 0 =
 * empty) keyed by the index the position holds, so the table stores no
 * keys of its own, plus the copy list. A fetch clears only the part of the
 * table its own row count needs.
 *
 * auto: the first ENGRAM_DEDUP_SAMPLE rows are hashed into a small table
 * of their own (cache resident, a few microseconds); dedup runs when at
 * least 1/ENGRAM_DEDUP_MIN_REPEAT_INV of the sampled valid rows repeat an
 * earlier one. A prefix sees fewer repeats than the whole batch (repeats
 * grow with the rows seen), so the test errs towards off: uniform indices
 * over a large table repeat almost never and pay only the sample. */
#ifndef ENGRAM_ENGRAM_DEDUP_H
#define ENGRAM_ENGRAM_DEDUP_H

#include <stdbool.h>
#include <stdint.h>
#include "hal/routing.h"
#include "hal/status.h"

enum { ENGRAM_DEDUP_SAMPLE = 512, ENGRAM_DEDUP_MIN_REPEAT_INV = 16 };

typedef struct engram_dedup {
    uint32_t *first;     /* [capacity]: row + 1 of an index's first position; 0 = empty */
    uint64_t capacity;   /* a power of two >= 2 * max rows */
    uint32_t *copy_dst;  /* [max rows]: positions that repeat an earlier one */
    uint32_t *copy_src;  /* [max rows]: the first position of the same index */
    uint32_t num_copies; /* this fetch's */
    uint32_t mask;       /* this fetch's table: mask + 1 entries */
    int shift;           /* 64 - log2(mask + 1) */
    const int64_t *indices;
} engram_dedup_t;

/* The state for fetches of up to max_rows rows under `mode` (the dedup
 * key): NULL for off, and for auto past the size limit (rows are 32-bit
 * positions, the table at most 2^31 entries: 2^30 rows), which on refuses.
 * At most 24 bytes per row: the table (<= 4 entries of 4 bytes per row)
 * and the copy list (8). */
engram_status_t engram_dedup_create(int mode, uint64_t max_rows, engram_dedup_t **out);
void engram_dedup_destroy(engram_dedup_t *d);

/* Starts a fetch of `rows` positions of `indices` (mode: ENGRAM_DEDUP_*;
 * d may be NULL when the table has none, mode off). Returns d when this
 * fetch dedups, NULL when it does not; auto logs its decision at debug. */
engram_dedup_t *engram_dedup_begin(engram_dedup_t *d, int mode, const int64_t *indices, uint32_t rows,
                                   uint64_t total_entries);

/* For a position with a valid index, in issue order: true when an earlier
 * position holds the same index (recorded as a copy: issue no read), false
 * for the first (read it). Bad indices never come here: they are zero
 * rows counted at each position, as without dedup. */
static inline bool engram_dedup_repeat(engram_dedup_t *d, uint32_t row)
{
    const int64_t idx = d->indices[row];
    uint32_t h = (uint32_t)(((uint64_t)idx * 0x9e3779b97f4a7c15ull) >> d->shift);
    for (;;) {
        uint32_t e = d->first[h];
        if (e == 0) {
            d->first[h] = row + 1;
            return false;
        }
        if (d->indices[e - 1] == idx) {
            d->copy_dst[d->num_copies] = row;
            d->copy_src[d->num_copies++] = e - 1;
            return true;
        }
        h = (h + 1) & d->mask;
    }
}

/* After the reads of the first positions have landed: each copy position's
 * row from its first, rows of row_bytes back to back at `rows`. */
void engram_dedup_copy_rows(const engram_dedup_t *d, void *rows, uint32_t row_bytes);

#endif
