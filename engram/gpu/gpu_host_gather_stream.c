/* CUDA's stream operations for the host-gather pool's jobs
 * (engram_gather_stream_ops_t, host_gather.h; design in gpu_host_gather.h). */
#include "engram/gpu/gpu_host_gather.h"
#include "engram/gpu/gpu_sync.h"
#include "engram/gpu/hot_cache.h"
#include "memory/cuda_driver.h"

static const char *cuda_write(void *stream, void *flag_dev, uint32_t value)
{
    CUresult r = engram_cu.cuStreamWriteValue32((CUstream)stream, (CUdeviceptr)(uintptr_t)flag_dev, value,
                                                CU_STREAM_WRITE_VALUE_DEFAULT);
    return r == CUDA_SUCCESS ? NULL : engram_cu_str(r);
}

const char *engram_gpu_cuda_wait_geq(void *stream, const void *flag_dev, uint32_t value)
{
    CUresult r = engram_cu.cuStreamWaitValue32((CUstream)stream, (CUdeviceptr)(uintptr_t)flag_dev, value,
                                               CU_STREAM_WAIT_VALUE_GEQ);
    return r == CUDA_SUCCESS ? NULL : engram_cu_str(r);
}

static const char *cuda_copy(void *stream, void *dst, const void *src, size_t bytes)
{
    cudaError_t ce = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
    return ce == cudaSuccess ? NULL : cudaGetErrorString(ce);
}

/* The cache's kernels run on the table's SMs (gpu_sms: every SM by
 * default) at most, as many blocks as their rows need: short, and many
 * loads in flight hide the index's latency. */
static const char *cuda_probe(void *stream, const void *cache_dev, const int64_t *indices, uint32_t num_rows,
                              uint32_t *slots_dev, uint32_t *hit_mask)
{
    const engram_gpu_hot_t *hot = cache_dev;
    cudaError_t ce = (cudaError_t)engram_gpu_hot_probe_launch(&hot->dev, indices, num_rows, slots_dev, hit_mask,
                                                              hot->blocks, stream);
    return ce == cudaSuccess ? NULL : cudaGetErrorString(ce);
}

static const char *cuda_hits(void *stream, const void *cache_dev, const uint32_t *slots_dev, uint32_t num_rows,
                             uint32_t row_bytes, char *rows_dst)
{
    const engram_gpu_hot_t *hot = cache_dev;
    cudaError_t ce = (cudaError_t)engram_gpu_hot_hits_launch(hot->rows_dev, slots_dev, num_rows, row_bytes, rows_dst,
                                                             hot->blocks, stream);
    return ce == cudaSuccess ? NULL : cudaGetErrorString(ce);
}

/* Pool threads start on no device: each call names the cache's. */
static const char *cuda_bind(const void *cache_dev)
{
    cudaError_t ce = cudaSetDevice(((const engram_gpu_hot_t *)cache_dev)->device);
    return ce == cudaSuccess ? NULL : cudaGetErrorString(ce);
}

static const char *cuda_place(void *stream, const void *cache_dev, const char *staged, const uint32_t *dst_rows,
                              uint32_t count, uint32_t row_bytes, char *rows_dst)
{
    const engram_gpu_hot_t *hot = cache_dev;
    cudaError_t ce = (cudaError_t)engram_gpu_place_launch(staged, dst_rows, count, row_bytes, rows_dst, hot->blocks,
                                                          stream);
    return ce == cudaSuccess ? NULL : cudaGetErrorString(ce);
}

static const char *cuda_drain(void *stream)
{
    cudaError_t ce = engram_gpu_stream_sync((cudaStream_t)stream);
    return ce == cudaSuccess ? NULL : cudaGetErrorString(ce);
}

static const char *cuda_link(void *from, void *to, void *event)
{
    cudaError_t ce = cudaEventRecord((cudaEvent_t)event, (cudaStream_t)from);
    if (ce == cudaSuccess)
        ce = cudaStreamWaitEvent((cudaStream_t)to, (cudaEvent_t)event, 0);
    return ce == cudaSuccess ? NULL : cudaGetErrorString(ce);
}

static const char *cuda_notify(void *stream, void (*fn)(void *), void *arg)
{
    cudaError_t ce = cudaLaunchHostFunc((cudaStream_t)stream, fn, arg);
    return ce == cudaSuccess ? NULL : cudaGetErrorString(ce);
}

const engram_gather_stream_ops_t engram_gpu_cuda_stream_ops = {
    .write = cuda_write,
    .wait_geq = engram_gpu_cuda_wait_geq,
    .copy = cuda_copy,
    .probe = cuda_probe,
    .hits = cuda_hits,
    .bind = cuda_bind,
    .place = cuda_place,
    .drain = cuda_drain,
    .link = cuda_link,
    .notify = cuda_notify,
};
