/* gpu_path = auto: the reach probe (design in gpu_reach.h). */
#include "engram/gpu/gpu_reach.h"
#include "engram/gpu/gpu_sync.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>

#include "engram/gpu/copy_in.h"
#include "engram/gpu/gather.h"
#include "engram/gpu/gpu_sms.h"
#include "hal/log.h"

enum {
    PROBE_ROW = 256,
    PROBE_ROWS = 1 << 16, /* 16 MiB of rows per launch */
    MAX_DEVICES = 64,
};

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static engram_gpu_reach_t cache[MAX_DEVICES];
static uint64_t cache_limit[MAX_DEVICES]; /* the size each entry was probed up to */

typedef struct probe {
    char *host;           /* pinned, mapped: the windows */
    const char *host_dev;
    int64_t *indices;     /* device [PROBE_ROWS] */
    char *rows;           /* device [PROBE_ROWS][PROBE_ROW] */
    engram_gpu_bad_t *bad;
    cudaStream_t stream;
    cudaEvent_t start, stop;
    int sms;
} probe_t;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* GB/s of row bytes gathered from random rows of the first `window` bytes. */
static cudaError_t window_rate(probe_t *p, uint64_t window, int64_t *host_idx, double *gbps)
{
    const uint64_t entries = window / PROBE_ROW;
    for (uint64_t i = 0; i < PROBE_ROWS; i++)
        host_idx[i] = (int64_t)(mix(i ^ window) % entries);
    cudaError_t ce = engram_gpu_copy_in(p->indices, host_idx, PROBE_ROWS * sizeof(int64_t));
    engram_gpu_gather_args_t a = {
        .shape = {.entries_per_rank = entries, .total_entries = entries, .rank_stride = window,
                  .row_stride = PROBE_ROW, .scaleup = 1, .epr_log2 = engram_route_log2(entries)},
        .indices = p->indices,
        .span = p->host_dev,
        .peer_stride = window,
        .local_peers = 1,
        .rows = p->rows,
        .row_bytes = PROBE_ROW,
        .num_rows = PROBE_ROWS,
        .entries_per_token = 1,
        .num_tokens = PROBE_ROWS,
        .bad = p->bad,
        .speculate = 1,
    };
    double rows_per_ms = 0;
    if (ce == cudaSuccess)
        ce = engram_gpu_gather_rate(&a, p->sms, p->stream, p->start, p->stop, &rows_per_ms);
    *gbps = rows_per_ms * PROBE_ROW / 1e6;
    return ce;
}

static cudaError_t probe_open(probe_t *p, int device, uint64_t bytes)
{
    cudaError_t ce = cudaDeviceGetAttribute(&p->sms, cudaDevAttrMultiProcessorCount, device);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&p->host, bytes, cudaHostAllocMapped);
    if (ce == cudaSuccess)
        ce = cudaHostGetDevicePointer((void **)&p->host_dev, p->host, 0);
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&p->indices, PROBE_ROWS * sizeof(int64_t));
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&p->rows, (size_t)PROBE_ROWS * PROBE_ROW);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&p->bad, (size_t)p->sms * sizeof(*p->bad), cudaHostAllocMapped);
    if (ce == cudaSuccess)
        ce = cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&p->start);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&p->stop);
    return ce;
}

static void probe_close(probe_t *p)
{
    if (p->stream != NULL)
        engram_gpu_stream_sync(p->stream);
    if (p->stop != NULL)
        cudaEventDestroy(p->stop);
    if (p->start != NULL)
        cudaEventDestroy(p->start);
    if (p->stream != NULL)
        cudaStreamDestroy(p->stream);
    cudaFreeHost(p->bad);
    cudaFree(p->rows);
    cudaFree(p->indices);
    cudaFreeHost(p->host);
}

static cudaError_t measure(int device, uint64_t limit, engram_gpu_reach_t *r)
{
    probe_t p = {0};
    int64_t *host_idx = malloc(PROBE_ROWS * sizeof(int64_t));
    if (host_idx == NULL)
        return cudaErrorMemoryAllocation;
    cudaError_t ce = probe_open(&p, device, limit);
    *r = (engram_gpu_reach_t){0};
    double first = 0;
    for (uint64_t w = ENGRAM_GPU_REACH_MIN_BYTES; ce == cudaSuccess;
         w = w == ENGRAM_GPU_REACH_MIN_BYTES ? w * 4 : w * 2) {
        if (w > limit)
            w = limit; /* the last window is the size asked for */
        double gbps = 0;
        ce = window_rate(&p, w, host_idx, &gbps);
        if (ce != cudaSuccess)
            break;
        r->probed_bytes = w;
        if (first == 0) {
            first = r->gbps_first = gbps;
        } else if (gbps < ENGRAM_GPU_REACH_SHARE * first) {
            r->share_past = first > 0 ? gbps / first : 0;
            break;
        }
        r->reach_bytes = w;
        if (w == limit)
            break;
    }
    probe_close(&p);
    free(host_idx);
    return ce;
}

engram_status_t engram_gpu_reach_measure(int device, uint64_t want_bytes, engram_gpu_reach_t *out)
{
    if (device < 0 || device >= MAX_DEVICES)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "gpu_path=auto: device %d outside 0..%d", device, MAX_DEVICES - 1);
    uint64_t limit = want_bytes < ENGRAM_GPU_REACH_MAX_BYTES ? want_bytes : ENGRAM_GPU_REACH_MAX_BYTES;
    if (limit < ENGRAM_GPU_REACH_MIN_BYTES)
        limit = ENGRAM_GPU_REACH_MIN_BYTES;
    pthread_mutex_lock(&cache_mu);
    engram_gpu_reach_t *c = &cache[device];
    /* a window that did not hold ends the probe: larger ones cannot */
    bool known = cache_limit[device] >= limit || (cache_limit[device] > 0 && c->share_past > 0);
    cudaError_t ce = known ? cudaSuccess : measure(device, limit, c);
    engram_gpu_reach_t r = *c;
    cache_limit[device] = ce == cudaSuccess ? (known ? cache_limit[device] : limit) : 0;
    pthread_mutex_unlock(&cache_mu);
    if (ce != cudaSuccess)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "gpu_path=auto: probing the GPU's reach into host memory: %s",
                            cudaGetErrorString(ce));
    if (!known)
        ENGRAM_INFO("gpu_path=auto: device %d reads random 256-B host rows at %.1f GB/s within 64 MiB; its reach "
                    "into host memory is %llu MiB (%s %llu MiB: %.2f of that rate)",
                    device, r.gbps_first, (unsigned long long)(r.reach_bytes >> 20),
                    r.share_past > 0 ? "fell off at" : "held up to", (unsigned long long)(r.probed_bytes >> 20),
                    r.share_past > 0 ? r.share_past : 1.0);
    *out = r;
    return ENGRAM_OK;
}
