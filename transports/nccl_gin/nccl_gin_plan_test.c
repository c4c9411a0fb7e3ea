/* The spread of a fetch's gets over GIN contexts (nccl_gin_plan.h) and the
 * queue depth it is planned against (nccl_gin_depth.c), on the CPU: the
 * blocks' rows partition the fetch in order, each queue's blocks cover
 * exactly the tokens the host fetch gives it (engram_queue_walk: token t on
 * queue t * queues / tokens), no block (context) gets
 * more rows than the depth when the contexts suffice, blocks of one fetch
 * and of fetches on disjoint queues never share a context, and DeepEP's
 * decode shape goes from 768 gets per context to 256. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/check.h"
#include "transports/nccl_gin/nccl_gin_depth.h"
#include "transports/nccl_gin/nccl_gin_plan.h"

enum { QUEUES = 16 }; /* ENGRAM_NCCL_GIN_MAX_QUEUES */

/* The host fetch's queue of a token (engram_queue_walk_t), relative to first_queue. */
static uint32_t queue_of(uint32_t token, uint32_t nq, uint32_t nt)
{
    return (uint32_t)((uint64_t)token * nq / nt);
}

/* One fetch: every row in exactly one block, blocks in row order, a
 * block's rows all of its queue's tokens; returns the most rows a block
 * got. */
static uint64_t check_fetch(uint32_t nt, uint32_t ept, uint32_t nq, uint32_t batches)
{
    uint64_t next = 0, most = 0;
    for (uint32_t b = 0; b < nq * batches; b++) {
        engram_nccl_gin_rows_t r = engram_nccl_gin_block_rows(nt, ept, nq, batches, b);
        CHECK(r.first == next && r.end >= r.first);
        for (uint64_t row = r.first; row < r.end; row++)
            CHECK(queue_of((uint32_t)(row / ept), nq, nt) == b / batches);
        most = r.end - r.first > most ? r.end - r.first : most;
        next = r.end;
    }
    CHECK(next == (uint64_t)nt * ept);
    return most;
}

/* Blocks of one fetch run on distinct contexts, each among its queue's
 * own, when the dev comm has QUEUES * per_queue; with fewer they wrap
 * inside the dev comm's. */
static void check_contexts(int first_queue, uint32_t nq, uint32_t per_queue, uint32_t batches)
{
    uint8_t seen[QUEUES * ENGRAM_NCCL_GIN_MAX_CONTEXTS_PER_QUEUE];
    memset(seen, 0, sizeof(seen));
    const uint32_t contexts = QUEUES * per_queue;
    for (uint32_t b = 0; b < nq * batches; b++) {
        uint32_t c = engram_nccl_gin_block_context(first_queue, per_queue, batches, b, contexts);
        uint32_t queue = (uint32_t)first_queue + b / batches;
        CHECK(c >= queue * per_queue && c < (queue + 1) * per_queue);
        CHECK(!seen[c]);
        seen[c] = 1;
        CHECK(engram_nccl_gin_block_context(first_queue, per_queue, batches, b, 3) < 3);
    }
}

static void check_shapes(void)
{
    static const uint32_t tokens[] = {1, 2, 7, 15, 16, 17, 96, 512, 1000};
    static const uint32_t epts[] = {1, 5, 24};
    static const uint32_t queues[] = {1, 3, 16};
    static const uint32_t depths[] = {1, 8, 100, 256};
    for (size_t a = 0; a < sizeof(tokens) / sizeof(*tokens); a++)
        for (size_t e = 0; e < sizeof(epts) / sizeof(*epts); e++)
            for (size_t q = 0; q < sizeof(queues) / sizeof(*queues); q++)
                for (size_t d = 0; d < sizeof(depths) / sizeof(*depths); d++) {
                    uint32_t nt = tokens[a], ept = epts[e], nq = queues[q], depth = depths[d];
                    uint32_t per_queue = engram_nccl_gin_per_queue(nt * ept, QUEUES, depth);
                    CHECK(per_queue >= 1 && per_queue <= ENGRAM_NCCL_GIN_MAX_CONTEXTS_PER_QUEUE);
                    uint32_t batches = engram_nccl_gin_batches(nt, ept, nq, depth, per_queue);
                    CHECK(batches >= 1 && batches <= per_queue);
                    uint64_t most = check_fetch(nt, ept, nq, batches);
                    /* enough contexts: none over the depth */
                    uint32_t unbounded = engram_nccl_gin_batches(nt, ept, nq, depth, UINT32_MAX);
                    if (unbounded <= per_queue)
                        CHECK(most <= depth);
                    CHECK(check_fetch(nt, ept, nq, unbounded) <= depth);
                    check_contexts(0, nq, per_queue, batches);
                    check_contexts(QUEUES - (int)nq, nq, per_queue, batches);
                }
}

/* A fetch on queues [0, 8) and one on [8, 16) never share a context. */
static void check_disjoint_fetches(void)
{
    const uint32_t per_queue = 3, batches = 3, contexts = QUEUES * per_queue;
    for (uint32_t b = 0; b < 8 * batches; b++)
        for (uint32_t c = 0; c < 8 * batches; c++)
            CHECK(engram_nccl_gin_block_context(0, per_queue, batches, b, contexts) !=
                  engram_nccl_gin_block_context(8, per_queue, batches, c, contexts));
}

/* DeepEP's decode shape over the RMA plugin's proxy queues. */
static void check_decode_shape(void)
{
    const uint32_t nt = 512, ept = 24, depth = 256;
    CHECK(engram_nccl_gin_queue_rows(nt, ept, QUEUES) == 768); /* one context per queue: 3x the queue */
    uint32_t per_queue = engram_nccl_gin_per_queue(nt * ept, QUEUES, depth);
    CHECK(per_queue == 3);
    uint32_t batches = engram_nccl_gin_batches(nt, ept, QUEUES, depth, per_queue);
    CHECK(batches == 3);
    CHECK(check_fetch(nt, ept, QUEUES, batches) == 256);
    /* fewer tokens need fewer contexts */
    CHECK(engram_nccl_gin_batches(96, ept, QUEUES, depth, per_queue) == 1);
    /* a table sized for more than the contexts allow: capped, and then a
     * context does hold more than the depth */
    uint32_t capped = engram_nccl_gin_per_queue(4096 * ept, QUEUES, depth);
    CHECK(capped == ENGRAM_NCCL_GIN_MAX_CONTEXTS_PER_QUEUE);
    CHECK(engram_nccl_gin_batches(4096, ept, QUEUES, depth, capped) == capped);
    CHECK(check_fetch(4096, ept, QUEUES, capped) > depth);
}

/* The extremes of the sizes: a slot of UINT32_MAX rows on one queue. */
static void check_large(void)
{
    const uint32_t nt = UINT32_MAX, ept = 1;
    uint32_t batches = engram_nccl_gin_batches(nt, ept, 1, 1, ENGRAM_NCCL_GIN_MAX_CONTEXTS_PER_QUEUE);
    CHECK(batches == ENGRAM_NCCL_GIN_MAX_CONTEXTS_PER_QUEUE);
    engram_nccl_gin_rows_t last = engram_nccl_gin_block_rows(nt, ept, 1, batches, batches - 1);
    CHECK(last.end == UINT32_MAX);
    CHECK(engram_nccl_gin_block_rows(nt, ept, 1, batches, 1).first == (uint64_t)UINT32_MAX / batches);
    CHECK(engram_nccl_gin_per_queue(UINT32_MAX, QUEUES, 1) == ENGRAM_NCCL_GIN_MAX_CONTEXTS_PER_QUEUE);
    CHECK(engram_nccl_gin_queue_rows(UINT32_MAX, UINT32_MAX, 1) == (uint64_t)UINT32_MAX * UINT32_MAX);
}

static void check_depth(void)
{
    const int proxy = ENGRAM_NCCL_GIN_TYPE_PROXY, gdaki = 3;
    CHECK(engram_nccl_gin_queue_depth(proxy, 0, NULL, NULL) == 256);
    CHECK(engram_nccl_gin_queue_depth(proxy, 64, NULL, NULL) == 256); /* ginQueueDepth: not the proxy's */
    CHECK(engram_nccl_gin_queue_depth(proxy, 0, "64", NULL) == 64);
    CHECK(engram_nccl_gin_queue_depth(proxy, 0, "1", NULL) == 1);
    /* what NCCL replaces with its maximum */
    static const char *const refused[] = {"", "0", "-4", "100", "512", "64k", "x", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++)
        CHECK(engram_nccl_gin_queue_depth(proxy, 0, refused[i], NULL) == 256);
    CHECK(engram_nccl_gin_queue_depth(gdaki, 0, "64", NULL) == 128);
    CHECK(engram_nccl_gin_queue_depth(gdaki, 0, NULL, "512") == 512);
    CHECK(engram_nccl_gin_queue_depth(gdaki, 32, NULL, "512") == 32);
    CHECK(engram_nccl_gin_queue_depth(gdaki, 0, NULL, "-1") == 128);
    CHECK(engram_nccl_gin_queue_depth(gdaki, 0, NULL, "4294967296") == 128);
}

int main(void)
{
    check_shapes();
    check_disjoint_fetches();
    check_decode_shape();
    check_large();
    check_depth();
    printf("nccl_gin_plan_test: all passed\n");
    return 0;
}
