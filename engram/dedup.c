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

/* auto's estimate: repeats among the sample's valid rows, in a table of
 * the sample's own (4 KiB, on the stack). */
static bool sample_pays(const int64_t *indices, uint32_t rows, uint64_t total_entries, uint32_t *valid_out,
                        uint32_t *repeats_out)
{
    enum { SAMPLE_LOG2 = 11 };
    _Static_assert(ENGRAM_DEDUP_SAMPLE * 2 <= (1 << SAMPLE_LOG2), "sample table at most half full");
    uint16_t first[1 << SAMPLE_LOG2];
    memset(first, 0, sizeof(first));
    uint32_t n = rows < ENGRAM_DEDUP_SAMPLE ? rows : ENGRAM_DEDUP_SAMPLE, valid = 0, repeats = 0;
    for (uint32_t row = 0; row < n; row++) {
        int64_t idx = indices[row];
        if (idx < 0 || (uint64_t)idx >= total_entries)
            continue;
        valid++;
        uint32_t h = (uint32_t)(((uint64_t)idx * 0x9e3779b97f4a7c15ull) >> (64 - SAMPLE_LOG2));
        for (;; h = (h + 1) & ((1u << SAMPLE_LOG2) - 1)) {
            if (first[h] == 0) {
                first[h] = (uint16_t)(row + 1);
                break;
            }
            if (indices[first[h] - 1] == idx) {
                repeats++;
                break;
            }
        }
    }
    *valid_out = valid;
    *repeats_out = repeats;
    return valid > 0 && repeats * (uint32_t)ENGRAM_DEDUP_MIN_REPEAT_INV >= valid;
}

engram_dedup_t *engram_dedup_begin(engram_dedup_t *d, int mode, const int64_t *indices, uint32_t rows,
                                   uint64_t total_entries)
{
    if (d == NULL || mode == ENGRAM_DEDUP_OFF || rows < 2)
        return NULL;
    if (mode == ENGRAM_DEDUP_AUTO) {
        uint32_t valid, repeats;
        bool on = sample_pays(indices, rows, total_entries, &valid, &repeats);
        ENGRAM_DEBUG("dedup=auto: %u of the first %u valid rows repeat one before them (on from 1/%d): %s", repeats,
                     valid, ENGRAM_DEDUP_MIN_REPEAT_INV, on ? "on" : "off");
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
