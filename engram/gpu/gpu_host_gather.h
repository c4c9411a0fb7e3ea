/* GPU tables on the host_gather path (gpu_path=host_gather; what it can
 * do in fetch_path.h; pool and stream steps in host_gather.h): the shards
 * are host segments (memfd, NUMA-local, 2 MiB pages where the host has
 * them) mapped back to back into every local rank, and each rank's pool
 * gathers its fetches' rows from that span into pinned staging that the
 * copy engine moves onto the GPU receive slot. The fetch kernel never
 * runs: no SM is used. */
#ifndef ENGRAM_GPU_GPU_HOST_GATHER_H
#define ENGRAM_GPU_GPU_HOST_GATHER_H

#include "engram/gpu/gpu_state.h"
#include "engram/gpu/host_gather.h"

/* CUDA's stream operations, for the pool's jobs (gpu_host_gather_stream.c). */
extern const engram_gather_stream_ops_t engram_gpu_cuda_stream_ops;
const char *engram_gpu_cuda_wait_geq(void *stream, const void *flag_dev, uint32_t value);
/* n rows of row_bytes from src (host or GPU memory) into host memory at
 * dst, `stride` bytes apart: the host shards' writes (this path's and the
 * remote path's host mirror). */
engram_status_t engram_gpu_rows_to_host(char *dst, uint64_t stride, const void *src, uint32_t row_bytes, uint64_t n);

#endif
