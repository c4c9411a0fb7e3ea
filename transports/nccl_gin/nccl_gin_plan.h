/* How the nccl_gin kernels spread one fetch's gets over GIN contexts.
 *
 * A GIN context holds at most `depth` gets in flight per peer (NCCL's
 * proxy: NCCL_GIN_PROXY_QUEUE_SIZE, by default 32 x the plugin's maxRecvs
 * = 256; GDAKI: the QP depth, ginQueueDepth or NCCL_GIN_GDAKI_QP_DEPTH,
 * by default 128). A kernel that posts more waits, holding its SMs, until
 * completions free credits: the issue kernel would then last as long as
 * the transfer. So each queue owns `per_queue` contexts, and a fetch's
 * queue splits its rows into `batches` (at most per_queue) consecutive
 * parts of at most `depth` rows, one kernel block and one context each:
 * no context is asked for more gets per peer than it holds.
 *
 * Queue q of a fetch over queues [first_queue, first_queue + num_queues)
 * takes the tokens the host fetch gives it (engram_queue_walk_t: token * nq / nt == q);
 * block b = q * batches + j takes part j of q's rows, on context
 * ((first_queue + q) * per_queue + j) % contexts (engram_nccl_gin_block_context);
 * its flush requests sit at index b of the fetch's.
 *
 * Header-only, C and CUDA (engram/plugin/routing.h's ENGRAM_HOST_DEVICE): the
 * kernels and the launcher use the same math, and nccl_gin_plan_test checks
 * it on the CPU. */
#ifndef ENGRAM_TRANSPORTS_NCCL_GIN_PLAN_H
#define ENGRAM_TRANSPORTS_NCCL_GIN_PLAN_H

#include <stdint.h>
#include "engram/plugin/routing.h"

/* Contexts a queue may own: 16 queues x 4 = 64 contexts per dev comm. */
#define ENGRAM_NCCL_GIN_MAX_CONTEXTS_PER_QUEUE 4u

/* Most rows the host fetch (engram_queue_walk_t) gives one of num_queues queues (>= 1) for
 * num_tokens tokens of ept rows. */
ENGRAM_HOST_DEVICE uint64_t engram_nccl_gin_queue_rows(uint32_t num_tokens, uint32_t ept, uint32_t num_queues)
{
    return ((uint64_t)num_tokens + num_queues - 1) / num_queues * ept;
}

/* Parts of at most depth (>= 1) rows that `rows` needs, in [1, most]. */
ENGRAM_HOST_DEVICE uint32_t engram_nccl_gin_parts(uint64_t rows, uint32_t depth, uint32_t most)
{
    uint64_t need = (rows + depth - 1) / depth;
    return need < 1 ? 1u : need > most ? most : (uint32_t)need;
}

/* Contexts each of `queues` queues owns (attach): enough for a fetch of
 * max_rows rows over all of them, at most ENGRAM_NCCL_GIN_MAX_CONTEXTS_PER_QUEUE. */
ENGRAM_HOST_DEVICE uint32_t engram_nccl_gin_per_queue(uint32_t max_rows, uint32_t queues, uint32_t depth)
{
    return engram_nccl_gin_parts(((uint64_t)max_rows + queues - 1) / queues, depth,
                                 ENGRAM_NCCL_GIN_MAX_CONTEXTS_PER_QUEUE);
}

/* Parts (blocks, contexts) per queue of one fetch (issue): at most per_queue. */
ENGRAM_HOST_DEVICE uint32_t engram_nccl_gin_batches(uint32_t num_tokens, uint32_t ept, uint32_t num_queues,
                                                    uint32_t depth, uint32_t per_queue)
{
    return engram_nccl_gin_parts(engram_nccl_gin_queue_rows(num_tokens, ept, num_queues), depth, per_queue);
}

typedef struct engram_nccl_gin_rows {
    uint64_t first, end; /* rows [first, end) of the fetch */
} engram_nccl_gin_rows_t;

/* The rows of block `block` (< num_queues * batches). */
ENGRAM_HOST_DEVICE engram_nccl_gin_rows_t engram_nccl_gin_block_rows(uint32_t num_tokens, uint32_t ept,
                                                                     uint32_t num_queues, uint32_t batches,
                                                                     uint32_t block)
{
    const uint64_t q = block / batches, j = block % batches, nq = num_queues, nt = num_tokens;
    const uint64_t first = (q * nt + nq - 1) / nq * ept, end = ((q + 1) * nt + nq - 1) / nq * ept;
    /* end - first <= UINT32_MAX rows (a slot's), j < batches: no overflow */
    engram_nccl_gin_rows_t r = {first + (end - first) * j / batches, first + (end - first) * (j + 1) / batches};
    return r;
}

/* The GIN context of block `block` of a dev comm with `contexts`: part
 * block % batches of queue first_queue + block / batches, whose own
 * contexts are [queue * per_queue, (queue + 1) * per_queue) when the dev
 * comm has ENGRAM_NCCL_GIN_MAX_QUEUES * per_queue (fewer: shared). */
ENGRAM_HOST_DEVICE uint32_t engram_nccl_gin_block_context(int first_queue, uint32_t per_queue, uint32_t batches,
                                                          uint32_t block, uint32_t contexts)
{
    return (((uint32_t)first_queue + block / batches) * per_queue + block % batches) % contexts;
}

#endif
