/* engram_bench's case at 1024 ranks returns every rank's result: rank 0
 * writes ranks x 72 B of results, more than a pipe holds above ~910 ranks,
 * so a reader that waited for every rank to exit first would leave rank 0
 * blocked on the full pipe and the case unfinished. Run over the
 * recording transport, which moves no data, so 1024 ranks cost only their
 * processes; the rows it returns are not the table's, so the check is
 * expected to report a mismatch; what is tested is that every result
 * arrives. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "tests/check.h"
#include "tools/bench/bench.h"

#define RANKS 1024

int main(void)
{
    /* the fork launcher holds two socket ends per rank while it starts them */
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_cur < 4 * RANKS) {
        rl.rlim_cur = rl.rlim_max < 4 * RANKS ? rl.rlim_max : 4 * RANKS;
        CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    }
    if (rl.rlim_cur < 2 * RANKS + 64) {
        fprintf(stderr, "bench_many_ranks_test: needs %d open files, the hard limit is %llu\n", 2 * RANKS + 64,
                (unsigned long long)rl.rlim_max);
        return 1;
    }
    bench_case_t c = {.ranks = RANKS, .transport = "recording", .entries_per_rank = 1, .row_bytes = 8, .tokens = 1,
                      .entries_per_token = 1, .iters = 1, .warmup = 0, .concurrent = true, .seed = 1};
    bench_result_t r;
    memset(&r, 0, sizeof(r));
    CHECK_OK(bench_run_case(&c, &r));
    CHECK(r.status == ENGRAM_OK);
    CHECK(strcmp(r.transport, "recording") == 0);
    printf("bench_many_ranks_test: %d ranks, every result back\n", RANKS);
    return 0;
}
