/* Helpers for engram-level tests: a context + table on forked ranks, with
 * deterministic contents and a host reference to compare against. */
#ifndef ENGRAM_TESTS_ENGRAM_HARNESS_H
#define ENGRAM_TESTS_ENGRAM_HARNESS_H

#include <stdbool.h>
#include "engram/engram.h"

typedef struct harness {
    engram_group_t *g;
    engram_context_t *ctx;
    engram_table_t *table;
    engram_table_params_t params;
} harness_t;

/* transport NULL = config default; returns the status of the first failing step. */
engram_status_t harness_open(harness_t *h, engram_group_t *g, const char *transport, bool hybrid,
                             const engram_table_params_t *params);
/* Writes rows and (if the table has them) scales from table_gen_row/table_gen_scale. */
engram_status_t harness_write(harness_t *h);
/* The same through engram_write_begin / engram_write_rows of chunk_rows
 * rows each, last chunk first / engram_write_end (0: engram_write). */
engram_status_t harness_write_chunks(harness_t *h, uint64_t chunk_rows);
void harness_close(harness_t *h);

/* Compares a completed fetch with the reference; bad (out of range)
 * indices must have zero rows and scales. Returns true when equal. */
bool harness_check(const harness_t *h, const int64_t *indices, uint32_t tokens, bool col_major, const void *rows,
                   const uint32_t *scales);

/* Fetch + wait + check + release; returns the wait status. */
engram_status_t harness_fetch_check(harness_t *h, const int64_t *indices, uint32_t tokens, bool col_major,
                                    bool *match);

#endif
