/* engram_table_params_t from callers of other header versions: an older
 * (smaller) struct gets the defaults of the fields it lacks (recv HOST) and
 * works end to end; a newer (larger) one is accepted while its unknown
 * fields are zero; sizes no version has are refused with the struct named. */
#include <stdio.h>
#include <string.h>

#include "engram/engram.h"
#include "hal/testdata/check_error.h"

enum { EPR = 8, ROW = 16 };

static void fetch_row(engram_table_t *t, int64_t index)
{
    engram_fetch_t *f = NULL;
    CHECK_OK(engram_fetch(t, &index, 1, 0, &f));
    const void *rows = NULL;
    const uint32_t *scales = NULL;
    CHECK_OK(engram_wait(f, &rows, &scales));
    const unsigned char *r = rows;
    for (int b = 0; b < ROW; b++)
        CHECK(r[b] == (unsigned char)(index * ROW + b));
    engram_fetch_release(f);
}

int main(void)
{
    engram_group_t *g = NULL;
    CHECK_OK(engram_group_solo_create(&g));
    engram_config_t *cfg = NULL;
    CHECK_OK(engram_config_create(&cfg));
    CHECK_OK(engram_config_set(cfg, "transport", "loopback"));
    engram_context_t *ctx = NULL;
    CHECK_OK(engram_context_create(cfg, g, &ctx));
    unsigned char rows[EPR * ROW];
    for (size_t i = 0; i < sizeof(rows); i++)
        rows[i] = (unsigned char)i;

    /* Built before recv existed: the struct ends at ENGRAM_TABLE_PARAMS_MIN_SIZE. */
    engram_table_params_t p = {.size = ENGRAM_TABLE_PARAMS_MIN_SIZE, .entries_per_rank = EPR, .row_bytes = ROW,
                               .entries_per_token = 1, .max_tokens = 4, .scale_packs = 0};
    p.recv = (engram_recv_location_t)77; /* not the caller's: must not be read */
    engram_table_t *t = NULL;
    CHECK_OK(engram_table_create(ctx, &p, &t));
    CHECK_OK(engram_write(t, rows, ROW, NULL));
    fetch_row(t, 5);
    CHECK_OK(engram_table_destroy(t));

    /* A newer caller, with a field this library does not know. */
    struct {
        engram_table_params_t known;
        uint64_t later;
    } newer = {{.size = sizeof(newer), .entries_per_rank = EPR, .row_bytes = ROW, .entries_per_token = 1,
                .max_tokens = 4},
               0};
    CHECK_OK(engram_table_create(ctx, &newer.known, &t));
    CHECK_OK(engram_table_destroy(t));
    newer.later = 1;
    t = NULL;
    CHECK_ERROR(engram_table_create(ctx, &newer.known, &t), ENGRAM_ERR_VERSION,
                "table params: size is 48 bytes and byte 40 is set");
    p.size = ENGRAM_TABLE_PARAMS_MIN_SIZE - 8;
    CHECK_ERROR(engram_table_create(ctx, &p, &t), ENGRAM_ERR_VERSION,
                "table params: size is 24 bytes, less than the 32 every version has");
    p.size = sizeof(p) - 1;
    CHECK_ERROR(engram_table_create(ctx, &p, &t), ENGRAM_ERR_VERSION, "is not a multiple of the struct's alignment");
    CHECK_ERROR(engram_table_create(ctx, NULL, &t), ENGRAM_ERR_INVALID, "table params: NULL");
    CHECK(t == NULL);

    CHECK_OK(engram_context_destroy(ctx));
    engram_config_destroy(cfg);
    engram_group_destroy(g);
    printf("engram_params_size_test: all passed\n");
    return 0;
}
