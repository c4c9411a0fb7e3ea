/* CUDA segments through the driver's virtual memory API (cuMemCreate):
 * ENGRAM_MEM_CUDA_DEVICE (GPU memory) and ENGRAM_MEM_CUDA_HOST_NUMA (pinned
 * host memory on the GPU's NUMA node, also mapped for the CPU). Exported as
 * POSIX fds; an import maps the allocation with access for every local GPU
 * that can reach it. params.device = -1 means the calling thread's current
 * device; for HOST_NUMA, params.numa_node = -1 means the GPU's node.
 *
 * import_fd's fixed_addr must lie in a range from engram_cuda_reserve, and
 * parts placed there must be multiples of engram_cuda_granularity. */
#ifndef ENGRAM_MEMORY_CUDA_SEGMENT_H
#define ENGRAM_MEMORY_CUDA_SEGMENT_H

#include "engram/plugin/segment.h"

extern const engram_segment_ops_t engram_cuda_device_segment_ops;
extern const engram_segment_ops_t engram_cuda_host_numa_segment_ops;

/* Allocation granularity common to both kinds on `device` (-1: current). */
engram_status_t engram_cuda_granularity(int device, size_t *out);
/* A virtual range (no memory behind it) for back-to-back imports. */
engram_status_t engram_cuda_reserve(size_t bytes, void **out);
void engram_cuda_unreserve(void *addr, size_t bytes);

#endif
