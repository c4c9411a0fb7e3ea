/* The C side of engram_fetch.py --overhead: the same fetch, wait and
 * release as engram.Buffer's hook, timed in a C loop with no Python in
 * between. engram_fetch.py builds it against the installed library and
 * calls it through ctypes on the buffer's table (Buffer._table._c_table). */
#include <stdint.h>
#include <time.h>

#include <engram/engram.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Means over `iters` rounds (>= 1) into *issue_ns and *wait_ns (wait and
 * release); `cuda`: a recv=cuda table, its fetches on `stream` (a
 * cudaStream_t, NULL the default stream). The first failing status, else
 * ENGRAM_OK. */
int c_fetch_loop(engram_table_t *t, const int64_t *indices, uint32_t tokens, int iters, int cuda, void *stream,
                 double *issue_ns, double *wait_ns)
{
    int64_t issue = 0, wait = 0;
    engram_status_t st = ENGRAM_OK;
    for (int i = 0; i < iters && st == ENGRAM_OK; i++) {
        engram_fetch_t *f;
        int64_t t0 = now_ns();
        st = cuda ? engram_fetch_on_stream(t, indices, tokens, 0, stream, &f)
                            : engram_fetch(t, indices, tokens, 0, &f);
        int64_t t1 = now_ns();
        if (st != ENGRAM_OK)
            break;
        const void *rows;
        st = engram_wait(f, &rows, NULL);
        engram_fetch_release(f);
        issue += t1 - t0;
        wait += now_ns() - t1;
    }
    *issue_ns = (double)issue / iters;
    *wait_ns = (double)wait / iters;
    return st;
}
