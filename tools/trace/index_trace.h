/* Index traces for the benches' --indices FILE: a user's own fetch
 * traffic, replayed step by step.
 *   .npy (recognised by its magic): int32 or int64, C order, shape
 *        [steps, tokens, entries_per_token];
 *   anything else: raw little-endian int64 [steps][tokens][entries_per_token]
 *        with tokens and entries_per_token from the bench's flags, steps
 *        from the file size (a whole number of steps, at least one).
 * Every index must lie in [0, total_rows): checked once when opened, so a
 * replay checks its rows bit for bit like a generated run. */
#ifndef ENGRAM_TOOLS_TRACE_INDEX_TRACE_H
#define ENGRAM_TOOLS_TRACE_INDEX_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct index_trace {
    void *map; /* the whole file, mapped read-only (shared with forked ranks) */
    uint64_t map_len;
    const uint8_t *data;
    uint32_t elem_bytes;
    uint64_t steps;
    uint32_t tokens, entries_per_token;
} index_trace_t;

/* The shape a bench asks for: for .npy a value that is set must match the
 * file; for raw files both are needed. */
typedef struct index_trace_want {
    uint32_t tokens, entries_per_token;
    bool tokens_set, entries_per_token_set;
    uint64_t total_rows;
} index_trace_want_t;

/* Returns 0 and fills *out, or -1 with a message in err naming the file. */
int index_trace_open(const char *path, const index_trace_want_t *want, index_trace_t *out, char *err, size_t errlen);
/* The tokens * entries_per_token indices of step `step` mod steps. */
void index_trace_step(const index_trace_t *t, uint64_t step, int64_t *out);
void index_trace_close(index_trace_t *t);

#endif
