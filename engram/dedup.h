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
 * auto: two samples of the whole batch, about ENGRAM_DEDUP_SAMPLE rows
 * each, both into small tables of their own (cache resident). By index
 * value: every row is hashed (a multiply and a compare), and the rows
 * whose hash falls in the lowest 2^-k of its range are taken; all copies
 * of a taken index are taken, so the repeats among them estimate the
 * batch's repeat fraction wherever its repeats sit (a prefix sees fewer:
 * repeats grow with the rows seen). By position: every 2^k-th row, which
 * catches what the first misses, an index repeated many times over (each
 * of the few indices behind most repeats escapes a sample by value with
 * probability 1 - 2^-k). The larger of the two fractions counts; the
 * samples cost a fraction of dedup's own tracking per row. Then a cost
 * model decides: dedup pays when
 *     repeats x (get - copy) > rows x track
 * where get is what one get costs on this table's transport, copy the
 * local copy that replaces it, and track the first-position table's work
 * per row (engram_dedup_set_costs). */
#ifndef ENGRAM_ENGRAM_DEDUP_H
#define ENGRAM_ENGRAM_DEDUP_H

#include <stdbool.h>
#include <stdint.h>
#include "engram/plugin/routing.h"
#include "hal/status.h"

enum { ENGRAM_DEDUP_SAMPLE = 512 };

/* The cost model's constants (ns), estimates for a small host: what a get
 * costs beyond moving the row's bytes, which the copy replacing it moves as
 * well (the copy is 1 + row_bytes / 16 ns: engram_dedup_set_costs), for a
 * get its owner's CPU serves (ENGRAM_REGION_OWNER_PROGRESS: UCX over TCP
 * emulating RMA) and for a one-sided get (loopback's copy, UCX's
 * shared-memory lanes, a NIC's RDMA read); and tracking, a hash and a
 * probe of the first-position table per row, dearer once the table
 * outgrows L2 (past ENGRAM_DEDUP_TRACK_SMALL_ROWS rows). What dedup gains
 * on a transport: engram_bench with ENGRAM_DEDUP=on against off. */
enum {
    ENGRAM_DEDUP_GET_NS_OWNER_CPU = 2500,
    ENGRAM_DEDUP_GET_NS_ONE_SIDED = 40,
    ENGRAM_DEDUP_TRACK_NS_SMALL = 3,
    ENGRAM_DEDUP_TRACK_NS_LARGE = 10,
    ENGRAM_DEDUP_TRACK_SMALL_ROWS = 32768,
};

typedef struct engram_dedup {
    uint32_t *first;     /* [capacity]: row + 1 of an index's first position; 0 = empty */
    uint64_t capacity;   /* a power of two >= 2 * max rows */
    uint32_t *copy_dst;  /* [max rows]: positions that repeat an earlier one */
    uint32_t *copy_src;  /* [max rows]: the first position of the same index */
    uint32_t num_copies; /* this fetch's */
    uint32_t mask;       /* this fetch's table: mask + 1 entries */
    int shift;           /* 64 - log2(mask + 1) */
    const int64_t *indices;
    uint32_t get_ns, copy_ns; /* auto's cost model (engram_dedup_set_costs) */
} engram_dedup_t;

/* The state for fetches of up to max_rows rows under `mode` (the dedup
 * key): NULL for off, and for auto past the size limit (rows are 32-bit
 * positions, the table at most 2^31 entries: 2^30 rows), which on refuses.
 * At most 24 bytes per row: the table (<= 4 entries of 4 bytes per row)
 * and the copy list (8). */
engram_status_t engram_dedup_create(int mode, uint64_t max_rows, engram_dedup_t **out);
void engram_dedup_destroy(engram_dedup_t *d);

/* auto's cost model for a table of rows of row_bytes whose gets are served
 * by the owner's CPU (owner_cpu_gets: its shard region is
 * ENGRAM_REGION_OWNER_PROGRESS) or one-sided. Until called: one-sided gets
 * of 256-byte rows. d may be NULL. */
void engram_dedup_set_costs(engram_dedup_t *d, bool owner_cpu_gets, uint32_t row_bytes);

/* What auto's samples saw: each takes 1 row in 2^rate_log2 (every row
 * of a batch of at most ENGRAM_DEDUP_SAMPLE), counting its valid rows and
 * those that repeat an earlier row of the same sample. */
typedef struct engram_dedup_estimate {
    int rate_log2;
    uint32_t by_value_rows, by_value_repeats;
    uint32_t by_position_rows, by_position_repeats;
} engram_dedup_estimate_t;

/* auto's decision for `rows` positions of `indices` under d's cost model
 * (d NULL: the defaults): true when dedup pays. est (may be NULL) gets
 * what the samples saw. */
bool engram_dedup_pays(const engram_dedup_t *d, const int64_t *indices, uint32_t rows, uint64_t total_entries,
                       engram_dedup_estimate_t *est);
/* The model's tracking cost per row for a fetch of `rows` rows (ns). */
uint32_t engram_dedup_track_ns(uint32_t rows);

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
