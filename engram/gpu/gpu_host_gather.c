/* The host_gather path (fetch_path.h; design in gpu_host_gather.h and
 * host_gather.h): the table's host span, pool and per-slot pinned buffers,
 * and each fetch's job (CUDA's stream operations in
 * gpu_host_gather_stream.c). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/gpu_host_gather.h"
#include "engram/gpu/gpu_sync.h"
#include "engram/gpu/host_gather.h"
#include "engram/gpu/hot_cache.h"
#include "hal/log.h"
#include "memory/host_segment.h"
#include "engram/plugin/segment.h"

typedef struct engram_gpu_host {
    engram_segment_span_t span;     /* the node's shards, back to back */
    engram_gather_source_t src;     /* where the jobs (and the cache's loads) find rows in it */
    engram_gather_pool_t *pool;
    engram_gather_job_t **jobs;     /* [slots] */
    int64_t *indices;               /* pinned [slots][slot_rows] */
    char *staging;                  /* pinned [slots][slot_row_bytes] */
    uint32_t *scales_stage;         /* pinned [slots][slot_scale_elems]; NULL without scales */
    uint32_t *flags;                /* pinned, mapped [slots][max_chunks] */
    const uint32_t *flags_dev;
    uint32_t *dst_rows;             /* pinned [slots][slot_rows]: a staged miss's receive row */
    uint32_t *hit_mask;             /* pinned, mapped [slots][mask_words]: the cache probe's hit bits */
    int64_t *indices_dev;           /* GPU [slots][slot_rows]: the indices the cache's probe reads */
    uint32_t *hit_slots;            /* GPU [slots][slot_rows]: the cache probe's slots */
    char *stage_dev;                /* GPU [slots][slot_row_bytes]: a chunk's misses, moved */
    uint32_t *dst_dev;              /* GPU [slots][slot_rows]: their receive rows, moved */
    uint64_t mask_words;
    uint32_t *ready;                /* pinned, mapped [slots]: each job's ready word */
    uint32_t *ready_dev;
    uint32_t *copied;               /* pinned, mapped [slots]: each job's copied word */
    uint32_t *copied_dev;
    cudaStream_t *copy_streams;     /* [slots]: each job's copy stream */
    cudaEvent_t *forks, *joins;     /* [slots]: a captured fetch's copy stream forked and joined */
    uint32_t max_chunks;
    uint32_t *scales;               /* the replicated scales, host copy */
} engram_gpu_host_t;

static engram_status_t cuda_error(const char *what, cudaError_t ce)
{
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "GPU table, host_gather: %s: %s", what, cudaGetErrorString(ce));
}

/* The host NUMA node the shard goes to: numa_node when set, else the
 * GPU's (the copy engine reads it), else the calling thread's. */
static int shard_node(const engram_context_t *ctx, int device)
{
    int node = -1;
    if (ctx->cfg.numa_node >= 0)
        return (int)ctx->cfg.numa_node;
    if (cudaDeviceGetAttribute(&node, cudaDevAttrHostNumaId, device) != cudaSuccess || node < 0)
        return -1;
    return node;
}

/* The shard as a host segment (before the table's shape is filled). */
static engram_status_t hg_alloc_shard(engram_table_t *t, engram_gpu_table_t *g)
{
    const engram_context_t *ctx = t->ctx;
    engram_segment_params_t sp = {.size = sizeof(sp), .bytes = t->sizes.shard_bytes,
                                  .numa_node = shard_node(ctx, g->device), .huge = ctx->cfg.huge_pages, .device = -1};
    engram_status_t st = engram_host_segment_ops.alloc(&sp, &t->shard);
    if (st == ENGRAM_OK)
        ENGRAM_INFO("GPU table, host_gather: shard of %zu bytes on NUMA node %d, %s pages", t->shard->size,
                    t->shard->numa_node, t->shard->huge_pages ? "2 MiB huge" : "normal");
    return st;
}

static engram_status_t alloc_pinned(engram_table_t *t, engram_gpu_host_t *h)
{
    const engram_table_sizes_t *z = &t->sizes;
    const uint64_t slots = (uint64_t)t->num_slots;
    h->max_chunks = engram_gather_max_chunks(z->slot_rows, t->params.row_bytes,
                                             (uint64_t)t->ctx->cfg.gather_chunk_kib * 1024);
    cudaError_t ce = cudaHostAlloc((void **)&h->indices, slots * z->slot_rows * sizeof(*h->indices),
                                   cudaHostAllocDefault);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&h->staging, slots * z->slot_row_bytes, cudaHostAllocDefault);
    if (ce == cudaSuccess && z->slot_scale_elems > 0)
        ce = cudaHostAlloc((void **)&h->scales_stage, slots * z->slot_scale_elems * sizeof(uint32_t),
                           cudaHostAllocDefault);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&h->flags, slots * h->max_chunks * sizeof(*h->flags), cudaHostAllocMapped);
    if (ce == cudaSuccess)
        ce = cudaHostGetDevicePointer((void **)&h->flags_dev, h->flags, 0);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&h->dst_rows, slots * z->slot_rows * sizeof(*h->dst_rows), cudaHostAllocMapped);
    h->mask_words = (z->slot_rows + 31) / 32;
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&h->hit_mask, slots * h->mask_words * sizeof(*h->hit_mask), cudaHostAllocMapped);
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&h->indices_dev, slots * z->slot_rows * sizeof(*h->indices_dev));
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&h->hit_slots, slots * z->slot_rows * sizeof(*h->hit_slots));
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&h->stage_dev, slots * z->slot_row_bytes);
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&h->dst_dev, slots * z->slot_rows * sizeof(*h->dst_dev));
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&h->ready, slots * sizeof(*h->ready), cudaHostAllocMapped);
    if (ce == cudaSuccess)
        ce = cudaHostGetDevicePointer((void **)&h->ready_dev, h->ready, 0);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&h->copied, slots * sizeof(*h->copied), cudaHostAllocMapped);
    if (ce == cudaSuccess)
        ce = cudaHostGetDevicePointer((void **)&h->copied_dev, h->copied, 0);
    if (ce != cudaSuccess)
        return cuda_error("allocating the pinned staging", ce);
    if (h->scales_stage != NULL) /* column-major padding is never written: zero, not stale */
        memset(h->scales_stage, 0, slots * z->slot_scale_elems * sizeof(uint32_t));
    memset(h->flags, 0, slots * h->max_chunks * sizeof(*h->flags));
    memset(h->ready, 0, slots * sizeof(*h->ready));
    memset(h->copied, 0, slots * sizeof(*h->copied)); /* a job's seq starts as its words */
    if (z->scales_bytes > 0 && (h->scales = malloc(z->scales_bytes)) == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table, host_gather: out of memory for %llu bytes of scales",
                            (unsigned long long)z->scales_bytes);
    return ENGRAM_OK;
}

/* Stream memory operations on host-mapped flags are what the path rests
 * on: one wait on a flag that is already set tells whether the driver
 * takes them. */
static engram_status_t check_stream_waits(engram_gpu_host_t *h)
{
    cudaStream_t s;
    cudaError_t ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (ce != cudaSuccess)
        return cuda_error("creating a stream", ce);
    const char *err = engram_gpu_cuda_wait_geq(s, h->flags_dev, 0);
    ce = engram_gpu_stream_sync(s);
    cudaStreamDestroy(s);
    if (err != NULL || ce != cudaSuccess)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "GPU table, host_gather: the driver refuses a stream wait on host-mapped memory (%s); "
                            "set gpu_path=uva",
                            err != NULL ? err : cudaGetErrorString(ce));
    return ENGRAM_OK;
}

static engram_status_t make_jobs(engram_table_t *t, const engram_gpu_table_t *g, engram_gpu_host_t *h)
{
    const engram_table_sizes_t *z = &t->sizes;
    int local = engram_group_local_size(t->ctx->group);
    h->src = (engram_gather_source_t){
        .shape = t->shape,
        .span = h->span.base,
        .peer_stride = g->peer_stride,
        .first_peer = g->first_peer,
        .local_peers = g->local_peers,
        .other_peers = engram_group_local_size(t->ctx->group) != engram_group_size(t->ctx->group),
        .row_bytes = t->params.row_bytes,
        .scales = h->scales,
        .packs = t->params.scale_packs,
    };
    int threads = t->ctx->cfg.gather_threads == ENGRAM_CONFIG_INT_AUTO
                      ? engram_gather_default_threads(t->shard->numa_node, local)
                      : (int)t->ctx->cfg.gather_threads;
    engram_status_t st = engram_gather_pool_create(threads, t->shard->numa_node, &h->pool);
    h->jobs = st == ENGRAM_OK ? calloc((size_t)t->num_slots, sizeof(*h->jobs)) : NULL;
    h->copy_streams = st == ENGRAM_OK ? calloc((size_t)t->num_slots, sizeof(*h->copy_streams)) : NULL;
    h->forks = st == ENGRAM_OK ? calloc((size_t)t->num_slots, sizeof(*h->forks)) : NULL;
    h->joins = st == ENGRAM_OK ? calloc((size_t)t->num_slots, sizeof(*h->joins)) : NULL;
    if (st == ENGRAM_OK && (h->jobs == NULL || h->copy_streams == NULL || h->forks == NULL || h->joins == NULL))
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table, host_gather: out of memory for %d jobs", t->num_slots);
    if (st == ENGRAM_OK)
        st = engram_gather_pool_set_wake(h->pool, t->ctx->cfg.gather_watch_us * 1000,
                                         t->ctx->cfg.gather_wake == ENGRAM_GATHER_WAKE_HOST_NODE);
    for (int s = 0; st == ENGRAM_OK && s < t->num_slots; s++) {
        cudaError_t ce = cudaStreamCreateWithFlags(&h->copy_streams[s], cudaStreamNonBlocking);
        if (ce != cudaSuccess) {
            h->copy_streams[s] = NULL;
            st = cuda_error("creating a slot's copy stream", ce);
        }
        if (st == ENGRAM_OK && (ce = cudaEventCreateWithFlags(&h->forks[s], cudaEventDisableTiming)) != cudaSuccess) {
            h->forks[s] = NULL;
            st = cuda_error("creating a slot's events", ce);
        }
        if (st == ENGRAM_OK && (ce = cudaEventCreateWithFlags(&h->joins[s], cudaEventDisableTiming)) != cudaSuccess) {
            h->joins[s] = NULL;
            st = cuda_error("creating a slot's events", ce);
        }
    }
    for (int s = 0; st == ENGRAM_OK && s < t->num_slots; s++) {
        engram_gather_buffers_t buf = {
            .indices = h->indices + (uint64_t)s * z->slot_rows,
            .staging = h->staging + (uint64_t)s * z->slot_row_bytes,
            .scales = h->scales_stage ? h->scales_stage + (uint64_t)s * z->slot_scale_elems : NULL,
            .flags = h->flags + (uint64_t)s * h->max_chunks,
            .flags_dev = h->flags_dev + (uint64_t)s * h->max_chunks,
            .dst_rows = h->dst_rows + (uint64_t)s * z->slot_rows,
            .hit_mask = h->hit_mask + (uint64_t)s * h->mask_words,
            .indices_dev = h->indices_dev + (uint64_t)s * z->slot_rows,
            .hit_slots = h->hit_slots + (uint64_t)s * z->slot_rows,
            .stage_dev = h->stage_dev + (uint64_t)s * z->slot_row_bytes,
            .dst_dev = h->dst_dev + (uint64_t)s * z->slot_rows,
            .ready = h->ready + s,
            .ready_dev = h->ready_dev + s,
            .copied = h->copied + s,
            .copied_dev = h->copied_dev + s,
            .copy_stream = h->copy_streams[s],
            .fork_event = h->forks[s],
            .join_event = h->joins[s],
            .max_rows = z->slot_rows,
            .max_chunks = h->max_chunks,
        };
        st = engram_gather_job_create(h->pool, &h->src, &buf, (uint64_t)t->ctx->cfg.gather_chunk_kib * 1024,
                                      &h->jobs[s]);
    }
    if (st == ENGRAM_OK)
        ENGRAM_INFO("GPU table, host_gather: %d pool threads, chunks of %lld KiB", threads,
                    (long long)t->ctx->cfg.gather_chunk_kib);
    return st;
}

/* Collective (the status is agreed): the node span, the pool, each slot's
 * staging and job. It runs no gather kernel, so gpu_sms=auto times
 * nothing: its cache's short kernels take every SM. */
static engram_status_t hg_create(engram_table_t *t, engram_gpu_table_t *g, void **state)
{
    engram_context_t *ctx = t->ctx;
    engram_gpu_host_t *h = calloc(1, sizeof(*h));
    *state = h;
    engram_status_t st = h ? ENGRAM_OK : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table, host_gather: out of memory");
    st = engram_group_agree(ctx->group, st);
    if (st == ENGRAM_OK)
        st = engram_segment_span_map_node(ctx->group, t->shard, true, &h->span);
    st = engram_group_agree(ctx->group, st);
    if (st != ENGRAM_OK)
        return st;
    st = alloc_pinned(t, h);
    if (st == ENGRAM_OK)
        st = check_stream_waits(h);
    if (st == ENGRAM_OK)
        st = make_jobs(t, g, h);
    if (st == ENGRAM_OK)
        engram_gpu_place_slots(t, g, g->recv_own->addr);
    return engram_group_agree(ctx->group, st);
}

/* Until slot s's job (abandoned, or done) has left the pool and its copy
 * stream is drained: with a cache the pool's threads queue copies on that
 * stream until the job ends, so no later work may rely on it before. */
static void settle(engram_gpu_host_t *h, int s)
{
    while (h->jobs[s] != NULL && !engram_gather_job_finished(h->jobs[s]))
        sched_yield(); /* an abandoned job ends in a few rows */
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (h->copy_streams[s] != NULL && cudaStreamIsCapturing(h->copy_streams[s], &capture) == cudaSuccess &&
        capture == cudaStreamCaptureStatusNone) /* drawn into a failed capture: nothing of it runs */
        engram_gpu_stream_sync(h->copy_streams[s]);
}

/* Waits for the slots' last fetches, lets abandoned ones pass, stops the
 * pool and frees what create took, whatever it got to. */
static void hg_destroy(engram_table_t *t, engram_gpu_table_t *g, void *state)
{
    engram_gpu_host_t *h = state;
    if (h == NULL)
        return;
    /* A fetch still queued must not wait for a pool that is gone, nor copy
     * into memory that is. The pool ends first: with a cache its threads
     * queue copies on the copy streams, which are drained after. */
    for (int s = 0; h->jobs != NULL && s < t->num_slots; s++)
        if (h->jobs[s] != NULL)
            engram_gather_job_uncapture(h->jobs[s]); /* a captured fetch not released: its replay passes */
    for (int s = 0; h->jobs != NULL && s < t->num_slots; s++)
        if (h->jobs[s] != NULL && !engram_gather_job_finished(h->jobs[s]))
            engram_gather_job_abandon(h->jobs[s]);
    for (int s = 0; h->jobs != NULL && h->copy_streams != NULL && s < t->num_slots; s++)
        settle(h, s);
    for (int s = 0; g->done != NULL && s < t->num_slots; s++)
        if (g->done[s] != NULL)
            engram_gpu_event_sync(g->done[s]);
    engram_gather_pool_destroy(h->pool);
    for (int s = 0; h->jobs != NULL && s < t->num_slots; s++)
        engram_gather_job_destroy(h->jobs[s]);
    free(h->jobs);
    for (int s = 0; h->copy_streams != NULL && s < t->num_slots; s++)
        if (h->copy_streams[s] != NULL)
            cudaStreamDestroy(h->copy_streams[s]);
    free(h->copy_streams);
    for (int s = 0; h->forks != NULL && s < t->num_slots; s++)
        if (h->forks[s] != NULL)
            cudaEventDestroy(h->forks[s]);
    for (int s = 0; h->joins != NULL && s < t->num_slots; s++)
        if (h->joins[s] != NULL)
            cudaEventDestroy(h->joins[s]);
    free(h->forks);
    free(h->joins);
    cudaFreeHost(h->copied);
    cudaFreeHost(h->flags);
    cudaFreeHost(h->ready);
    cudaFreeHost(h->dst_rows);
    cudaFreeHost(h->hit_mask);
    cudaFree(h->indices_dev);
    cudaFree(h->hit_slots);
    cudaFree(h->stage_dev);
    cudaFree(h->dst_dev);
    cudaFreeHost(h->scales_stage);
    cudaFreeHost(h->staging);
    cudaFreeHost(h->indices);
    free(h->scales);
    engram_segment_span_unmap(&h->span);
    free(h);
}

engram_status_t engram_gpu_rows_to_host(char *dst, uint64_t stride, const void *src, uint32_t row_bytes, uint64_t n)
{
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, src) != cudaSuccess) {
        (void)cudaGetLastError(); /* not CUDA's: plain host memory */
        at.type = cudaMemoryTypeUnregistered;
    }
    if (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged) {
        cudaError_t ce = cudaMemcpy2D(dst, stride, src, row_bytes, row_bytes, n, cudaMemcpyDeviceToHost);
        return ce == cudaSuccess ? ENGRAM_OK : cuda_error("copying rows from GPU memory", ce);
    }
    engram_rows_to_stride(dst, stride, src, row_bytes, n);
    return ENGRAM_OK;
}

static engram_status_t hg_write_rows(engram_table_t *t, void *state, uint64_t first, uint64_t n, const void *rows)
{
    (void)state;
    return engram_gpu_rows_to_host((char *)t->shard->addr + first * t->shape.row_stride, t->shape.row_stride, rows,
                                   t->params.row_bytes, n);
}

/* The replicated scales into the pool's copy. */
static engram_status_t hg_write_scales(engram_table_t *t, engram_gpu_table_t *g, void *state, const uint32_t *scales)
{
    (void)g;
    engram_gpu_host_t *h = state;
    if (scales != NULL)
        memcpy(h->scales, scales, t->sizes.scales_bytes);
    return ENGRAM_OK;
}

/* The hot-row cache's load: rows[n] of this node (checked) into GPU
 * memory through a pinned bounce buffer. */
static engram_status_t hg_load_rows(engram_table_t *t, engram_gpu_table_t *g, void *state, const int64_t *rows,
                                    const int64_t *rows_dev, uint64_t n, char *dst)
{
    (void)g;
    (void)rows_dev;
    const engram_gpu_host_t *h = state;
    const uint32_t row_bytes = t->params.row_bytes;
    const uint64_t per = ((uint64_t)16 << 20) / row_bytes > 0 ? ((uint64_t)16 << 20) / row_bytes : 1;
    char *bounce = NULL;
    cudaError_t ce = cudaHostAlloc((void **)&bounce, (size_t)(per < n ? per : n) * row_bytes, cudaHostAllocDefault);
    if (ce != cudaSuccess)
        return cuda_error("allocating the cache's pinned bounce buffer", ce);
    engram_status_t st = ENGRAM_OK;
    for (uint64_t done = 0; st == ENGRAM_OK && done < n; done += per) {
        const uint64_t k = n - done < per ? n - done : per;
        for (uint64_t i = 0; st == ENGRAM_OK && i < k; i++) {
            bool in_table;
            const char *src = engram_gather_source_row(&h->src, rows[done + i], &in_table);
            if (src == NULL)
                st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "hot-row cache: row %lld is not this node's",
                                  (long long)rows[done + i]);
            else
                memcpy(bounce + i * row_bytes, src, row_bytes);
        }
        ce = st == ENGRAM_OK ? cudaMemcpy(dst + done * row_bytes, bounce, (size_t)k * row_bytes, cudaMemcpyHostToDevice)
                             : cudaSuccess;
        if (ce != cudaSuccess)
            st = cuda_error("copying the cache's rows to the GPU", ce);
    }
    cudaFreeHost(bounce);
    return st;
}

static engram_status_t hg_issue(void *state, engram_gpu_table_t *g, const engram_gpu_fetch_t *fx, bool *wait_due)
{
    engram_gpu_host_t *h = state;
    engram_fetch_slot_t *f = fx->f;
    const engram_table_t *t = f->table;
    engram_status_t (*issue)(engram_gather_job_t *, const engram_gather_stream_ops_t *, void *, const int64_t *,
                             uint32_t, uint32_t, bool, const void *, char *, uint32_t *) =
        fx->captured ? engram_gather_job_capture : engram_gather_job_queue;
    engram_status_t st = issue(h->jobs[fx->slot], &engram_gpu_cuda_stream_ops, fx->stream, fx->indices,
                               f->num_tokens, t->params.entries_per_token,
                               (f->flags & ENGRAM_FETCH_SCALES_COL_MAJOR) != 0, g->hot, f->rows, f->scales_out);
    /* what was queued (the job abandoned, so it passes) writes into the
     * slot: done before it is free (the driver then synchronizes the
     * stream); under capture nothing ran, and the copy stream, drawn into
     * the failed capture, must not be synchronized */
    if (st != ENGRAM_OK && !fx->captured)
        settle(h, fx->slot);
    *wait_due = st == ENGRAM_OK;
    return st;
}

/* The join: work queued on stream from here follows the slot's copies. */
static engram_status_t hg_queue_wait(void *state, int slot, void *stream)
{
    engram_gpu_host_t *h = state;
    engram_status_t st = engram_gather_job_join(h->jobs[slot], &engram_gpu_cuda_stream_ops, stream);
    if (st != ENGRAM_OK) { /* nothing orders the stream after the rows: the host waits for them */
        engram_gather_job_abandon(h->jobs[slot]);
        settle(h, slot);
    }
    return st;
}

/* After the slot's event (recorded behind the join): ENGRAM_INPROGRESS
 * until the pool is done with it, then the bad-index tally folded into f. */
static engram_status_t hg_test(void *state, engram_gpu_table_t *g, engram_fetch_slot_t *f, int slot)
{
    (void)g;
    engram_gather_job_t *job = ((engram_gpu_host_t *)state)->jobs[slot];
    if (!engram_gather_job_finished(job))
        return ENGRAM_INPROGRESS;
    const char *err = engram_gather_job_error(job);
    if (err != NULL && f->status == ENGRAM_OK) /* once: a later test returns it as it is */
        f->status = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "host_gather fetch: queueing a chunk's moves: %s", err);
    uint64_t first = UINT64_MAX;
    engram_gather_job_bad(job, &f->bad_count, &first);
    f->cache_hits = engram_gather_job_hits(job);
    if (f->bad_count > 0) {
        const uint32_t ept = f->table->params.entries_per_token;
        f->first_bad_token = (uint32_t)(first / ept);
        f->first_bad_entry = (uint32_t)(first % ept);
    }
    return f->status;
}

static void hg_end_captured(void *state, int slot)
{
    engram_gather_job_uncapture(((engram_gpu_host_t *)state)->jobs[slot]);
}

static void hg_replay_bad(void *state, int slot, uint64_t *count, uint64_t *first_row)
{
    engram_gather_job_bad(((engram_gpu_host_t *)state)->jobs[slot], count, first_row);
}

static int hg_threads(const void *state)
{
    return engram_gather_pool_threads(((const engram_gpu_host_t *)state)->pool);
}

const engram_gpu_path_ops_t engram_gpu_host_gather_path = {
    .name = "host_gather",
    .how = "host threads gather its rows, the copy engine moves them; gpu_path=uva can",
    .work = "copy",
    .caps = ENGRAM_GPU_HOST_GATHER_CAPS,
    .alloc_shard = hg_alloc_shard,
    .create = hg_create,
    .destroy = hg_destroy,
    .write_rows = hg_write_rows,
    .write_scales = hg_write_scales,
    .load_rows = hg_load_rows,
    .threads = hg_threads,
    .issue = hg_issue,
    .queue_wait = hg_queue_wait,
    .test = hg_test,
    .end_captured = hg_end_captured,
    .replay_bad = hg_replay_bad,
};
