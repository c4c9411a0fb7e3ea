/* Over UCX on tcp a get is served by its owner's CPU, only while the owner
 * is inside an engram call. Rank 1 waits outside engram (as in a plain
 * torch.distributed.barrier()) longer than the timeout: rank 0's fetch of
 * rank 1's rows times out, and the message says why and what to wait in
 * instead (group.barrier()). Then rank 1 waits in the engram group's
 * barrier, which serves, and the next fetch completes. 2 forked ranks,
 * UCX_TLS=tcp (set by the BUILD target), timeout_ms=2000: rank 1 is away
 * 3.2 s, so rank 0 times out and is then in the barrier for about 1.2. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/engram_harness.h"

#define EPR 64u
#define EPT 2u
#define TOKENS 4u

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = 64, .entries_per_token = EPT, .max_tokens = TOKENS,
                                             .recv = ENGRAM_RECV_HOST};

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    harness_t h;
    CHECK_OK(harness_open(&h, g, "ucx", false, &params));
    CHECK_OK(harness_write(&h));
    int me = engram_group_rank(g);
    if (me == 1) {
        usleep(3200 * 1000); /* away from engram, past rank 0's timeout */
        CHECK_OK(engram_group_barrier(g));
    } else {
        int64_t idx[TOKENS * EPT];
        for (uint32_t i = 0; i < TOKENS * EPT; i++)
            idx[i] = EPR + i; /* rank 1's rows */
        engram_fetch_t *f;
        CHECK_OK(engram_fetch(h.table, idx, TOKENS, 0, &f));
        CHECK_STATUS(engram_wait(f, NULL, NULL), ENGRAM_ERR_TIMEOUT);
        const char *e = engram_last_error();
        if (strstr(e, "serves its peers' gets only while it is inside an engram call") == NULL ||
            strstr(e, "torch.distributed.barrier()") == NULL || strstr(e, "group.barrier()") == NULL) {
            fprintf(stderr, "the timeout does not say why: %s\n", e);
            return 1;
        }
        (void)engram_fetch_release(f);
        CHECK_OK(engram_group_barrier(g)); /* rank 1 is in it from here on, serving */
        bool match = false;
        CHECK_OK(harness_fetch_check(&h, idx, TOKENS, false, &match));
        CHECK(match);
    }
    CHECK_OK(engram_group_barrier(g));
    harness_close(&h);
    return 0;
}

int main(void)
{
    setenv("ENGRAM_TIMEOUT_MS", "2000", 1);
    CHECK_OK(engram_group_fork_run(2, 0, rank_main, NULL, NULL));
    puts("engram_owner_away_test: ok");
    return 0;
}
