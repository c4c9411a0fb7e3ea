/* gpu_sms = auto: time the gather kernel at a few SM budgets (design in
 * gpu_sms.h). */
#include "engram/plugin/deadline.h"
#include "engram/gpu/gpu_sync.h"
#include "engram/gpu/gpu_sms.h"

#include <stdlib.h>
#include <time.h>

#include "engram/gpu/copy_in.h"
#include "hal/log.h"

enum {
    CAL_MAX_ROWS = 1 << 16, /* a fetch of 512 x 24 is 12288 rows */
    CAL_WARMUP = 2,
    CAL_REPS = 5,   /* launches per timing */
    CAL_ROUNDS = 3, /* timings per budget; the fastest counts */
    CAL_BOUND_MS = 500,
};

typedef struct calib {
    engram_gpu_gather_args_t args;
    cudaStream_t stream;
    cudaEvent_t start, stop;
} calib_t;

static double now_ms(void)
{
    return (double)engram_now_ns() / 1e6;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

cudaError_t engram_gpu_gather_rate(const engram_gpu_gather_args_t *a, int blocks, cudaStream_t stream,
                                   cudaEvent_t start, cudaEvent_t stop, double *rate)
{
    double best = 0;
    for (int round = 0; round < CAL_ROUNDS; round++) {
        cudaError_t ce = cudaSuccess;
        for (int i = 0; ce == cudaSuccess && i < CAL_WARMUP; i++)
            ce = (cudaError_t)engram_gpu_gather_launch(a, blocks, stream);
        if (ce == cudaSuccess)
            ce = cudaEventRecord(start, stream);
        for (int i = 0; ce == cudaSuccess && i < CAL_REPS; i++)
            ce = (cudaError_t)engram_gpu_gather_launch(a, blocks, stream);
        if (ce == cudaSuccess)
            ce = cudaEventRecord(stop, stream);
        if (ce == cudaSuccess)
            ce = engram_gpu_event_sync(stop);
        float ms = 0;
        if (ce == cudaSuccess)
            ce = cudaEventElapsedTime(&ms, start, stop);
        if (ce != cudaSuccess)
            return ce;
        double r = ms > 0 ? (double)a->num_rows * CAL_REPS / ms : 0;
        if (r > best)
            best = r;
    }
    *rate = best;
    return cudaSuccess;
}

static cudaError_t rate_at(calib_t *c, int blocks, double *rate)
{
    return engram_gpu_gather_rate(&c->args, blocks, c->stream, c->start, c->stop, rate);
}

/* The next budget to try after b: 1, 2, 3, 4, 6, 8, 12, 16, 24, ... */
static int next_budget(int b)
{
    if (b < 4)
        return b + 1;
    return (b & (b - 1)) == 0 ? b + b / 2 : (b / 3) * 4;
}

static cudaError_t search(calib_t *c, int sms, int *blocks, double *share, double *all_rate, bool *bounded)
{
    double t0 = now_ms(), rate = 0;
    cudaError_t ce = rate_at(c, sms, all_rate);
    *blocks = sms;
    *share = 1.0;
    *bounded = false;
    for (int b = 1; ce == cudaSuccess && b < sms; b = next_budget(b)) {
        if (now_ms() - t0 > CAL_BOUND_MS) {
            *bounded = true;
            break;
        }
        ce = rate_at(c, b, &rate);
        if (ce == cudaSuccess && rate >= ENGRAM_GPU_SMS_SHARE * *all_rate) {
            *blocks = b;
            *share = rate / *all_rate;
            break;
        }
    }
    return ce;
}

engram_status_t engram_gpu_sms_calibrate(engram_table_t *t, engram_gpu_table_t *g, const char *span, int sms)
{
    const engram_table_params_t *p = &t->params;
    const engram_route_shape_t *s = &t->shape;
    g->blocks = sms;
    uint64_t rows = (uint64_t)p->max_tokens * p->entries_per_token;
    if (rows > CAL_MAX_ROWS)
        rows = CAL_MAX_ROWS;
    /* the entries of the span's routed peers: ranks, or a node's ranks */
    uint64_t per_peer = s->entries_per_rank * (s->hybrid ? s->scaleup : 1);
    uint64_t first = (uint64_t)g->first_peer * per_peer, count = (uint64_t)g->local_peers * per_peer;
    if (rows == 0 || count == 0)
        return ENGRAM_OK;
    int64_t *host = malloc(rows * sizeof(*host));
    if (host == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "gpu_sms=auto: out of memory for %llu calibration indices",
                            (unsigned long long)rows);
    for (uint64_t i = 0; i < rows; i++)
        host[i] = (int64_t)(first + splitmix64(i) % count);
    calib_t c = {.args = {
                     .shape = *s,
                     .span = span,
                     .peer_stride = g->peer_stride,
                     .first_peer = g->first_peer,
                     .local_peers = g->local_peers,
                     .rows = g->recv, /* slot 0, not in use before the table is returned */
                     .row_bytes = p->row_bytes,
                     .num_rows = (uint32_t)rows,
                     .entries_per_token = p->entries_per_token,
                     .num_tokens = (uint32_t)(rows / p->entries_per_token),
                     .bad = engram_gpu_report(g, ENGRAM_RELEASED_NO_REPORT),
                     .speculate = 1, /* as fetches outside graph capture */
                 }};
    int64_t *dev = NULL;
    cudaError_t ce = cudaMalloc((void **)&dev, rows * sizeof(*dev));
    if (ce == cudaSuccess)
        ce = engram_gpu_copy_in(dev, host, rows * sizeof(*dev));
    free(host);
    c.args.indices = dev;
    bool have_stream = false, have_start = false, have_stop = false;
    if (ce == cudaSuccess)
        have_stream = (ce = cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking)) == cudaSuccess;
    if (ce == cudaSuccess)
        have_start = (ce = cudaEventCreate(&c.start)) == cudaSuccess;
    if (ce == cudaSuccess)
        have_stop = (ce = cudaEventCreate(&c.stop)) == cudaSuccess;
    double t0 = now_ms(), share = 1, all_rate = 0;
    int blocks = sms;
    bool bounded = false;
    if (ce == cudaSuccess)
        ce = search(&c, sms, &blocks, &share, &all_rate, &bounded);
    if (have_stream)
        engram_gpu_stream_sync(c.stream);
    if (have_stop)
        cudaEventDestroy(c.stop);
    if (have_start)
        cudaEventDestroy(c.start);
    if (have_stream)
        cudaStreamDestroy(c.stream);
    cudaFree(dev);
    if (ce != cudaSuccess)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "gpu_sms=auto: calibrating the fetch kernel: %s",
                            cudaGetErrorString(ce));
    g->blocks = blocks;
    ENGRAM_INFO("gpu_sms=auto: %d of %d SMs reach %.2f of the all-SM rate (%.1f Mrows/s at all SMs; %llu rows of "
                "%u B from this node's shards, calibrated in %.0f ms%s)",
                blocks, sms, share, all_rate / 1e3, (unsigned long long)rows, p->row_bytes, now_ms() - t0,
                bounded ? "; stopped at the time bound, every SM kept" : "");
    return ENGRAM_OK;
}
