/* The bookkeeping of a GPU table's fetches ended in stream order
 * (engram_fetch_release_ordered): their report entries, the chains of
 * fetches that took turns in a receive slot on one stream, and the
 * completions waiting for engram_table_poll_released. CUDA-free (the
 * caller says when a fetch is complete), so the CPU tier tests it.
 *
 * Report entries: every GPU fetch's kernel writes its bad-index tally and
 * completion seq into a report entry of its own (gather.h), taken at
 * launch and given back once its outcome is read; a slot's next fetch may
 * then run before the host has read the one before it. There are
 * num_slots + max_records entries, so a launch always finds one: at most
 * num_slots are held by fetches in slots (live or retired) and at most
 * max_records by released ones not yet complete.
 *
 * Chains: a released fetch's slot is taken again only by a fetch on the
 * same stream, which CUDA runs after it, until the chain's last fetch is
 * seen complete; so the chain of a slot completes in order, and only its
 * head needs testing. */
#ifndef ENGRAM_GPU_RELEASED_H
#define ENGRAM_GPU_RELEASED_H

#include <stdbool.h>
#include <stdint.h>
#include "engram/engram.h"

#define ENGRAM_RELEASED_NO_REPORT UINT32_MAX /* a fetch holding no report entry */

typedef struct engram_released_rec {
    engram_fetch_completion_t out; /* cookie at release; the rest once complete */
    bool settled;        /* out was known at release (the fetch was complete, or captured) */
    uint64_t seq;        /* the seq its report's blocks store once done; 0: its slot's event tells */
    uint32_t report;     /* its report entry */
    uint32_t num_tokens; /* of the fetch, for the bad row's (token, entry) */
    int slot;
    int next;            /* the next record of its slot's chain, or of the free or done list; -1: none */
} engram_released_rec_t;

typedef struct engram_released {
    int num_slots;
    uint32_t max_records;
    uint32_t num_reports;
    uint32_t *free_reports; /* a stack */
    uint32_t num_free_reports;
    engram_released_rec_t *recs; /* [max_records] */
    int free_recs;              /* list through next */
    int done_head, done_tail;   /* complete, not yet polled: a FIFO through next */
    int *head, *tail;           /* [num_slots]: each slot's chain, oldest first */
    void **stream;              /* [num_slots]: the stream of a slot's chain */
    uint32_t pending;           /* records in chains */
    uint32_t done;              /* records in the done list */
} engram_released_t;

/* ENGRAM_ERR_NOMEM on failure (nothing kept). */
engram_status_t engram_released_init(engram_released_t *r, int num_slots, uint32_t max_records);
void engram_released_fini(engram_released_t *r);

/* A free report entry (always one, by the sizing above) / back to the
 * pool (ENGRAM_RELEASED_NO_REPORT: nothing). */
uint32_t engram_released_take_report(engram_released_t *r);
void engram_released_put_report(engram_released_t *r, uint32_t report);

/* Appends the fetch in `slot` (on `stream`) to the slot's chain;
 * ENGRAM_ERR_BUSY when max_records are pending or not yet polled. */
engram_status_t engram_released_add(engram_released_t *r, int slot, void *stream, uint64_t cookie, uint64_t seq,
                                    uint32_t report, uint32_t num_tokens);
/* The record engram_released_add just appended to slot's chain. */
engram_released_rec_t *engram_released_last(engram_released_t *r, int slot);

/* Whether the record's fetch is complete (known_complete: it is, without
 * asking); when it is, fills rec->out (status, bad-index report) from
 * its report entry. */
typedef bool (*engram_released_test_fn)(void *ctx, engram_released_rec_t *rec, bool known_complete);

/* Moves the complete heads of slot's chain to the done list (all of
 * them when `all_complete`: a later fetch in the slot is known complete),
 * giving back their report entries. Returns whether the chain is empty. */
bool engram_released_reap_slot(engram_released_t *r, int slot, bool all_complete, engram_released_test_fn test,
                               void *ctx);
/* Whether slot's chain is empty, and the stream it runs on otherwise. */
bool engram_released_chain_empty(const engram_released_t *r, int slot);
void *engram_released_chain_stream(const engram_released_t *r, int slot);

/* Up to max completions, oldest first, into out; their records freed. */
uint32_t engram_released_poll(engram_released_t *r, engram_fetch_completion_t *out, uint32_t max);

#endif
