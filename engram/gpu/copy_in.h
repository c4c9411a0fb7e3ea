/* A copy from host memory into GPU memory that returns once the bytes are
 * there. From pageable memory cudaMemcpy may return while its DMA still
 * lands, and a kernel on a non-blocking stream is not ordered after it. */
#ifndef ENGRAM_GPU_COPY_IN_H
#define ENGRAM_GPU_COPY_IN_H

#include <cuda_runtime_api.h>

#include "engram/gpu/gpu_sync.h"
#include <stddef.h>

static inline cudaError_t engram_gpu_copy_in(void *dst, const void *src, size_t bytes)
{
    cudaError_t ce = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    return ce == cudaSuccess ? engram_gpu_stream_sync(cudaStreamLegacy) : ce;
}

#endif
