// Test helper for gather_order_test: a producer kernel that lets dependent
// launches start at once (griddepcontrol.launch_dependents, as a PDL-aware
// kernel of the caller may) and only writes its output after a delay. A
// fetch launched right behind it sees the new indices only if it waits for
// its predecessor before reading.
#include <cuda_runtime.h>

#include "engram/gpu/delayed_copy.h"

namespace {

__global__ void delayed_copy(int64_t *dst, const int64_t *src, uint32_t n, long long delay_cycles)
{
    asm volatile("griddepcontrol.launch_dependents;");
    const long long start = clock64();
    while (clock64() - start < delay_cycles) {
    }
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] = src[i];
}

}  // namespace

extern "C" int engram_test_delayed_copy_launch(int64_t *dst, const int64_t *src, uint32_t n, long long delay_cycles,
                                               void *stream)
{
    delayed_copy<<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(dst, src, n, delay_cycles);
    return cudaGetLastError();
}
