#include "tests/engram_harness.h"

#include <stdlib.h>
#include <string.h>

#include "tests/table_gen.h"

engram_status_t harness_open(harness_t *h, engram_group_t *g, const char *transport, bool hybrid,
                             const engram_table_params_t *params)
{
    memset(h, 0, sizeof(*h));
    h->g = g;
    h->params = *params;
    engram_config_t *cfg;
    engram_status_t st = engram_config_create(&cfg);
    if (st != ENGRAM_OK)
        return st;
    if (transport)
        st = engram_config_set(cfg, "transport", transport);
    if (st == ENGRAM_OK)
        st = engram_config_set(cfg, "mode", hybrid ? "hybrid" : "direct");
    if (st == ENGRAM_OK)
        st = engram_context_create(cfg, g, &h->ctx);
    engram_config_destroy(cfg);
    if (st == ENGRAM_OK)
        st = engram_table_create(h->ctx, params, &h->table);
    return st;
}

static uint64_t total_entries(const harness_t *h)
{
    return h->params.entries_per_rank * (uint64_t)engram_group_size(h->g);
}

engram_status_t harness_write_chunks(harness_t *h, uint64_t chunk_rows)
{
    const engram_table_params_t *p = &h->params;
    uint64_t first = (uint64_t)engram_group_rank(h->g) * p->entries_per_rank;
    uint8_t *rows = malloc(p->entries_per_rank * p->row_bytes);
    uint64_t nsf = total_entries(h) * p->scale_packs;
    uint32_t *sf = p->scale_packs ? malloc(nsf * sizeof(uint32_t)) : NULL;
    for (uint64_t i = 0; i < p->entries_per_rank; i++)
        table_gen_row(first + i, p->row_bytes, rows + i * p->row_bytes);
    for (uint64_t i = 0; i < nsf; i++)
        sf[i] = table_gen_scale(i / p->scale_packs, (uint32_t)(i % p->scale_packs));
    engram_status_t st;
    if (chunk_rows == 0) {
        st = engram_write(h->table, rows, p->row_bytes, sf);
    } else {
        /* the chunks from the last to the first: order is the caller's */
        st = engram_write_begin(h->table);
        uint64_t n = p->entries_per_rank, chunks = (n + chunk_rows - 1) / chunk_rows;
        for (uint64_t c = chunks; st == ENGRAM_OK && c-- > 0;) {
            uint64_t lo = c * chunk_rows, cnt = n - lo < chunk_rows ? n - lo : chunk_rows;
            st = engram_write_rows(h->table, lo, cnt, rows + lo * p->row_bytes, p->row_bytes);
        }
        if (st == ENGRAM_OK)
            st = engram_write_end(h->table, sf);
    }
    free(rows);
    free(sf);
    return st;
}

engram_status_t harness_write(harness_t *h)
{
    return harness_write_chunks(h, 0);
}

void harness_close(harness_t *h)
{
    engram_table_destroy(h->table);
    engram_context_destroy(h->ctx);
    memset(h, 0, sizeof(*h));
}

bool harness_check(const harness_t *h, const int64_t *indices, uint32_t tokens, bool col_major, const void *rows,
                   const uint32_t *scales)
{
    const engram_table_params_t *p = &h->params;
    uint8_t *want = malloc(p->row_bytes);
    bool ok = true;
    uint32_t stride = (tokens + 3) & ~3u;
    for (uint64_t i = 0; ok && i < (uint64_t)tokens * p->entries_per_token; i++) {
        int64_t idx = indices[i];
        bool bad = idx < 0 || (uint64_t)idx >= total_entries(h);
        if (bad)
            memset(want, 0, p->row_bytes);
        else
            table_gen_row((uint64_t)idx, p->row_bytes, want);
        ok = memcmp((const uint8_t *)rows + i * p->row_bytes, want, p->row_bytes) == 0;
        uint32_t tok = (uint32_t)(i / p->entries_per_token), e = (uint32_t)(i % p->entries_per_token);
        for (uint32_t k = 0; ok && k < p->scale_packs; k++) {
            uint32_t col = e * p->scale_packs + k;
            uint32_t got = col_major ? scales[(uint64_t)col * stride + tok]
                                     : scales[(uint64_t)tok * p->entries_per_token * p->scale_packs + col];
            ok = got == (bad ? 0 : table_gen_scale((uint64_t)idx, k));
        }
    }
    free(want);
    return ok;
}

engram_status_t harness_fetch_check(harness_t *h, const int64_t *indices, uint32_t tokens, bool col_major,
                                    bool *match)
{
    engram_fetch_t *f;
    engram_status_t st = engram_fetch(h->table, indices, tokens, col_major ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0, &f);
    if (st != ENGRAM_OK)
        return st;
    const void *rows = NULL;
    const uint32_t *sf = NULL;
    st = engram_wait(f, &rows, &sf);
    *match = (st == ENGRAM_OK || st == ENGRAM_ERR_BAD_INDEX) && harness_check(h, indices, tokens, col_major, rows, sf);
    engram_fetch_release(f);
    return st;
}
