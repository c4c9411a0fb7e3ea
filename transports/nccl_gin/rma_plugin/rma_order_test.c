/* rma_order.h against a model stream whose copies complete in order up to
 * a frontier: never "done" past the frontier, one event query per sweep
 * while the oldest request is pending, every completed request reported
 * done by the next oldest-first sweep, and a sweep that goes back starts
 * afresh. CPU tier; no CUDA. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/check.h"
#include "transports/nccl_gin/rma_plugin/rma_order.h"

#define N 200

static uint64_t frontier; /* the model stream: requests <= frontier are complete */
static int queries;

/* What rma_ops_test does for request seq, with the model's event. */
static bool test_request(rma_stream_order_t *o, uint64_t seq)
{
    rma_order_answer_t a = rma_order_lookup(o, seq);
    if (a == RMA_ORDER_PENDING)
        return false;
    bool done = a == RMA_ORDER_DONE;
    if (a == RMA_ORDER_QUERY) {
        queries++;
        done = seq <= frontier;
        rma_order_found(o, seq, done);
    }
    CHECK(!done || seq <= frontier); /* never done early */
    return done;
}

/* NCCL's proxy: every outstanding request, oldest first. */
static void sweep(rma_stream_order_t *o, bool *done, uint64_t *oldest)
{
    queries = 0;
    for (uint64_t s = *oldest; s <= N; s++)
        if (!done[s])
            done[s] = test_request(o, s);
    while (*oldest <= N && done[*oldest])
        (*oldest)++;
}

int main(void)
{
    rma_stream_order_t o = RMA_STREAM_ORDER_INIT;
    bool done[N + 1] = {false};
    uint64_t oldest = 1;

    frontier = 0;
    sweep(&o, done, &oldest);
    CHECK(queries == 1 && oldest == 1); /* the oldest is pending: the rest are not queried */
    sweep(&o, done, &oldest);
    CHECK(queries == 1);

    frontier = 120;
    sweep(&o, done, &oldest);
    CHECK(oldest == 121); /* everything complete was found in one sweep */
    for (uint64_t s = 1; s <= N; s++)
        CHECK(done[s] == (s <= 120));

    /* Random frontiers, and tests of single requests out of sweep order. */
    srand(7);
    for (int round = 0; round < 1000 && oldest <= N; round++) {
        if (frontier < N && rand() % 3 == 0)
            frontier += (uint64_t)(rand() % 5);
        if (frontier > N)
            frontier = N;
        uint64_t s = oldest + (uint64_t)(rand() % (int)(N - oldest + 1));
        if (!done[s])
            done[s] = test_request(&o, s);
        if (rand() % 4 == 0) {
            uint64_t f = frontier;
            sweep(&o, done, &oldest);
            CHECK(oldest == f + 1); /* all complete found, none past the frontier */
        }
    }
    frontier = N;
    sweep(&o, done, &oldest);
    CHECK(oldest == N + 1);

    /* Every request of a completed stream is done without a query. */
    rma_stream_order_t full = RMA_STREAM_ORDER_INIT;
    frontier = N;
    CHECK(test_request(&full, N));
    queries = 0;
    for (uint64_t s = 1; s < N; s++)
        CHECK(test_request(&full, s));
    CHECK(queries == 0);
    printf("rma_order_test: passed\n");
    return 0;
}
