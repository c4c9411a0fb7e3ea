/* Checks rows fetched into GPU memory against the benches' reference
 * contents (bench_fill_row), shared by the GPU benches. */
#ifndef ENGRAM_TOOLS_GPU_ROWS_H
#define ENGRAM_TOOLS_GPU_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when d_rows (device memory, n rows of row_bytes) holds the rows of
 * idx[0..n); false on a difference or a failed copy back. */
bool bench_gpu_rows_match(const int64_t *idx, size_t n, uint32_t row_bytes, const void *d_rows);

#endif
