/* Test helper (delayed_copy.cu): copies n indices on `stream` after
 * spinning delay_cycles, having let dependent launches start first.
 * Returns the launch's cudaError_t. */
#ifndef ENGRAM_GPU_DELAYED_COPY_H
#define ENGRAM_GPU_DELAYED_COPY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int engram_test_delayed_copy_launch(int64_t *dst, const int64_t *src, uint32_t n, long long delay_cycles,
                                    void *stream);

#ifdef __cplusplus
}
#endif
#endif
