/* gpu_path = auto: the probe, uva's side and the cache (design in
 * gpu_reach.h; host_gather's side in gpu_reach_gather.c). */
#include "engram/gpu/gpu_reach.h"
#include "engram/gpu/gpu_sync.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/copy_in.h"
#include "engram/gpu/gather.h"
#include "engram/gpu/gpu_sms.h"
#include "engram/plugin/deadline.h"
#include "hal/log.h"

enum {
    PROBE_ROW = 256,
    PROBE_ROWS = 1 << 16, /* 16 MiB of rows per launch */
    MAX_DEVICES = 64,
};

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static engram_gpu_probe_t cache[MAX_DEVICES];
static uint64_t cache_limit[MAX_DEVICES];             /* the size each entry was probed up to; 0: none */
static engram_gpu_probe_want_t cache_want[MAX_DEVICES]; /* host_gather's settings it was probed with */

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

/* uva's rate in windows 64 MiB, 256 MiB, 512 MiB, 1 GiB, ... up to `limit`
 * (the last window), into p->window[]. */
static cudaError_t measure_uva(int device, uint64_t limit, engram_gpu_probe_t *p)
{
    probe_t pr = {0};
    int64_t *host_idx = malloc(PROBE_ROWS * sizeof(int64_t));
    if (host_idx == NULL)
        return cudaErrorMemoryAllocation;
    cudaError_t ce = probe_open(&pr, device, limit);
    for (uint64_t w = ENGRAM_GPU_REACH_MIN_BYTES; ce == cudaSuccess && p->windows < ENGRAM_GPU_PATH_WINDOWS_MAX;
         w = w == ENGRAM_GPU_REACH_MIN_BYTES ? w * 4 : w * 2) {
        if (w > limit)
            w = limit; /* the last window is the size asked for */
        double gbps = 0;
        ce = window_rate(&pr, w, host_idx, &gbps);
        if (ce != cudaSuccess)
            break;
        p->window[p->windows++] = (engram_gpu_path_window_t){.bytes = w, .uva_gbps = gbps};
        if (w == limit)
            break;
    }
    probe_close(&pr);
    free(host_idx);
    return ce;
}

/* The probe's info line: every window's rates, the reach, the time. */
static void log_probe(int device, const engram_gpu_probe_t *p)
{
    char line[1024];
    int n = snprintf(line, sizeof(line), "gpu_path=auto: device %d probed in %.0f ms (host_gather: ", device,
                     p->probe_ms);
    if (p->gather_threads > 0)
        n += snprintf(line + n, sizeof(line) - (size_t)n, "%d pool threads); GB/s of random 256-B rows, uva / "
                      "host_gather / host-to-device copy:", p->gather_threads);
    else
        n += snprintf(line + n, sizeof(line) - (size_t)n, "not measured); GB/s of random 256-B rows, uva:");
    for (int i = 0; i < p->windows && n < (int)sizeof(line); i++) {
        const engram_gpu_path_window_t *w = &p->window[i];
        if (p->gather_threads > 0)
            n += snprintf(line + n, sizeof(line) - (size_t)n, " %llu MiB %.1f / %.1f / %.1f;",
                          (unsigned long long)(w->bytes >> 20), w->uva_gbps, w->host_gather_gbps, w->h2d_gbps);
        else
            n += snprintf(line + n, sizeof(line) - (size_t)n, " %llu MiB %.1f;", (unsigned long long)(w->bytes >> 20),
                          w->uva_gbps);
    }
    uint64_t past = p->probed_bytes; /* the first window that did not hold, if one did not */
    for (int i = p->windows - 1; i >= 0 && p->window[i].bytes > p->reach_bytes; i--)
        past = p->window[i].bytes;
    const bool fell = p->reach_bytes < p->probed_bytes;
    ENGRAM_INFO("%s uva's reach into host memory %llu MiB (%s %llu MiB: %.2f of the first window's rate)", line,
                (unsigned long long)(p->reach_bytes >> 20), fell ? "fell off at" : "held up to",
                (unsigned long long)(past >> 20), fell ? p->share_past : 1.0);
}

/* Both paths' rates up to `limit`: uva's (an error where they cannot be
 * had), then host_gather's (a failure logged, its rates left 0). */
static cudaError_t measure(int device, const engram_gpu_probe_want_t *want, uint64_t limit, engram_gpu_probe_t *p)
{
    const uint64_t t0 = engram_now_ns();
    *p = (engram_gpu_probe_t){0};
    cudaError_t ce = measure_uva(device, limit, p);
    if (ce != cudaSuccess)
        return ce;
    if (engram_gpu_probe_gather(want, limit, p) != ENGRAM_OK) {
        ENGRAM_WARN("gpu_path=auto: host_gather's probe failed (%s); the GPU's reach into host memory alone decides",
                    engram_last_error());
        for (int i = 0; i < p->windows; i++)
            p->window[i].host_gather_gbps = p->window[i].h2d_gbps = 0;
        p->gather_threads = 0;
    }
    engram_gpu_probe_reach(p);
    p->probe_ms = (double)(engram_now_ns() - t0) / 1e6;
    return cudaSuccess;
}

static bool same_want(const engram_gpu_probe_want_t *a, const engram_gpu_probe_want_t *b)
{
    return a->gather_threads == b->gather_threads && a->local_ranks == b->local_ranks &&
           a->numa_node == b->numa_node && a->huge == b->huge && a->chunk_bytes == b->chunk_bytes;
}

engram_status_t engram_gpu_reach_measure(int device, const engram_gpu_probe_want_t *want, engram_gpu_probe_t *out)
{
    if (device < 0 || device >= MAX_DEVICES)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "gpu_path=auto: device %d outside 0..%d", device, MAX_DEVICES - 1);
    uint64_t limit = want->bytes < ENGRAM_GPU_REACH_MAX_BYTES ? want->bytes : ENGRAM_GPU_REACH_MAX_BYTES;
    if (limit < ENGRAM_GPU_REACH_MIN_BYTES)
        limit = ENGRAM_GPU_REACH_MIN_BYTES;
    pthread_mutex_lock(&cache_mu);
    engram_gpu_probe_t *c = &cache[device];
    /* past a window uva did not hold, larger windows are compared at the
     * largest one probed (path_choice.h): no need to probe them */
    const bool known = cache_limit[device] > 0 && same_want(&cache_want[device], want) &&
                       (cache_limit[device] >= limit || c->reach_bytes < c->probed_bytes);
    cudaError_t ce = known ? cudaSuccess : measure(device, want, limit, c);
    engram_gpu_probe_t r = *c;
    if (!known) {
        cache_limit[device] = ce == cudaSuccess ? limit : 0;
        cache_want[device] = *want;
    }
    pthread_mutex_unlock(&cache_mu);
    if (ce != cudaSuccess)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "gpu_path=auto: probing the GPU's reach into host memory: %s",
                            cudaGetErrorString(ce));
    if (!known)
        log_probe(device, &r);
    *out = r;
    return ENGRAM_OK;
}
