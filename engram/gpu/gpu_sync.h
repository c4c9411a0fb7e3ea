/* The host waits and queries of the GPU paths, each made with the calling
 * thread's capture mode relaxed: none joins a graph, but while any thread
 * of the process captures a CUDA graph in global mode (torch.cuda.graph's
 * default) CUDA refuses such a call from any other thread as potentially
 * unsafe and invalidates that capture. Relaxed, they run as they would
 * without the capture. No stream being captured may be passed (the call
 * would fail and invalidate the capture whatever the mode). */
#ifndef ENGRAM_GPU_GPU_SYNC_H
#define ENGRAM_GPU_GPU_SYNC_H

#include <cuda_runtime_api.h>

cudaError_t engram_gpu_stream_sync(cudaStream_t stream);
cudaError_t engram_gpu_event_sync(cudaEvent_t event);
cudaError_t engram_gpu_event_query(cudaEvent_t event);
cudaError_t engram_gpu_device_sync(void);

#endif
