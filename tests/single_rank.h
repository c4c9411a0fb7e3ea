/* A one-rank group and a context on it, for tests and fuzz targets that
 * drive the engram layer in one process against a test transport; and one
 * process standing in for every rank of a larger group. */
#ifndef ENGRAM_TESTS_SINGLE_RANK_H
#define ENGRAM_TESTS_SINGLE_RANK_H

#include "engram/engram.h"

/* A callbacks group in which this process is `rank` of `nranks` identical
 * ranks: allgather replicates this rank's contribution (what identical
 * ranks would send), barrier returns at once. */
engram_status_t replicated_group_create(int rank, int nranks, int local_size, engram_group_t **out);

/* A context on `group` with transport=`transport`, huge_pages=off and the
 * NULL-terminated key/value pairs of `settings` (may be NULL). */
engram_status_t test_context_open(engram_group_t *group, const char *transport, const char *const *settings,
                                  engram_context_t **ctx);
/* A recv=HOST table on ctx (collective), written with zero rows. */
engram_status_t test_host_table_open(engram_context_t *ctx, uint64_t entries_per_rank, uint32_t row_bytes,
                                     uint32_t entries_per_token, uint32_t max_tokens, engram_table_t **table);

/* Opens a group of one rank and a context with transport=`transport`,
 * huge_pages=off and the NULL-terminated key/value pairs of `settings`
 * (may be NULL). */
engram_status_t single_rank_open(const char *transport, const char *const *settings, engram_group_t **group,
                                 engram_context_t **ctx);
/* Destroys what single_rank_open made (the context first). */
engram_status_t single_rank_close(engram_group_t *group, engram_context_t *ctx);

#endif
