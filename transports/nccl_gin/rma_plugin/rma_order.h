/* Completion bookkeeping of one CUDA stream of the plugin. Copies on a
 * stream complete in order, so once a request is found pending, the later
 * ones tested in the same sweep of NCCL's proxy (which tests every
 * outstanding request, oldest first, each loop) are pending too: one event
 * query per stream and sweep instead of one per outstanding request. */
#ifndef ENGRAM_RMA_ORDER_H
#define ENGRAM_RMA_ORDER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct rma_stream_order {
    uint64_t issued;       /* sequence number of the last request issued */
    uint64_t done;         /* every request up to this one is complete */
    uint64_t last_tested;  /* the sweep restarts when a test goes back */
    uint64_t pending_from; /* found pending in this sweep; UINT64_MAX: none */
} rma_stream_order_t;

#define RMA_STREAM_ORDER_INIT {0, 0, 0, UINT64_MAX}

typedef enum rma_order_answer {
    RMA_ORDER_DONE,    /* complete: no query needed */
    RMA_ORDER_PENDING, /* behind a request found pending in this sweep */
    RMA_ORDER_QUERY,   /* unknown: query its event, then rma_order_found */
} rma_order_answer_t;

/* What is known of request `seq` as it is tested. */
static inline rma_order_answer_t rma_order_lookup(rma_stream_order_t *o, uint64_t seq)
{
    if (seq <= o->last_tested)
        o->pending_from = UINT64_MAX; /* a new sweep */
    o->last_tested = seq;
    if (seq <= o->done)
        return RMA_ORDER_DONE;
    return seq >= o->pending_from ? RMA_ORDER_PENDING : RMA_ORDER_QUERY;
}

/* What the query of request `seq` found. */
static inline void rma_order_found(rma_stream_order_t *o, uint64_t seq, bool done)
{
    if (!done)
        o->pending_from = seq;
    else if (seq > o->done)
        o->done = seq;
}

#endif
