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

bool bench_gpu_rows_match(const int64_t *idx, size_t n, uint32_t row_bytes, const void *d_rows)
{
    uint8_t *got = malloc(n * row_bytes + 1), *want = malloc(row_bytes);
    bool ok = got != NULL && want != NULL &&
              cudaMemcpy(got, d_rows, n * row_bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
    for (size_t i = 0; ok && i < n; i++) {
        table_gen_row((uint64_t)idx[i], row_bytes, want);
        ok = memcmp(got + i * row_bytes, want, row_bytes) == 0;
    }
    free(got);
    free(want);
    return ok;
}
