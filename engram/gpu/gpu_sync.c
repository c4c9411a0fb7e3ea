/* Host waits with the capture mode relaxed (gpu_sync.h). */
#include "engram/gpu/gpu_sync.h"

/* The thread's mode is exchanged for relaxed around the call, then put
 * back: a caller capturing in another mode on this thread keeps it. */
#define RELAXED(call)                                                          \
    do {                                                                       \
        enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;        \
        (void)cudaThreadExchangeStreamCaptureMode(&mode);                      \
        cudaError_t ce_ = (call);                                              \
        (void)cudaThreadExchangeStreamCaptureMode(&mode);                      \
        return ce_;                                                            \
    } while (0)

cudaError_t engram_gpu_stream_sync(cudaStream_t stream)
{
    RELAXED(cudaStreamSynchronize(stream));
}

cudaError_t engram_gpu_event_sync(cudaEvent_t event)
{
    RELAXED(cudaEventSynchronize(event));
}

cudaError_t engram_gpu_event_query(cudaEvent_t event)
{
    RELAXED(cudaEventQuery(event));
}

cudaError_t engram_gpu_device_sync(void)
{
    RELAXED(cudaDeviceSynchronize());
}
