/* In-batch dedup: state, the per-fetch decision, the local copies
 * (design in dedup.h). */
#include "engram/dedup.h"

#include <stdlib.h>
#include <string.h>

#include "hal/config_keys.h"
#include "hal/log.h"

enum { MIN_TABLE_LOG2 = 4, MAX_TABLE_LOG2 = 31 };

/* log2 of the table a fetch of `rows` rows uses: at most half full. */
static int table_log2(uint64_t rows)
{
    int l = MIN_TABLE_LOG2;
    while (l < MAX_TABLE_LOG2 && ((uint64_t)1 << l) < 2 * rows)
        l++;
    return l;
}

engram_status_t engram_dedup_create(int mode, uint64_t max_rows, engram_dedup_t **out)
{
    const uint64_t limit = (uint64_t)1 << (MAX_TABLE_LOG2 - 1);
    if (mode == ENGRAM_DEDUP_OFF || (mode == ENGRAM_DEDUP_AUTO && max_rows > limit)) {
        if (mode == ENGRAM_DEDUP_AUTO)
            ENGRAM_INFO("dedup=auto: off for this table: %llu rows per fetch exceed the %llu its table holds",
                        (unsigned long long)max_rows, (unsigned long long)limit);
        *out = NULL;
        return ENGRAM_OK;
    }
    if (max_rows > limit)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW,
                            "dedup: %llu rows per fetch (max_tokens * entries_per_token) exceed the %llu its "
                            "table holds; set dedup=off",
                            (unsigned long long)max_rows, (unsigned long long)limit);
    engram_dedup_t *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "dedup: out of memory for its state");
    d->capacity = (uint64_t)1 << table_log2(max_rows);
    engram_dedup_set_costs(d, false, 256);
    /* sizes fit: capacity <= 2^31 entries of 4 bytes, max_rows <= 2^30 */
    d->first = malloc((size_t)d->capacity * sizeof(*d->first));
    d->copy_dst = malloc((size_t)(max_rows ? max_rows : 1) * sizeof(*d->copy_dst));
    d->copy_src = malloc((size_t)(max_rows ? max_rows : 1) * sizeof(*d->copy_src));
    if (d->first == NULL || d->copy_dst == NULL || d->copy_src == NULL) {
        engram_dedup_destroy(d);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "dedup: out of memory for a table of %llu entries and %llu rows",
                            (unsigned long long)((uint64_t)1 << table_log2(max_rows)),
                            (unsigned long long)max_rows);
    }
    *out = d;
    return ENGRAM_OK;
}

void engram_dedup_destroy(engram_dedup_t *d)
{
    if (d == NULL)
        return;
    free(d->first);
    free(d->copy_dst);
    free(d->copy_src);
    free(d);
}

void engram_dedup_set_costs(engram_dedup_t *d, bool owner_cpu_gets, uint32_t row_bytes)
{
    if (d == NULL)
        return;
    /* Both move the row's bytes; a get costs its issue and completion on
     * top (or the owner's service). */
    d->copy_ns = 1 + row_bytes / 16;
    d->get_ns = d->copy_ns + (owner_cpu_gets ? ENGRAM_DEDUP_GET_NS_OWNER_CPU : ENGRAM_DEDUP_GET_NS_ONE_SIDED);
}

/* A sample's own table: row + 1 of each sampled index's first position,
 * at most half full (8 KiB, on the stack). */
enum { SAMPLE_LOG2 = 11, SAMPLE_MAX_DISTINCT = 1 << (SAMPLE_LOG2 - 1) };
_Static_assert(ENGRAM_DEDUP_SAMPLE * 2 <= SAMPLE_MAX_DISTINCT, "a sample twice its expected size still fits");

typedef struct sample {
    uint32_t first[1 << SAMPLE_LOG2];
    uint32_t distinct, rows, repeats;
} sample_t;

#define DEDUP_HASH(idx) ((uint64_t)(idx) * 0x9e3779b97f4a7c15ull)

/* Row `row` (a valid index) into s at `slot`: false once s is full (far
 * more distinct indices than expected: auto decides on what it has seen). */
static inline bool sample_add(sample_t *s, const int64_t *indices, uint32_t row, uint32_t slot)
{
    for (;; slot = (slot + 1) & ((1u << SAMPLE_LOG2) - 1)) {
        if (s->first[slot] == 0) {
            if (s->distinct == SAMPLE_MAX_DISTINCT)
                return false;
            s->distinct++;
            s->first[slot] = row + 1;
            break;
        }
        if (indices[s->first[slot] - 1] == indices[row]) {
            s->repeats++;
            break;
        }
    }
    s->rows++;
    return true;
}

static inline bool valid_index(int64_t idx, uint64_t total_entries)
{
    return idx >= 0 && (uint64_t)idx < total_entries;
}

/* The by-value sample's rows of [from, to): those whose hash is at most
 * `below`, placed by the hash's bits under the k that chose them. */
static bool sample_by_value(sample_t *s, const int64_t *indices, uint32_t from, uint32_t to, uint64_t below, int k,
                            uint64_t total_entries)
{
    for (uint32_t row = from; row < to; row++) {
        const uint64_t h = DEDUP_HASH(indices[row]);
        if (h <= below && valid_index(indices[row], total_entries) &&
            !sample_add(s, indices, row, (uint32_t)((h << k) >> (64 - SAMPLE_LOG2))))
            return false;
    }
    return true;
}

bool engram_dedup_pays(const engram_dedup_t *d, const int64_t *indices, uint32_t rows, uint64_t total_entries,
                       engram_dedup_estimate_t *est)
{
    /* Both samples take 1 row in 2^k, k the least that keeps about
     * ENGRAM_DEDUP_SAMPLE rows (all of a small batch). By value: the rows
     * whose hash is at most `below` (its top k bits clear). */
    int k = 0;
    while (k < 32 && ((uint64_t)rows >> k) > ENGRAM_DEDUP_SAMPLE)
        k++;
    const uint64_t below = k == 0 ? UINT64_MAX : ((uint64_t)1 << (64 - k)) - 1;
    sample_t by_value, by_position;
    memset(&by_value, 0, sizeof(by_value));
    memset(&by_position, 0, sizeof(by_position));
    /* Eight rows a step, one test for all eight: almost every step takes
     * no row, so the scan is a load, a multiply and a compare per row. */
    uint32_t base = 0;
    for (; base + 8 <= rows; base += 8) {
        const int64_t *p = indices + base;
        bool any = (DEDUP_HASH(p[0]) <= below) | (DEDUP_HASH(p[1]) <= below) | (DEDUP_HASH(p[2]) <= below) |
                   (DEDUP_HASH(p[3]) <= below) | (DEDUP_HASH(p[4]) <= below) | (DEDUP_HASH(p[5]) <= below) |
                   (DEDUP_HASH(p[6]) <= below) | (DEDUP_HASH(p[7]) <= below);
        if (any && !sample_by_value(&by_value, indices, base, base + 8, below, k, total_entries))
            break;
    }
    if (base + 8 > rows)
        (void)sample_by_value(&by_value, indices, base, rows, below, k, total_entries);
    /* By position: one row of each run of 2^k, at an offset that varies
     * from run to run (a fixed stride would keep landing on the same entry
     * of a token); with k = 0 every row, the same sample as by value. */
    for (uint64_t run = 0; k > 0 && run << k < rows; run++) {
        uint64_t row = (run << k) + (DEDUP_HASH(run + 1) >> (64 - k));
        if (row < rows && valid_index(indices[row], total_entries) &&
            !sample_add(&by_position, indices, (uint32_t)row, (uint32_t)(DEDUP_HASH(indices[row]) >> (64 - SAMPLE_LOG2))))
            break;
    }
    /* Per sampled row, the larger of the two repeat fractions: each
     * repeat saves a get for a copy, every row costs its tracking. */
    const sample_t *s = by_position.rows > 0 &&
                                (uint64_t)by_position.repeats * by_value.rows > (uint64_t)by_value.repeats * by_position.rows
                            ? &by_position
                            : &by_value;
    uint32_t copy = d != NULL ? d->copy_ns : 1 + 256 / 16;
    uint32_t get = d != NULL ? d->get_ns : copy + ENGRAM_DEDUP_GET_NS_ONE_SIDED;
    if (est != NULL)
        *est = (engram_dedup_estimate_t){.rate_log2 = k,
                                         .by_value_rows = by_value.rows,
                                         .by_value_repeats = by_value.repeats,
                                         .by_position_rows = by_position.rows,
                                         .by_position_repeats = by_position.repeats};
    return s->rows > 0 && get > copy &&
           (uint64_t)s->repeats * (get - copy) > (uint64_t)s->rows * engram_dedup_track_ns(rows);
}

uint32_t engram_dedup_track_ns(uint32_t rows)
{
    return rows <= ENGRAM_DEDUP_TRACK_SMALL_ROWS ? ENGRAM_DEDUP_TRACK_NS_SMALL : ENGRAM_DEDUP_TRACK_NS_LARGE;
}

engram_dedup_t *engram_dedup_begin(engram_dedup_t *d, int mode, const int64_t *indices, uint32_t rows,
                                   uint64_t total_entries)
{
    if (d == NULL || mode == ENGRAM_DEDUP_OFF || rows < 2)
        return NULL;
    if (mode == ENGRAM_DEDUP_AUTO) {
        engram_dedup_estimate_t e;
        bool on = engram_dedup_pays(d, indices, rows, total_entries, &e);
        ENGRAM_DEBUG("dedup=auto over %u rows, 1 in %llu sampled: %u of %u by index value and %u of %u by position "
                     "repeat one before them; a get costs ~%u ns here, a copy ~%u, tracking ~%u a row: %s",
                     rows, 1ull << e.rate_log2, e.by_value_repeats, e.by_value_rows, e.by_position_repeats,
                     e.by_position_rows, d->get_ns, d->copy_ns, engram_dedup_track_ns(rows), on ? "on" : "off");
        if (!on)
            return NULL;
    }
    int l = table_log2(rows);
    d->mask = (uint32_t)(((uint64_t)1 << l) - 1);
    d->shift = 64 - l;
    d->num_copies = 0;
    d->indices = indices;
    memset(d->first, 0, ((size_t)d->mask + 1) * sizeof(*d->first));
    return d;
}

void engram_dedup_copy_rows(const engram_dedup_t *d, void *rows, uint32_t row_bytes)
{
    char *base = rows;
    for (uint32_t k = 0; k < d->num_copies; k++)
        memcpy(base + (uint64_t)d->copy_dst[k] * row_bytes, base + (uint64_t)d->copy_src[k] * row_bytes, row_bytes);
}
