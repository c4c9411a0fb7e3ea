/* Table sizes that do not fit: engram_table_create and
 * engram_storage_size_hint refuse them with ENGRAM_ERR_OVERFLOW, naming the
 * parameters, before allocating anything (one rank, recording transport).
 * The first two cases are sizes that wrap (a 32-bit scale round-up to 0,
 * a receive slot size wrapping 64 bits): created, such a table would have
 * its fetches write past the buffers. */
#include <string.h>

#include "engram/internal.h"
#include "tests/check.h"
#include "tests/recording_transport.h"
#include "tests/single_rank.h"

static engram_context_t *ctx;

static void check_words(const char *const *words);

static void check_refused(engram_table_params_t p, const char *const *words)
{
    p.size = sizeof(p);
    engram_table_t *t = NULL;
    int regions = recording_log.open_regions;
    CHECK_STATUS(engram_table_create(ctx, &p, &t), ENGRAM_ERR_OVERFLOW);
    CHECK(t == NULL);
    CHECK(recording_log.open_regions == regions);
    check_words(words);
}

static void check_table_params(void)
{
    /* (n + 3) & ~3 in 32 bits gives 0 scale slots */
    check_refused((engram_table_params_t){.entries_per_rank = 16, .row_bytes = 1, .entries_per_token = 1,
                                          .max_tokens = 4294967293u, .scale_packs = 64},
                  (const char *const[]){"max_tokens 4294967293", "scale_packs 64", NULL});
    /* max_tokens * entries_per_token * row_bytes wraps to 4 GiB - 2 in 32 bits */
    check_refused((engram_table_params_t){.entries_per_rank = 1, .row_bytes = (1u << 31) + 1,
                                          .entries_per_token = 2, .max_tokens = UINT32_MAX},
                  (const char *const[]){"max_tokens 4294967295", "entries_per_token 2", "row_bytes 2147483649",
                                        "fetch_slots 4", NULL});
    /* the shard */
    check_refused((engram_table_params_t){.entries_per_rank = UINT64_MAX / 32, .row_bytes = 32,
                                          .entries_per_token = 1, .max_tokens = 1},
                  (const char *const[]){"entries_per_rank 576460752303423487", "row_bytes 32", NULL});
    /* entries_per_token * scale_packs past 2^32, though max_tokens is 1 */
    check_refused((engram_table_params_t){.entries_per_rank = 1, .row_bytes = 1, .entries_per_token = UINT32_MAX,
                                          .max_tokens = 1, .scale_packs = UINT32_MAX},
                  (const char *const[]){"entries_per_token 4294967295", "scale_packs 4294967295", NULL});
    /* a fitting table still creates and fetches */
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = 16, .row_bytes = 1, .entries_per_token = 3,
                               .max_tokens = 5, .scale_packs = 2};
    engram_table_t *t;
    CHECK_OK(engram_table_create(ctx, &p, &t));
    static const uint8_t rows[16];
    static const uint32_t scales[16 * 2];
    CHECK_OK(engram_write(t, rows, 1, scales));
    const int64_t idx[5 * 3] = {0, 1, 2, 15, 14, 13, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    engram_fetch_t *f;
    CHECK_OK(engram_fetch(t, idx, 5, ENGRAM_FETCH_SCALES_COL_MAJOR, &f));
    CHECK_OK(engram_wait(f, NULL, NULL));
    engram_fetch_release(f);
    CHECK_OK(engram_table_destroy(t));
}

static void check_words(const char *const *words)
{
    for (int i = 0; words[i] != NULL; i++)
        if (strstr(engram_last_error(), words[i]) == NULL) {
            fprintf(stderr, "message \"%s\" lacks \"%s\"\n", engram_last_error(), words[i]);
            CHECK(0);
        }
}

/* The sizes against a given limit, independent of this machine's memory. */
static void check_size_limits(void)
{
    engram_table_sizes_t s = {0};
    /* the replicated scales: 2^24 entries x 2^10 ranks x 2^12 packs x 4 bytes */
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = 1u << 24, .row_bytes = 1,
                               .entries_per_token = 1, .max_tokens = 1, .scale_packs = 1u << 12};
    CHECK_STATUS(engram_table_sizes(&p, 1u << 10, 1, 4, ENGRAM_MAX_BYTES, &s), ENGRAM_ERR_OVERFLOW);
    check_words((const char *const[]){"replicated scales", "1024 ranks", "scale_packs 4096", "address space", NULL});
    CHECK(s.shard_bytes == 0); /* out untouched on failure */
    /* each buffer within the limit, together past it */
    p = (engram_table_params_t){.size = sizeof(p), .entries_per_rank = 1u << 20, .row_bytes = 32,
                                .entries_per_token = 1, .max_tokens = 1u << 20};
    CHECK_OK(engram_table_sizes(&p, 1, 1, 1, 1ull << 35, &s));
    CHECK(s.shard_bytes == 1ull << 25 && s.recv_bytes == 1ull << 25 && s.scales_recv_bytes == 0);
    CHECK_STATUS(engram_table_sizes(&p, 1, 1, 1, (1ull << 26) - 1, &s), ENGRAM_ERR_OVERFLOW);
    check_words((const char *const[]){"in all", "this machine's memory", NULL});
    /* the node span: every local shard behind one another */
    p.max_tokens = 1;
    CHECK_STATUS(engram_table_sizes(&p, 1u << 23, 1u << 23, 1, ENGRAM_MAX_BYTES, &s), ENGRAM_ERR_OVERFLOW);
    check_words((const char *const[]){"node span of 8388608 local ranks", NULL});
    /* the column-major round-up counts: 5 tokens take 8 */
    p = (engram_table_params_t){.size = sizeof(p), .entries_per_rank = 1, .row_bytes = 1, .entries_per_token = 3,
                                .max_tokens = 5, .scale_packs = 2};
    CHECK_OK(engram_table_sizes(&p, 2, 1, 4, ENGRAM_MAX_BYTES, &s));
    CHECK(s.slot_scale_elems == 8 * 3 * 2 && s.scales_recv_bytes == 8 * 3 * 2 * 4 * 4 && s.scales_bytes == 2 * 2 * 4);
    CHECK(s.total_entries == 2 && s.slot_rows == 15 && s.slot_row_bytes == 15 && s.recv_bytes == 60);
}

static void check_storage_hint(void)
{
    engram_storage_hint_t h = {0};
    CHECK_STATUS(engram_storage_size_hint(1ull << 42, 33, 1, &h), ENGRAM_ERR_OVERFLOW);
    CHECK(strstr(engram_last_error(), "entries_per_rank 4398046511104") != NULL);
    CHECK(strstr(engram_last_error(), "row_bytes 33") != NULL);
    CHECK_STATUS(engram_storage_size_hint(1, 1, UINT64_MAX, &h), ENGRAM_ERR_OVERFLOW);
    CHECK(strstr(engram_last_error(), "max_rows_per_fetch 18446744073709551615") != NULL);
    CHECK(h.row_stride == 0); /* out untouched on failure */
    CHECK_STATUS(engram_storage_size_hint(1, 1, 1, NULL), ENGRAM_ERR_INVALID);
    CHECK_OK(engram_storage_size_hint(1ull << 42, 32, 1ull << 42, &h));
    CHECK(h.row_stride == 32 && h.cpu_table_bytes == 1ull << 47 && h.gpu_recv_bytes == 1ull << 47);
}

int main(void)
{
    engram_group_t *g;
    CHECK_OK(single_rank_open("recording", NULL, &g, &ctx));
    check_table_params();
    check_size_limits();
    check_storage_hint();
    CHECK(recording_log.open_regions == 0 && recording_log.open_requests == 0);
    CHECK_OK(single_rank_close(g, ctx));
    puts("engram_sizes_test: ok");
    return 0;
}
