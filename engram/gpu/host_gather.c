/* The host-gather pool and its jobs (design in host_gather.h). */
#include "engram/gpu/host_gather.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "hal/log.h"
#include "memory/numa_sys.h"

enum {
    /* Rows a thread claims at once: few enough that a chunk's rows are
     * spread over every thread, enough that claiming costs nothing. */
    TASK_ROWS = 32,
    /* Rows ahead whose sources are prefetched: random rows are DRAM misses
     * (and TLB misses on 4 KiB pages), so a thread keeps several in flight
     * (8, into every cache level, gathered fastest on an H200's host). */
    PREFETCH_ROWS = 8,
    /* A fetch is cut into at least this many chunks (while a chunk keeps a
     * task): the copy engine starts after the first and ends one chunk
     * after the gather, so small fetches pipeline too. */
    MIN_CHUNKS = 8,
    /* With a cache a chunk and a task span this many times the rows: a
     * chunk's staged misses still fill about a chunk, and a task's fixed
     * cost (claiming it, its place among the chunk's staged rows) is paid
     * per about TASK_ROWS misses. */
    CACHE_CHUNK_SPAN = 8,
    MAX_TASK_ROWS = TASK_ROWS * CACHE_CHUNK_SPAN,
    MAX_THREADS = 1024,
};
/* How long an idle thread polls for the next job before it sleeps: back to
 * back fetches find it awake, an idle table costs no CPU. */
#define IDLE_SPIN_NS 200000
/* How often a job posted but not reached by its stream is looked at once
 * it has waited IDLE_SPIN_NS. */
#define POLL_SLEEP_NS 20000

struct engram_gather_job {
    engram_gather_pool_t *pool;
    engram_gather_source_t src;
    engram_gather_buffers_t buf;
    uint64_t chunk_bytes;    /* the most a chunk holds */
    atomic_uint *chunk_left; /* [max_chunks]: tasks of the chunk not done */
    atomic_uint *chunk_fill; /* [max_chunks]: rows staged in the chunk (with a cache) */
    /* what the pool queues a cache's moves with; cache_dev NULL: this
     * fetch has no cache (with one, the probe's hit bits tell the misses) */
    const engram_gather_stream_ops_t *ops;
    const void *cache_dev;
    char *rows_dst;
    uint32_t *scales_dst;
    atomic_uint chunks_queued;    /* chunks whose moves the pool has queued */
    _Atomic(const char *) error;  /* the first error queueing them */
    /* this fetch's */
    uint32_t chunk_rows; /* a multiple of task_rows */
    uint32_t task_rows;
    uint32_t num_rows, num_tokens, entries_per_token, num_chunks, num_tasks;
    bool col_major;
    atomic_uint next_task;
    atomic_ullong bad_count, bad_first, hits;
    atomic_bool abandoned;
    atomic_bool finished;
    uint32_t seq;              /* this fetch's: what the stream writes into buf.ready once its indices are copied */
    int workers; /* pool->mu */
    engram_gather_job_t *next; /* the pool's queue */
};

struct engram_gather_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    engram_gather_job_t *head, *tail; /* posted, not yet begun */
    engram_gather_job_t *current;     /* the job new workers join */
    atomic_ullong posts;              /* jobs posted so far: what idle threads poll */
    bool stop;
    int num_threads, started;
    int numa_node;
    pthread_t *threads;
};

/* Rows per task (task_max at most), and per chunk of chunk_bytes (a
 * multiple of the task; a row at least). */
static void chunk_shape(uint32_t row_bytes, uint64_t chunk_bytes, uint64_t task_max, uint64_t *task, uint64_t *cap)
{
    uint64_t per = row_bytes > 0 ? chunk_bytes / row_bytes : 1;
    per = per == 0 ? 1 : (per > UINT32_MAX ? UINT32_MAX : per);
    *task = per < task_max ? per : task_max;
    *cap = per / *task * *task;
}

static uint32_t saturate(uint64_t n)
{
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* How a fetch of num_rows is cut: tasks of *task_rows, chunks of
 * *chunk_rows (a multiple of it, at most chunk_bytes, and small enough for
 * MIN_CHUNKS chunks where tasks allow); returns the chunks. */
static uint32_t plan(uint64_t num_rows, uint32_t row_bytes, uint64_t chunk_bytes, uint64_t task_max,
                     uint32_t *task_rows, uint32_t *chunk_rows)
{
    uint64_t task, cap;
    chunk_shape(row_bytes, chunk_bytes, task_max, &task, &cap);
    const uint64_t fair = ((num_rows + MIN_CHUNKS - 1) / MIN_CHUNKS + task - 1) / task * task;
    const uint64_t chunk = fair < cap ? (fair > task ? fair : task) : cap;
    *task_rows = (uint32_t)task;
    *chunk_rows = (uint32_t)chunk;
    return saturate((num_rows + chunk - 1) / chunk);
}

uint32_t engram_gather_max_chunks(uint64_t max_rows, uint32_t row_bytes, uint64_t chunk_bytes)
{
    /* a fetch of n <= max_rows rows has chunks of a task at least, and
     * either at most MIN_CHUNKS of them or chunks as large as allowed */
    uint64_t task, cap;
    chunk_shape(row_bytes, chunk_bytes, TASK_ROWS, &task, &cap);
    const uint64_t by_cap = (max_rows + cap - 1) / cap, by_task = (max_rows + task - 1) / task;
    const uint64_t n = by_cap > MIN_CHUNKS ? by_cap : MIN_CHUNKS;
    return saturate(n < by_task ? n : by_task);
}

int engram_gather_default_threads(int numa_node, int local_ranks)
{
    cpu_set_t set;
    long cpus = engram_numa_node_cpus(numa_node, &set);
    if (cpus <= 0)
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long n = (cpus > 0 ? cpus : 1) / (local_ranks > 0 ? local_ranks : 1) - 1;
    return n < 1 ? 1 : (n > MAX_THREADS ? MAX_THREADS : (int)n);
}

/* The bytes of the fetch's scales, in its layout. */
static size_t scale_bytes(const engram_gather_job_t *j)
{
    uint64_t elems = j->col_major
                         ? (uint64_t)j->entries_per_token * j->src.packs * engram_scales_col_stride(j->num_tokens)
                         : (uint64_t)j->num_rows * j->src.packs;
    return (size_t)(elems * sizeof(uint32_t));
}

/* Row `row`'s scales (all zero for a bad index) at its place in the
 * fetch's layout. */
static void put_scales(engram_gather_job_t *j, uint32_t row, int64_t idx, bool ok)
{
    const engram_gather_source_t *s = &j->src;
    const uint32_t tok = row / j->entries_per_token, e = row - tok * j->entries_per_token;
    const uint64_t col_stride = engram_scales_col_stride(j->num_tokens);
    for (uint32_t k = 0; k < s->packs; k++) {
        uint32_t v = ok ? s->scales[(uint64_t)idx * s->packs + k] : 0u;
        uint64_t at = j->col_major ? ((uint64_t)e * s->packs + k) * col_stride + tok : (uint64_t)row * s->packs + k;
        j->buf.scales[at] = v;
    }
}

/* Row `row` of the job's fetch into staging row `at` (and its scales). */
static void gather_row(engram_gather_job_t *j, uint32_t row, uint64_t at, uint64_t *bad, uint64_t *first_bad)
{
    const engram_gather_source_t *s = &j->src;
    const int64_t idx = j->buf.indices[row];
    char *dst = j->buf.staging + at * s->row_bytes;
    bool ok;
    const char *src = engram_gather_source_row(s, idx, &ok);
    if (ok && src == NULL)
        return; /* another node's row: its transport fills it */
    if (ok)
        memcpy(dst, src, s->row_bytes);
    else
        memset(dst, 0, s->row_bytes);
    if (!ok && (*bad)++ == 0)
        *first_bad = row;
    if (s->packs > 0)
        put_scales(j, row, idx, ok);
}

static void prefetch_row(const engram_gather_job_t *j, uint32_t row)
{
    const engram_gather_source_t *s = &j->src;
    bool in_table;
    const char *p = engram_gather_source_row(s, j->buf.indices[row], &in_table);
    if (p == NULL)
        return;
    for (uint32_t off = 0; off < s->row_bytes; off += 64)
        __builtin_prefetch(p + off, 0, 3);
}

static void pool_error(engram_gather_job_t *j, const char *err)
{
    const char *none = NULL;
    if (err != NULL)
        atomic_compare_exchange_strong(&j->error, &none, err);
}

/* With a cache, from the pool's thread that ended the chunk: the copy
 * engine moves its `n` staged misses and their receive rows into GPU
 * memory, and a kernel places them from there. */
static void queue_chunk_moves(engram_gather_job_t *j, uint32_t chunk, uint32_t n)
{
    if (n == 0 || atomic_load(&j->error) != NULL)
        return;
    const engram_gather_stream_ops_t *ops = j->ops;
    void *stream = j->buf.copy_stream;
    const uint32_t row_bytes = j->src.row_bytes;
    const uint64_t first = (uint64_t)chunk * j->chunk_rows;
    const char *err = ops->bind(j->cache_dev);
    if (err == NULL)
        err = ops->copy(stream, j->buf.stage_dev + first * row_bytes, j->buf.staging + first * row_bytes,
                        (size_t)n * row_bytes);
    if (err == NULL)
        err = ops->copy(stream, j->buf.dst_dev + first, j->buf.dst_rows + first, (size_t)n * sizeof(uint32_t));
    if (err == NULL)
        err = ops->place(stream, j->cache_dev, j->buf.stage_dev + first * row_bytes, j->buf.dst_dev + first, n,
                         row_bytes, j->rows_dst);
    pool_error(j, err);
}

/* With a cache, once every chunk's moves are queued: the scales' copy and
 * the copied word; after an error the copy stream is drained and the word
 * written here, so a join passes and the slot is free once it has. */
static void queue_end(engram_gather_job_t *j)
{
    const engram_gather_stream_ops_t *ops = j->ops;
    void *stream = j->buf.copy_stream;
    const char *err = atomic_load(&j->error); /* a chunk's */
    if (err == NULL)
        err = ops->bind(j->cache_dev);
    if (err == NULL && j->src.packs > 0)
        err = ops->copy(stream, j->scales_dst, j->buf.scales, scale_bytes(j));
    if (err == NULL)
        err = ops->write(stream, j->buf.copied_dev, j->seq);
    if (err == NULL)
        return;
    pool_error(j, err);
    (void)ops->drain(stream); /* a failing drain has nothing left to wait for */
    __atomic_store_n(j->buf.copied, j->seq, __ATOMIC_RELEASE);
}

/* One task's rows; the worker that ends a chunk's last task flags it (with
 * a cache: queues its moves). Without a cache row r is staged at r; with
 * one, the task's misses are staged together at the next free rows of the
 * chunk. */
static void run_task(engram_gather_job_t *j, uint32_t task, uint64_t *hits)
{
    const uint32_t lo = task * j->task_rows;
    const uint32_t hi = lo + j->task_rows < j->num_rows ? lo + j->task_rows : j->num_rows;
    const uint32_t chunk = lo / j->chunk_rows;
    uint64_t bad = 0, first_bad = UINT64_MAX, at = lo;
    uint32_t rows[MAX_TASK_ROWS], m = 0; /* the rows to gather (task_rows <= MAX_TASK_ROWS) */
    for (uint32_t r = lo; r < hi; r++) {
        /* with a cache, the probe's hit bits tell the cache's rows: their
         * scales are put here (the hit kernel writes only rows) */
        if (j->cache_dev != NULL && __atomic_load_n(&j->buf.hit_mask[r / 32], __ATOMIC_RELAXED) >> (r % 32) & 1u) {
            ++*hits;
            if (j->src.packs > 0)
                put_scales(j, r, j->buf.indices[r], true);
        } else {
            rows[m++] = r;
        }
    }
    if (j->cache_dev != NULL) /* the misses staged together at the chunk's next free rows */
        at = (uint64_t)chunk * j->chunk_rows +
             atomic_fetch_add_explicit(&j->chunk_fill[chunk], m, memory_order_relaxed);
    for (uint32_t i = 0; i < m && i < PREFETCH_ROWS; i++)
        prefetch_row(j, rows[i]);
    for (uint32_t i = 0; i < m; i++) {
        if (i + PREFETCH_ROWS < m)
            prefetch_row(j, rows[i + PREFETCH_ROWS]);
        if (j->cache_dev != NULL)
            j->buf.dst_rows[at + i] = rows[i];
        gather_row(j, rows[i], at + i, &bad, &first_bad);
    }
    if (bad > 0) {
        atomic_fetch_add_explicit(&j->bad_count, bad, memory_order_relaxed);
        unsigned long long cur = atomic_load_explicit(&j->bad_first, memory_order_relaxed);
        while (first_bad < cur &&
               !atomic_compare_exchange_weak_explicit(&j->bad_first, &cur, first_bad, memory_order_relaxed,
                                                      memory_order_relaxed)) {
        }
    }
    /* acq_rel: every task of the chunk happens before the flag's store (or
     * the moves' queueing) */
    if (atomic_fetch_sub_explicit(&j->chunk_left[chunk], 1, memory_order_acq_rel) != 1)
        return;
    if (j->cache_dev == NULL) {
        __atomic_store_n(&j->buf.flags[chunk], 1u, __ATOMIC_RELEASE);
        return;
    }
    queue_chunk_moves(j, chunk, atomic_load_explicit(&j->chunk_fill[chunk], memory_order_relaxed));
    if (atomic_fetch_add_explicit(&j->chunks_queued, 1, memory_order_acq_rel) + 1 == j->num_chunks)
        queue_end(j);
}

static void work_on(engram_gather_job_t *j)
{
    uint64_t hits = 0; /* counted here, added once: one shared counter per task would bounce between cores */
    for (;;) {
        uint32_t task = atomic_fetch_add_explicit(&j->next_task, 1, memory_order_relaxed);
        if (task >= j->num_tasks)
            break;
        if (!atomic_load_explicit(&j->abandoned, memory_order_relaxed))
            run_task(j, task, &hits);
    }
    if (hits > 0)
        atomic_fetch_add_explicit(&j->hits, hits, memory_order_relaxed);
}

/* Whether the pool may begin a posted job: the stream has copied its
 * indices (and written their seq after them), or it is abandoned. */
static bool job_ready(const engram_gather_job_t *j)
{
    return __atomic_load_n(j->buf.ready, __ATOMIC_ACQUIRE) == j->seq ||
           atomic_load_explicit(&j->abandoned, memory_order_relaxed);
}

/* The first posted job that is ready, unlinked; NULL if none (pool->mu). */
static engram_gather_job_t *unlink_ready(engram_gather_pool_t *p)
{
    for (engram_gather_job_t *prev = NULL, *j = p->head; j != NULL; prev = j, j = j->next) {
        if (!job_ready(j))
            continue;
        if (prev != NULL)
            prev->next = j->next;
        else
            p->head = j->next;
        if (p->tail == j)
            p->tail = prev;
        return j;
    }
    return NULL;
}

/* The job a worker joins, under pool->mu; NULL once stopping. Jobs are
 * begun as their streams reach them, not in the order they were posted, so
 * one stream waiting on another's fetch never holds the pool. */
static engram_gather_job_t *take_job(engram_gather_pool_t *p)
{
    int64_t polling_since = 0;
    for (;;) {
        if (p->stop)
            return NULL;
        if (p->current == NULL)
            p->current = unlink_ready(p);
        if (p->current != NULL) {
            p->current->workers++;
            return p->current;
        }
        const bool posted = p->head != NULL; /* posted, not ready: its stream writes the word, nothing signals */
        unsigned long long seen = atomic_load(&p->posts);
        pthread_mutex_unlock(&p->mu);
        const int64_t now = engram_now_ns();
        if (posted) {
            if (polling_since == 0)
                polling_since = now;
            if (now - polling_since < IDLE_SPIN_NS)
                sched_yield();
            else
                nanosleep(&(struct timespec){.tv_nsec = POLL_SLEEP_NS}, NULL); /* a stream held up long */
        } else {
            polling_since = 0;
            while (atomic_load_explicit(&p->posts, memory_order_relaxed) == seen &&
                   engram_now_ns() < now + IDLE_SPIN_NS)
                sched_yield();
        }
        pthread_mutex_lock(&p->mu);
        if (!posted && atomic_load(&p->posts) == seen && !p->stop && p->head == NULL)
            pthread_cond_wait(&p->cv, &p->mu);
    }
}

static void *worker(void *arg)
{
    engram_gather_pool_t *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        engram_gather_job_t *j = take_job(p);
        if (j == NULL)
            break;
        pthread_mutex_unlock(&p->mu);
        work_on(j);
        pthread_mutex_lock(&p->mu);
        if (p->current == j) /* its tasks are all taken: the next job may begin */
            p->current = NULL;
        if (--j->workers == 0)
            atomic_store_explicit(&j->finished, true, memory_order_release);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void bind_to_node(pthread_t t, int node)
{
    cpu_set_t set;
    if (node >= 0 && engram_numa_node_cpus(node, &set) > 0)
        (void)pthread_setaffinity_np(t, sizeof(set), &set); /* placement only: the pool runs unbound otherwise */
}

engram_status_t engram_gather_pool_create(int threads, int numa_node, engram_gather_pool_t **out)
{
    if (out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host_gather pool: out must not be NULL");
    if (threads < 1 || threads > MAX_THREADS)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host_gather pool: %d threads is outside 1..%d", threads,
                            MAX_THREADS);
    engram_gather_pool_t *p = calloc(1, sizeof(*p));
    if (p != NULL)
        p->threads = calloc((size_t)threads, sizeof(*p->threads));
    if (p == NULL || p->threads == NULL) {
        free(p);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "host_gather pool: out of memory for %d threads", threads);
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->num_threads = threads;
    p->numa_node = numa_node;
    for (; p->started < threads; p->started++) {
        int err = pthread_create(&p->threads[p->started], NULL, worker, p);
        if (err != 0) {
            engram_status_t st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "host_gather pool: starting thread %d of %d: %s",
                                              p->started + 1, threads, strerror(err));
            engram_gather_pool_destroy(p);
            return st;
        }
        bind_to_node(p->threads[p->started], numa_node);
        (void)pthread_setname_np(p->threads[p->started], "engram-gather");
    }
    ENGRAM_DEBUG("host_gather pool: %d threads on NUMA node %d", threads, numa_node);
    *out = p;
    return ENGRAM_OK;
}

void engram_gather_pool_destroy(engram_gather_pool_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}

int engram_gather_pool_threads(const engram_gather_pool_t *p)
{
    return p->num_threads;
}

engram_status_t engram_gather_job_create(engram_gather_pool_t *pool, const engram_gather_source_t *src,
                                         const engram_gather_buffers_t *buf, uint64_t chunk_bytes,
                                         engram_gather_job_t **out)
{
    if (pool == NULL || src == NULL || buf == NULL || out == NULL || src->row_bytes == 0 || chunk_bytes == 0 ||
        buf->ready == NULL || buf->copied == NULL || buf->copy_stream == NULL || buf->max_rows > UINT32_MAX ||
        buf->max_chunks != engram_gather_max_chunks(buf->max_rows, src->row_bytes, chunk_bytes))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host_gather job: inconsistent arguments");
    engram_gather_job_t *j = calloc(1, sizeof(*j));
    if (j != NULL) {
        j->chunk_left = calloc(buf->max_chunks > 0 ? buf->max_chunks : 1, sizeof(*j->chunk_left));
        j->chunk_fill = calloc(buf->max_chunks > 0 ? buf->max_chunks : 1, sizeof(*j->chunk_fill));
    }
    if (j == NULL || j->chunk_left == NULL || j->chunk_fill == NULL) {
        if (j != NULL) {
            free(j->chunk_left);
            free(j->chunk_fill);
        }
        free(j);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "host_gather job: out of memory for %u chunks", buf->max_chunks);
    }
    j->pool = pool;
    j->src = *src;
    j->buf = *buf;
    j->chunk_bytes = chunk_bytes;
    j->seq = __atomic_load_n(buf->ready, __ATOMIC_RELAXED); /* the next fetch's seq differs from the word */
    atomic_init(&j->finished, true);
    *out = j;
    return ENGRAM_OK;
}

void engram_gather_job_destroy(engram_gather_job_t *j)
{
    if (j == NULL)
        return;
    free(j->chunk_left);
    free(j->chunk_fill);
    free(j);
}

/* Step 2's other half: the job on the pool's list, begun once the stream
 * has written its seq (job_ready). */
static void post_job(engram_gather_job_t *j)
{
    engram_gather_pool_t *p = j->pool;
    pthread_mutex_lock(&p->mu);
    j->next = NULL;
    if (p->tail != NULL)
        p->tail->next = j;
    else
        p->head = j;
    p->tail = j;
    atomic_fetch_add(&p->posts, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void engram_gather_job_abandon(engram_gather_job_t *j)
{
    atomic_store(&j->abandoned, true);
    for (uint32_t c = 0; c < j->buf.max_chunks; c++)
        __atomic_store_n(&j->buf.flags[c], 1u, __ATOMIC_RELEASE);
    /* the copy stream's wait for the fetch's stream, and a join, pass */
    __atomic_store_n(j->buf.ready, j->seq, __ATOMIC_RELEASE);
    __atomic_store_n(j->buf.copied, j->seq, __ATOMIC_RELEASE);
}

static engram_status_t stream_error(const char *what, const char *err)
{
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "host_gather fetch: %s: %s", what, err);
}

/* Steps 3-4 on the copy stream, without a cache: the wait for the
 * fetch's stream, the chunks' waits and copies, the scales' copy, the
 * copied word. */
static engram_status_t queue_copies(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops, char *rows_dst,
                                    uint32_t *scales_dst)
{
    void *stream = j->buf.copy_stream;
    const uint32_t row_bytes = j->src.row_bytes;
    const char *err = ops->wait_geq(stream, j->buf.ready_dev, j->seq);
    if (err != NULL)
        return stream_error("queueing the copy stream's wait for the fetch's stream", err);
    for (uint32_t c = 0; c < j->num_chunks; c++) {
        const uint64_t first = (uint64_t)c * j->chunk_rows;
        const uint64_t rows = j->num_rows - first < j->chunk_rows ? j->num_rows - first : j->chunk_rows;
        err = ops->wait_geq(stream, (const uint32_t *)j->buf.flags_dev + c, 1u);
        if (err != NULL)
            return stream_error("queueing the wait for a chunk", err);
        err = ops->copy(stream, rows_dst + first * row_bytes, j->buf.staging + first * row_bytes, rows * row_bytes);
        if (err != NULL)
            return stream_error("queueing a chunk's copy", err);
    }
    if (j->src.packs > 0) {
        err = ops->copy(stream, scales_dst, j->buf.scales, scale_bytes(j));
        if (err != NULL)
            return stream_error("queueing the scales' copy", err);
    }
    err = ops->write(stream, j->buf.copied_dev, j->seq);
    return err == NULL ? ENGRAM_OK : stream_error("queueing the copy stream's end", err);
}

engram_status_t engram_gather_job_queue(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops, void *stream,
                                        const int64_t *indices, uint32_t num_tokens, uint32_t entries_per_token,
                                        bool scales_col_major, const void *cache_dev, char *rows_dst,
                                        uint32_t *scales_dst)
{
    if (!atomic_load_explicit(&j->finished, memory_order_acquire))
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "host_gather fetch: the slot's last gather is still running");
    if (cache_dev != NULL && (j->buf.dst_rows == NULL || j->buf.hit_mask == NULL || j->buf.indices_dev == NULL ||
                              j->buf.hit_slots == NULL || j->buf.stage_dev == NULL || j->buf.dst_dev == NULL))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host_gather fetch: a cache needs the job's dst_rows, hit_mask, "
                                                "indices_dev, hit_slots, stage_dev and dst_dev");
    const uint64_t num_rows = (uint64_t)num_tokens * entries_per_token;
    if (num_rows > j->buf.max_rows)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "host_gather fetch: %llu rows exceed the slot's %llu",
                            (unsigned long long)num_rows, (unsigned long long)j->buf.max_rows);
    atomic_store_explicit(&j->bad_count, 0, memory_order_relaxed);
    atomic_store_explicit(&j->bad_first, UINT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&j->hits, 0, memory_order_relaxed);
    atomic_store_explicit(&j->error, NULL, memory_order_relaxed);
    if (num_rows == 0)
        return ENGRAM_OK;
    j->num_rows = (uint32_t)num_rows;
    j->num_tokens = num_tokens;
    j->entries_per_token = entries_per_token;
    j->col_major = scales_col_major;
    j->ops = ops;
    j->cache_dev = cache_dev;
    j->rows_dst = rows_dst;
    j->scales_dst = scales_dst;
    /* With a cache a chunk's staged bytes are its misses only: it spans
     * CACHE_CHUNK_SPAN times the rows, so each chunk's moves still carry
     * about a chunk's bytes (the moves' fixed cost is per chunk). */
    const uint64_t span = cache_dev != NULL ? CACHE_CHUNK_SPAN : 1;
    const uint64_t chunk_bytes = j->chunk_bytes > UINT64_MAX / span ? UINT64_MAX : j->chunk_bytes * span;
    j->num_chunks = plan(num_rows, j->src.row_bytes, chunk_bytes, TASK_ROWS * span, &j->task_rows, &j->chunk_rows);
    if (j->num_chunks > j->buf.max_chunks) /* engram_gather_max_chunks bounds every fetch of the slot */
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "host_gather fetch: %u chunks exceed the slot's %u",
                            j->num_chunks, j->buf.max_chunks);
    j->num_tasks = (uint32_t)((num_rows + j->task_rows - 1) / j->task_rows);
    const uint32_t tasks_per_chunk = j->chunk_rows / j->task_rows;
    for (uint32_t c = 0; c < j->num_chunks; c++) {
        uint32_t left = j->num_tasks - c * tasks_per_chunk;
        atomic_store_explicit(&j->chunk_left[c], left < tasks_per_chunk ? left : tasks_per_chunk,
                              memory_order_relaxed);
        atomic_store_explicit(&j->chunk_fill[c], 0, memory_order_relaxed);
        j->buf.flags[c] = 0;
    }
    atomic_store_explicit(&j->chunks_queued, 0, memory_order_relaxed);
    atomic_store_explicit(&j->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&j->abandoned, false, memory_order_relaxed);
    const char *what = "queueing the indices' copy";
    const char *err = ops->copy(stream, j->buf.indices, indices, num_rows * sizeof(*indices));
    if (err == NULL && cache_dev != NULL)
        err = ops->copy(stream, j->buf.indices_dev, indices, num_rows * sizeof(*indices));
    if (err == NULL && cache_dev != NULL) {
        what = "queueing the cache's probe";
        err = ops->probe(stream, cache_dev, j->buf.indices_dev, j->num_rows, j->buf.hit_slots, j->buf.hit_mask);
    }
    if (err != NULL) {
        engram_gather_job_abandon(j);
        return stream_error(what, err);
    }
    j->seq++;
    err = ops->write(stream, j->buf.ready_dev, j->seq);
    if (err != NULL) {
        engram_gather_job_abandon(j); /* a join of this seq must pass */
        return stream_error("queueing the pool's start", err);
    }
    /* posted from here on: finished again once the pool has done it */
    atomic_store_explicit(&j->finished, false, memory_order_release);
    post_job(j);
    engram_status_t st = ENGRAM_OK;
    if (cache_dev == NULL) {
        st = queue_copies(j, ops, rows_dst, scales_dst);
    } else { /* the hits on the fetch's stream, beside the pool's gather of the misses */
        err = ops->hits(stream, cache_dev, j->buf.hit_slots, j->num_rows, j->src.row_bytes, rows_dst);
        if (err != NULL)
            st = stream_error("queueing the cache's hits", err);
    }
    if (st != ENGRAM_OK)
        engram_gather_job_abandon(j); /* the waits already queued must pass */
    return st;
}

engram_status_t engram_gather_job_join(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops, void *stream)
{
    const char *err = ops->wait_geq(stream, j->buf.copied_dev, j->seq);
    return err == NULL ? ENGRAM_OK : stream_error("queueing the wait for the copy stream", err);
}

bool engram_gather_job_finished(engram_gather_job_t *j)
{
    return atomic_load_explicit(&j->finished, memory_order_acquire);
}

uint64_t engram_gather_job_hits(engram_gather_job_t *j)
{
    return atomic_load_explicit(&j->hits, memory_order_relaxed);
}

const char *engram_gather_job_error(engram_gather_job_t *j)
{
    return atomic_load(&j->error);
}

void engram_gather_job_bad(engram_gather_job_t *j, uint64_t *count, uint64_t *first_row)
{
    *count = atomic_load_explicit(&j->bad_count, memory_order_relaxed);
    *first_row = atomic_load_explicit(&j->bad_first, memory_order_relaxed);
}
