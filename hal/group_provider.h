/* What a group provider implements (internal). */
#ifndef ENGRAM_HAL_GROUP_PROVIDER_H
#define ENGRAM_HAL_GROUP_PROVIDER_H

#include <stdint.h>

#include "hal/group.h"

typedef struct engram_group_ops {
    size_t size; /* sizeof(engram_group_ops_t) */
    const char *name;
    engram_status_t (*allgather)(engram_group_t *g, const void *send, void *recv, size_t bytes);
    engram_status_t (*barrier)(engram_group_t *g);
    void (*destroy)(engram_group_t *g); /* frees provider state, not the group */
} engram_group_ops_t;

struct engram_group {
    const engram_group_ops_t *ops;
    void *provider; /* provider state */
    int rank, size, local_rank, local_size;
    int timeout_ms;
    int64_t bound_end_ns; /* a running bound's end (engram_group_bound_begin), or 0 */
    engram_status_t failed; /* the first collective that failed here; every later one is refused */
    char failed_why[320];
    engram_group_hosts_t *hosts; /* NULL until gathered */
    engram_group_progress_fn progress; /* see engram_group_set_progress */
    void *progress_arg;
};

/* Fills the common fields; local_size 0 = size. Validates that size is a
 * multiple of local_size. */
engram_status_t engram_group_init(engram_group_t *g, const engram_group_ops_t *ops, void *provider, int rank,
                                  int size, int local_size);

/* The most a provider's collective may wait now (ms): timeout_ms, or less
 * while a bound runs (engram_group_bound_begin), never less than 1. A
 * collective whose bound is already spent is refused before the provider
 * is called. */
int engram_group_wait_ms(const engram_group_t *g);

/* Milliseconds left in the running bound, INT_MAX without one. */
int engram_group_bound_left_ms(const engram_group_t *g);

/* Providers call this while a collective waits; returns the longest poll
 * (ms) they may block for before calling it again: `left_ms` when no
 * progress hook is set, 0 (poll without blocking) when one is. */
int engram_group_waiting(engram_group_t *g, int left_ms);

#endif
