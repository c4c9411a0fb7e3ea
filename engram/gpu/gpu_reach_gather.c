/* gpu_path = auto: host_gather's side of the probe (design in
 * gpu_reach.h): the table's own pool and jobs (host_gather.h) with CUDA's
 * stream operations, over random rows of each window of a host segment
 * allocated as host_gather's shard is; and the host-to-device reference. */
#include <cuda_runtime_api.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/gpu_host_gather.h"
#include "engram/gpu/gpu_reach.h"
#include "engram/gpu/host_gather.h"
#include "hal/config_keys.h"
#include "hal/log.h"
#include "memory/host_segment.h"

enum {
    ROW = 256,
    ROWS = 1 << 16, /* a fetch: 16 MiB of rows */
    JOBS = 2,       /* fetches in flight */
    ROUNDS = 4,     /* each all JOBS fetches; the first warms up, the fastest of the rest counts */
};

typedef struct gather_probe {
    engram_segment_t *seg; /* the windows */
    uint64_t touched;      /* its bytes written so far (faulted in) */
    engram_gather_pool_t *pool;
    engram_gather_job_t *jobs[JOBS];
    int64_t *indices;      /* pinned [JOBS][ROWS]: the jobs' index lists */
    char *staging;         /* pinned [JOBS][ROWS][ROW] */
    uint32_t *flags;       /* pinned, mapped [JOBS][max_chunks] */
    uint32_t *flags_dev;
    uint32_t *words;       /* pinned, mapped [JOBS][2]: each job's ready and copied words */
    uint32_t *words_dev;
    uint32_t max_chunks;
    uint64_t chunk_bytes;
    cudaStream_t copy[JOBS];
    cudaStream_t stream;   /* the fetches' */
    cudaEvent_t start, stop;
    int64_t *indices_dev;  /* device [JOBS][ROWS]: the fetches' indices */
    char *rows_dev;        /* device [JOBS][ROWS][ROW]: their receive rows */
} gather_probe_t;

static engram_status_t cuda_error(const char *what, cudaError_t ce)
{
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "gpu_path=auto, host_gather's probe: %s: %s", what,
                        cudaGetErrorString(ce));
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static engram_status_t open_probe(gather_probe_t *g, const engram_gpu_probe_want_t *want, uint64_t bytes)
{
    engram_segment_params_t sp = {.size = sizeof(sp), .bytes = bytes, .numa_node = want->numa_node,
                                  .huge = want->huge, .device = -1};
    engram_status_t st = engram_host_segment_ops.alloc(&sp, &g->seg);
    /* the pool as host_gather's table makes it, on the node its shard got */
    const int threads = want->gather_threads == ENGRAM_CONFIG_INT_AUTO
                            ? engram_gather_default_threads(g->seg ? g->seg->numa_node : -1, want->local_ranks)
                            : want->gather_threads;
    if (st == ENGRAM_OK)
        st = engram_gather_pool_create(threads, g->seg->numa_node, &g->pool);
    if (st != ENGRAM_OK)
        return st;
    g->chunk_bytes = want->chunk_bytes;
    g->max_chunks = engram_gather_max_chunks(ROWS, ROW, g->chunk_bytes);
    cudaError_t ce = cudaHostAlloc((void **)&g->indices, (size_t)JOBS * ROWS * sizeof(int64_t), cudaHostAllocDefault);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&g->staging, (size_t)JOBS * ROWS * ROW, cudaHostAllocDefault);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&g->flags, (size_t)JOBS * g->max_chunks * sizeof(uint32_t), cudaHostAllocMapped);
    if (ce == cudaSuccess)
        ce = cudaHostGetDevicePointer((void **)&g->flags_dev, g->flags, 0);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&g->words, (size_t)JOBS * 2 * sizeof(uint32_t), cudaHostAllocMapped);
    if (ce == cudaSuccess)
        ce = cudaHostGetDevicePointer((void **)&g->words_dev, g->words, 0);
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&g->indices_dev, (size_t)JOBS * ROWS * sizeof(int64_t));
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&g->rows_dev, (size_t)JOBS * ROWS * ROW);
    for (int j = 0; ce == cudaSuccess && j < JOBS; j++)
        ce = cudaStreamCreateWithFlags(&g->copy[j], cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        ce = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&g->start);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&g->stop);
    if (ce != cudaSuccess)
        return cuda_error("allocating its buffers", ce);
    memset(g->flags, 0, (size_t)JOBS * g->max_chunks * sizeof(uint32_t));
    memset(g->words, 0, (size_t)JOBS * 2 * sizeof(uint32_t));
    memset(g->staging, 0, (size_t)JOBS * ROWS * ROW);
    return ENGRAM_OK;
}

/* Lets every job still posted pass and leave the pool, drains the
 * streams, then frees all, whatever open_probe got to. */
static void close_probe(gather_probe_t *g)
{
    for (int j = 0; j < JOBS; j++)
        if (g->jobs[j] != NULL && !engram_gather_job_finished(g->jobs[j]))
            engram_gather_job_abandon(g->jobs[j]);
    for (int j = 0; j < JOBS; j++)
        while (g->jobs[j] != NULL && !engram_gather_job_finished(g->jobs[j]))
            sched_yield(); /* an abandoned job ends in a few rows */
    if (g->stream != NULL)
        cudaStreamSynchronize(g->stream);
    for (int j = 0; j < JOBS; j++)
        if (g->copy[j] != NULL)
            cudaStreamSynchronize(g->copy[j]);
    engram_gather_pool_destroy(g->pool);
    for (int j = 0; j < JOBS; j++) {
        engram_gather_job_destroy(g->jobs[j]);
        if (g->copy[j] != NULL)
            cudaStreamDestroy(g->copy[j]);
    }
    if (g->stop != NULL)
        cudaEventDestroy(g->stop);
    if (g->start != NULL)
        cudaEventDestroy(g->start);
    if (g->stream != NULL)
        cudaStreamDestroy(g->stream);
    cudaFree(g->rows_dev);
    cudaFree(g->indices_dev);
    cudaFreeHost(g->words);
    cudaFreeHost(g->flags);
    cudaFreeHost(g->staging);
    cudaFreeHost(g->indices);
    if (g->seg != NULL)
        g->seg->ops->free(g->seg);
}

/* Milliseconds from start to stop once stop is reached. */
static cudaError_t elapsed(gather_probe_t *g, float *ms)
{
    cudaError_t ce = cudaEventSynchronize(g->stop);
    return ce == cudaSuccess ? cudaEventElapsedTime(ms, g->start, g->stop) : ce;
}

/* The jobs over the first `window` bytes, each with its fetch's random
 * rows in GPU memory. */
static engram_status_t window_jobs(gather_probe_t *g, uint64_t window)
{
    /* written before it is read: the pages are faulted in, as a loaded
     * table's are */
    if (window > g->touched) {
        memset((char *)g->seg->addr + g->touched, 0x5a, window - g->touched);
        g->touched = window;
    }
    const uint64_t entries = window / ROW;
    const engram_gather_source_t src = {
        .shape = {.entries_per_rank = entries, .total_entries = entries, .rank_stride = window, .row_stride = ROW,
                  .scaleup = 1, .epr_log2 = engram_route_log2(entries)},
        .span = g->seg->addr,
        .peer_stride = window,
        .local_peers = 1,
        .row_bytes = ROW,
    };
    int64_t *idx = malloc((size_t)ROWS * sizeof(int64_t));
    if (idx == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "gpu_path=auto, host_gather's probe: out of memory for its indices");
    engram_status_t st = ENGRAM_OK;
    for (int j = 0; st == ENGRAM_OK && j < JOBS; j++) {
        for (uint64_t i = 0; i < ROWS; i++)
            idx[i] = (int64_t)(mix(i ^ window ^ ((uint64_t)(j + 1) << 40)) % entries);
        cudaError_t ce = cudaMemcpy(g->indices_dev + (size_t)j * ROWS, idx, (size_t)ROWS * sizeof(int64_t),
                                    cudaMemcpyHostToDevice);
        if (ce == cudaSuccess)
            ce = cudaDeviceSynchronize(); /* from pageable memory the copy may still land after it returns */
        if (ce != cudaSuccess)
            st = cuda_error("copying the indices", ce);
        const engram_gather_buffers_t buf = {
            .indices = g->indices + (size_t)j * ROWS,
            .staging = g->staging + (size_t)j * ROWS * ROW,
            .flags = g->flags + (size_t)j * g->max_chunks,
            .flags_dev = g->flags_dev + (size_t)j * g->max_chunks,
            .ready = g->words + 2 * j,
            .ready_dev = g->words_dev + 2 * j,
            .copied = g->words + 2 * j + 1,
            .copied_dev = g->words_dev + 2 * j + 1,
            .copy_stream = g->copy[j],
            .max_rows = ROWS,
            .max_chunks = g->max_chunks,
        };
        if (st == ENGRAM_OK)
            st = engram_gather_job_create(g->pool, &src, &buf, g->chunk_bytes, &g->jobs[j]);
    }
    free(idx);
    return st;
}

/* One round: every job's fetch queued on the stream, then their joins
 * (as back-to-back fetches with ENGRAM_FETCH_ORDER_AT_WAIT), timed with
 * events; returns once the pool holds no job. */
static engram_status_t round_ms(gather_probe_t *g, float *ms)
{
    const engram_gather_stream_ops_t *ops = &engram_gpu_cuda_stream_ops;
    cudaError_t ce = cudaEventRecord(g->start, g->stream);
    engram_status_t st = ce == cudaSuccess ? ENGRAM_OK : cuda_error("recording an event", ce);
    for (int j = 0; st == ENGRAM_OK && j < JOBS; j++)
        st = engram_gather_job_queue(g->jobs[j], ops, g->stream, g->indices_dev + (size_t)j * ROWS, ROWS, 1, false,
                                     NULL, g->rows_dev + (size_t)j * ROWS * ROW, NULL);
    for (int j = 0; st == ENGRAM_OK && j < JOBS; j++)
        st = engram_gather_job_join(g->jobs[j], ops, g->stream);
    if (st != ENGRAM_OK)
        return st; /* close_probe lets what was queued pass */
    ce = cudaEventRecord(g->stop, g->stream);
    if (ce == cudaSuccess)
        ce = elapsed(g, ms);
    if (ce != cudaSuccess)
        return cuda_error("timing the fetches", ce);
    for (int j = 0; j < JOBS; j++)
        while (!engram_gather_job_finished(g->jobs[j]))
            sched_yield(); /* its bookkeeping after the last flag */
    return ENGRAM_OK;
}

/* GB/s of JOBS fetches' rows: the fastest round after the first. */
static engram_status_t gather_rate(gather_probe_t *g, double *gbps)
{
    float best = 0;
    for (int r = 0; r < ROUNDS; r++) {
        float ms = 0;
        engram_status_t st = round_ms(g, &ms);
        if (st != ENGRAM_OK)
            return st;
        if (r > 0 && ms > 0 && (best == 0 || ms < best))
            best = ms;
    }
    *gbps = best > 0 ? (double)JOBS * ROWS * ROW / best / 1e6 : 0;
    return ENGRAM_OK;
}

/* GB/s of a contiguous pinned host-to-device copy of the same bytes. */
static engram_status_t copy_rate(gather_probe_t *g, double *gbps)
{
    float best = 0;
    for (int r = 0; r < ROUNDS; r++) {
        cudaError_t ce = cudaEventRecord(g->start, g->stream);
        for (int j = 0; ce == cudaSuccess && j < JOBS; j++)
            ce = cudaMemcpyAsync(g->rows_dev + (size_t)j * ROWS * ROW, g->staging + (size_t)j * ROWS * ROW,
                                 (size_t)ROWS * ROW, cudaMemcpyHostToDevice, g->stream);
        if (ce == cudaSuccess)
            ce = cudaEventRecord(g->stop, g->stream);
        float ms = 0;
        if (ce == cudaSuccess)
            ce = elapsed(g, &ms);
        if (ce != cudaSuccess)
            return cuda_error("timing the host-to-device copy", ce);
        if (r > 0 && ms > 0 && (best == 0 || ms < best))
            best = ms;
    }
    *gbps = best > 0 ? (double)JOBS * ROWS * ROW / best / 1e6 : 0;
    return ENGRAM_OK;
}

engram_status_t engram_gpu_probe_gather(const engram_gpu_probe_want_t *want, uint64_t bytes, engram_gpu_probe_t *p)
{
    gather_probe_t g = {0};
    engram_status_t st = open_probe(&g, want, bytes);
    for (int i = 0; st == ENGRAM_OK && i < p->windows; i++) {
        engram_gpu_path_window_t *w = &p->window[i];
        st = window_jobs(&g, w->bytes);
        if (st == ENGRAM_OK)
            st = gather_rate(&g, &w->host_gather_gbps);
        if (st == ENGRAM_OK)
            st = copy_rate(&g, &w->h2d_gbps);
        for (int j = 0; st == ENGRAM_OK && j < JOBS; j++) { /* idle: the next window's take their place */
            engram_gather_job_destroy(g.jobs[j]);
            g.jobs[j] = NULL;
        }
    }
    if (st == ENGRAM_OK)
        p->gather_threads = engram_gather_pool_threads(g.pool);
    close_probe(&g);
    return st;
}
