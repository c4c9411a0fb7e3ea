#include "tools/gpu_bench/gpu_check.h"

#include <cuda_runtime_api.h>
#include <errno.h> /* program_invocation_short_name (_GNU_SOURCE, .bazelrc) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/engram.h"
#include "tests/table_gen.h"

void bench_gpu_fail(const char *what, int rc)
{
    fprintf(stderr, "%s: %s failed (%d): %s\n", program_invocation_short_name, what, rc, engram_last_error());
    exit(1);
}

/* What the row that differs holds, on stderr: another row of the fetch
 * (a misplaced row) or not (stale or torn), and whether it is right once
 * the whole device is idle (it arrived after the wait returned). */
static void report_difference(const int64_t *idx, size_t n, uint32_t row_bytes, const uint8_t *got, size_t i,
                              uint8_t *scratch, const void *d_rows)
{
    table_gen_row((uint64_t)idx[i], row_bytes, scratch);
    uint8_t *late = malloc(row_bytes);
    bool arrived_late = late != NULL && cudaDeviceSynchronize() == cudaSuccess &&
                        cudaMemcpy(late, (const uint8_t *)d_rows + i * row_bytes, row_bytes,
                                   cudaMemcpyDeviceToHost) == cudaSuccess &&
                        memcmp(late, scratch, row_bytes) == 0;
    free(late);
    if (arrived_late)
        fprintf(stderr, "check: row %zu of %zu (index %lld) was right only after a device-wide sync\n", i, n,
                (long long)idx[i]);
    size_t other = n;
    for (size_t k = 0; k < n && other == n; k++) {
        table_gen_row((uint64_t)idx[k], row_bytes, scratch);
        if (memcmp(got + i * row_bytes, scratch, row_bytes) == 0)
            other = k;
    }
    if (other < n)
        fprintf(stderr, "check: row %zu of %zu (index %lld) holds row %zu's (index %lld)\n", i, n, (long long)idx[i],
                other, (long long)idx[other]);
    else
        fprintf(stderr, "check: row %zu of %zu (index %lld) holds no row of the fetch\n", i, n, (long long)idx[i]);
}

bool bench_gpu_rows_match(const int64_t *idx, size_t n, uint32_t row_bytes, const void *d_rows)
{
    uint8_t *got = malloc(n * row_bytes + 1), *want = malloc(row_bytes);
    bool ok = got != NULL && want != NULL &&
              cudaMemcpy(got, d_rows, n * row_bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
    for (size_t i = 0; ok && i < n; i++) {
        table_gen_row((uint64_t)idx[i], row_bytes, want);
        ok = memcmp(got + i * row_bytes, want, row_bytes) == 0;
        if (!ok)
            report_difference(idx, n, row_bytes, got, i, want, d_rows);
    }
    free(got);
    free(want);
    return ok;
}
