/* The queue walk of a fetch's tokens (engram/internal.h) gives every token
 * the queue first_queue + token * num_queues / num_tokens, for fewer,
 * equal and more queues than tokens, and from a first queue other than 0. */
#include "engram/internal.h"
#include "tests/check.h"

int main(void)
{
    long checked = 0;
    for (int first = 0; first <= 5; first += 5)
        for (uint32_t tokens = 1; tokens <= 300; tokens++)
            for (int queues = 1; queues <= 70; queues++) {
                engram_fetch_slot_t f = {.first_queue = first, .num_queues = queues, .num_tokens = tokens};
                engram_queue_walk_t w;
                engram_queue_walk_begin(&f, &w);
                for (uint32_t t = 0; t < tokens; t++, checked++)
                    CHECK(engram_queue_walk_to(&f, &w, t) == first + (int)((uint64_t)t * queues / tokens));
            }
    /* the largest fetch: 2^32 - 1 tokens over 1024 queues, the boundaries in 64 bits */
    engram_fetch_slot_t f = {.first_queue = 0, .num_queues = 1024, .num_tokens = UINT32_MAX};
    engram_queue_walk_t w;
    engram_queue_walk_begin(&f, &w);
    for (uint64_t t = UINT32_MAX - 3u * 1024 * 1024; t < UINT32_MAX; t += 4099, checked++)
        CHECK(engram_queue_walk_to(&f, &w, (uint32_t)t) == (int)(t * 1024 / UINT32_MAX));
    CHECK(engram_queue_walk_to(&f, &w, UINT32_MAX - 1) == 1023);
    printf("queue walk: %ld tokens checked\n", checked);
    return 0;
}
