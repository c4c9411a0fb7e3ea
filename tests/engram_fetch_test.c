/* Fetch correctness, bit for bit against the host reference: bf16 and
 * fp8+scales in both layouts, direct and hybrid, 4 ranks on one node and 2
 * emulated nodes x 2, uniform and zipf indices, tokens = 0, 1 and max, and
 * many fetches in flight on one table; then again with dedup=on (each
 * distinct row read once, copied to its repeats), adding a batch of few
 * distinct rows with repeated bad indices.
 * Usage: engram_fetch_test [transport]   (default loopback) */
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "tests/engram_harness.h"
#include "tests/table_gen.h"

#define MAX_TOKENS 64u
#define EPT 5u

typedef struct scenario {
    const char *transport;
    bool hybrid;
    const char *dedup; /* the dedup key's value */
} scenario_t;

static void make_indices(engram_group_t *g, uint64_t epr, table_gen_dist_t dist, uint32_t tokens, uint64_t seed,
                         int64_t *out)
{
    table_gen_indices(epr * (uint64_t)engram_group_size(g), dist, seed, engram_group_rank(g), 0,
                      (uint64_t)tokens * EPT, out);
}

/* Every rank fetches the first and last entry of every rank. */
static void check_boundaries(harness_t *h)
{
    int n = engram_group_size(h->g);
    uint64_t epr = h->params.entries_per_rank;
    int64_t idx[MAX_TOKENS * EPT];
    uint32_t k = 0;
    for (int r = 0; r < n; r++) {
        idx[k++] = (int64_t)(r * epr);
        idx[k++] = (int64_t)(r * epr + epr - 1);
    }
    while (k % EPT)
        idx[k++] = 0;
    bool match = false;
    CHECK_OK(harness_fetch_check(h, idx, k / EPT, false, &match));
    CHECK(match);
}

static void check_shapes(harness_t *h, bool col_major)
{
    static const uint32_t token_counts[] = {0, 1, 7, MAX_TOKENS};
    int64_t *idx = malloc(MAX_TOKENS * EPT * sizeof(int64_t));
    for (int d = 0; d < 2; d++) {
        for (size_t t = 0; t < sizeof(token_counts) / sizeof(token_counts[0]); t++) {
            uint32_t tokens = token_counts[t];
            make_indices(h->g, h->params.entries_per_rank, (table_gen_dist_t)d, tokens, 11 + t, idx);
            bool match = false;
            CHECK_OK(harness_fetch_check(h, idx, tokens, col_major, &match));
            CHECK(match);
        }
    }
    free(idx);
}

/* fetch_slots fetches issued before any wait, waited in reverse order. */
static void check_many_in_flight(harness_t *h)
{
    enum { SLOTS = 4 }; /* the fetch_slots default */
    int64_t idx[SLOTS][MAX_TOKENS * EPT];
    engram_fetch_t *f[SLOTS];
    for (int s = 0; s < SLOTS; s++) {
        make_indices(h->g, h->params.entries_per_rank, TABLE_GEN_UNIFORM, MAX_TOKENS, 100 + s, idx[s]);
        CHECK_OK(engram_fetch(h->table, idx[s], MAX_TOKENS, 0, &f[s]));
    }
    engram_fetch_t *extra;
    CHECK_STATUS(engram_fetch(h->table, idx[0], MAX_TOKENS, 0, &extra), ENGRAM_ERR_BUSY);
    for (int s = SLOTS - 1; s >= 0; s--) {
        const void *rows;
        const uint32_t *sf;
        CHECK_OK(engram_wait(f[s], &rows, &sf));
        CHECK(harness_check(h, idx[s], MAX_TOKENS, false, rows, sf));
        engram_fetch_release(f[s]);
    }
}

/* Few distinct rows, each many times, and bad indices repeated (each
 * position a zero row, each counted): under dedup, rows and scales as
 * without it. */
static void check_repeats(harness_t *h, bool col_major)
{
    const uint64_t total = h->params.entries_per_rank * (uint64_t)engram_group_size(h->g);
    int64_t idx[MAX_TOKENS * EPT];
    for (uint32_t i = 0; i < MAX_TOKENS * EPT; i++)
        idx[i] = (int64_t)(((uint64_t)i * 2654435761u % 29) * (total / 29));
    idx[1] = idx[17] = idx[MAX_TOKENS * EPT - 1] = (int64_t)total;
    idx[4] = idx[5] = -1;
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(h->table, idx, MAX_TOKENS, col_major ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0, &f));
    const void *rows;
    const uint32_t *sf;
    CHECK_STATUS(engram_wait(f, &rows, &sf), ENGRAM_ERR_BAD_INDEX);
    uint64_t bad;
    uint32_t tok, entry;
    engram_fetch_bad_indices(f, &bad, &tok, &entry);
    CHECK(bad == 5 && tok == 0 && entry == 1);
    CHECK(harness_check(h, idx, MAX_TOKENS, col_major, rows, sf));
    engram_fetch_release(f);
}

static int rank_main(engram_group_t *g, void *arg)
{
    const scenario_t *sc = arg;
    /* This rank's process only: harness_open's config reads it. */
    CHECK(setenv("ENGRAM_DEDUP", sc->dedup, 1) == 0);
    static const struct { uint32_t row_bytes, packs; } dtypes[] = {{256, 0}, {256, 1}, {72, 3}};
    for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
        engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = 1000, .row_bytes = dtypes[d].row_bytes,
                                   .entries_per_token = EPT, .max_tokens = MAX_TOKENS,
                                   .scale_packs = dtypes[d].packs, .recv = ENGRAM_RECV_HOST};
        harness_t h;
        CHECK_OK(harness_open(&h, g, sc->transport, sc->hybrid, &p));
        CHECK_OK(harness_write(&h));
        check_boundaries(&h);
        check_shapes(&h, false);
        if (dtypes[d].packs)
            check_shapes(&h, true);
        check_many_in_flight(&h);
        check_repeats(&h, false);
        if (dtypes[d].packs)
            check_repeats(&h, true);
        harness_close(&h);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *transport = argc > 1 ? argv[1] : "loopback";
    static const struct { int ranks, local; bool hybrid; } shapes[] = {
        {4, 4, false}, {4, 2, false}, {4, 2, true}, {4, 4, true}, {1, 1, false}, {2, 1, true}};
    static const char *const dedups[] = {"off", "on"};
    for (size_t d = 0; d < 2; d++)
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            scenario_t sc = {.transport = transport, .hybrid = shapes[s].hybrid, .dedup = dedups[d]};
            int codes[8];
            engram_status_t st = engram_group_fork_run(shapes[s].ranks, shapes[s].local, rank_main, &sc, codes);
            if (st != ENGRAM_OK)
                fprintf(stderr, "shape %d ranks x %d local, %s, dedup=%s: failed\n", shapes[s].ranks,
                        shapes[s].local, shapes[s].hybrid ? "hybrid" : "direct", sc.dedup);
            CHECK_OK(st);
        }
    printf("engram_fetch_test(%s): ok\n", transport);
    return 0;
}
