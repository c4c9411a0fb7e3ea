/* Checks shared by the GPU benches (engram_gpu_bench, nccl_gin_bench):
 * call results, and rows fetched into GPU memory against the reference
 * contents (table_gen_row). */
#ifndef ENGRAM_TOOLS_GPU_CHECK_H
#define ENGRAM_TOOLS_GPU_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Prints "<program>: <what> failed (<rc>): <engram_last_error()>" and exits 1. */
_Noreturn void bench_gpu_fail(const char *what, int rc);

/* A call returning 0 (ENGRAM_OK, cudaSuccess) or else bench_gpu_fail. */
#define CK(expr)                                  \
    do {                                          \
        int rc_ = (int)(expr);                    \
        if (rc_ != 0)                             \
            bench_gpu_fail(#expr, rc_);           \
    } while (0)

/* True when d_rows (device memory, n rows of row_bytes) holds the rows of
 * idx[0..n); false on a difference or a failed copy back. */
bool bench_gpu_rows_match(const int64_t *idx, size_t n, uint32_t row_bytes, const void *d_rows);

#endif
