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

/* Opens a group of one rank and a context with transport=`transport`,
 * huge_pages=off and the NULL-terminated key/value pairs of `settings`
 * (may be NULL). */
engram_status_t single_rank_open(const char *transport, const char *const *settings, engram_group_t **group,
                                 engram_context_t **ctx);
/* Destroys what single_rank_open made (the context first). */
engram_status_t single_rank_close(engram_group_t *group, engram_context_t *ctx);

#endif
