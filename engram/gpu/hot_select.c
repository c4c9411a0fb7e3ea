/* The hot-row cache's choice and index (design in hot_select.h). */
#include "engram/gpu/hot_select.h"

#include <stdlib.h>
#include <string.h>

#include "hal/log.h"

typedef struct {
    int64_t idx;
    uint64_t count;
} counted_t;

static int by_index(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int by_count_then_index(const void *a, const void *b)
{
    const counted_t *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

engram_status_t engram_hot_pick(const int64_t *indices, uint64_t n, int64_t lo, int64_t hi, uint64_t max_rows,
                                int64_t **out, uint64_t *out_n)
{
    if ((indices == NULL && n > 0) || out == NULL || out_n == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "hot-row profile: indices, out and out_n must not be NULL");
    if (n > SIZE_MAX / sizeof(int64_t))
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "hot-row profile: %llu indices exceed the address space",
                            (unsigned long long)n);
    int64_t *sorted = n > 0 ? malloc((size_t)n * sizeof(*sorted)) : NULL;
    if (n > 0 && sorted == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "hot-row profile: out of memory for %llu indices", (unsigned long long)n);
    uint64_t m = 0;
    for (uint64_t i = 0; i < n; i++)
        if (indices[i] >= lo && indices[i] < hi)
            sorted[m++] = indices[i];
    if (m > 1)
        qsort(sorted, (size_t)m, sizeof(*sorted), by_index);
    /* runs of one index -> (index, count) */
    uint64_t runs = 0;
    counted_t *c = m > 0 ? malloc((size_t)m * sizeof(*c)) : NULL;
    if (m > 0 && c == NULL) {
        free(sorted);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "hot-row profile: out of memory for %llu counts", (unsigned long long)m);
    }
    for (uint64_t i = 0; i < m;) {
        uint64_t j = i;
        while (j < m && sorted[j] == sorted[i])
            j++;
        c[runs++] = (counted_t){sorted[i], j - i};
        i = j;
    }
    free(sorted);
    if (runs > 1)
        qsort(c, (size_t)runs, sizeof(*c), by_count_then_index);
    const uint64_t k = runs < max_rows ? runs : max_rows;
    int64_t *rows = k > 0 ? malloc((size_t)k * sizeof(*rows)) : NULL;
    if (k > 0 && rows == NULL) {
        free(c);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "hot-row profile: out of memory for %llu rows", (unsigned long long)k);
    }
    for (uint64_t i = 0; i < k; i++)
        rows[i] = c[i].idx;
    free(c);
    *out = rows;
    *out_n = k;
    return ENGRAM_OK;
}

engram_status_t engram_hot_hash_build(const int64_t *rows, uint64_t n, uint64_t total_entries, int64_t **keys,
                                      uint32_t **vals, uint32_t *log2)
{
    if (rows == NULL || n == 0 || keys == NULL || vals == NULL || log2 == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "hot-row cache: rows, keys, vals and log2 must be set, n >= 1");
    if (n > UINT32_MAX / 2)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "hot-row cache: %llu rows exceed %u", (unsigned long long)n,
                            UINT32_MAX / 2);
    uint32_t lg = 1;
    while (((uint64_t)1 << lg) < 2 * n)
        lg++;
    const uint64_t cap = (uint64_t)1 << lg, mask = cap - 1;
    int64_t *k = malloc((size_t)cap * sizeof(*k));
    uint32_t *v = malloc((size_t)cap * sizeof(*v));
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "hot-row cache: out of memory for a %llu-entry index",
                            (unsigned long long)cap);
    }
    memset(k, 0xff, (size_t)cap * sizeof(*k)); /* ENGRAM_HOT_EMPTY everywhere */
    for (uint64_t i = 0; i < n; i++) {
        const int64_t idx = rows[i];
        if (idx < 0 || (uint64_t)idx >= total_entries) {
            free(k);
            free(v);
            return ENGRAM_ERROR(ENGRAM_ERR_BAD_INDEX, "hot-row cache: row %lld (entry %llu of the list) is outside "
                                "the table's %llu rows", (long long)idx, (unsigned long long)i,
                                (unsigned long long)total_entries);
        }
        uint64_t at = engram_hot_home(idx, lg);
        while (k[at] != ENGRAM_HOT_EMPTY && k[at] != idx)
            at = (at + 1) & mask;
        if (k[at] == idx) {
            const uint32_t first = v[at];
            free(k);
            free(v);
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "hot-row cache: row %lld is listed twice (entries %u and %llu)",
                                (long long)idx, first, (unsigned long long)i);
        }
        k[at] = idx;
        v[at] = (uint32_t)i;
    }
    *keys = k;
    *vals = v;
    *log2 = lg;
    return ENGRAM_OK;
}
