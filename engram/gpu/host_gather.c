/* The host-gather pool and its jobs (design in host_gather.h). */
#include "engram/gpu/host_gather.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
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
    MAX_THREADS = 1024,
};
/* How long an idle thread polls for the next job before it sleeps: back to
 * back fetches find it awake, an idle table costs no CPU. */
#define IDLE_SPIN_NS 200000

struct engram_gather_job {
    engram_gather_pool_t *pool;
    engram_gather_source_t src;
    engram_gather_buffers_t buf;
    uint64_t chunk_bytes;    /* the most a chunk holds */
    atomic_uint *chunk_left; /* [max_chunks]: tasks of the chunk not done */
    /* this fetch's */
    uint32_t chunk_rows; /* a multiple of task_rows */
    uint32_t task_rows;
    uint32_t num_rows, num_tokens, entries_per_token, num_chunks, num_tasks;
    bool col_major;
    atomic_uint next_task;
    atomic_ullong bad_count, bad_first;
    atomic_bool abandoned;
    atomic_bool finished;
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

/* Rows per task, and per chunk of chunk_bytes (a multiple of the task;
 * a row at least). */
static void chunk_shape(uint32_t row_bytes, uint64_t chunk_bytes, uint64_t *task, uint64_t *cap)
{
    uint64_t per = row_bytes > 0 ? chunk_bytes / row_bytes : 1;
    per = per == 0 ? 1 : (per > UINT32_MAX ? UINT32_MAX : per);
    *task = per < TASK_ROWS ? per : TASK_ROWS;
    *cap = per / *task * *task;
}

static uint32_t saturate(uint64_t n)
{
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* How a fetch of num_rows is cut: tasks of *task_rows, chunks of
 * *chunk_rows (a multiple of it, at most chunk_bytes, and small enough for
 * MIN_CHUNKS chunks where tasks allow); returns the chunks. */
static uint32_t plan(uint64_t num_rows, uint32_t row_bytes, uint64_t chunk_bytes, uint32_t *task_rows,
                     uint32_t *chunk_rows)
{
    uint64_t task, cap;
    chunk_shape(row_bytes, chunk_bytes, &task, &cap);
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
    chunk_shape(row_bytes, chunk_bytes, &task, &cap);
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

/* Row `row` of the job's fetch into its staging (and its scales). */
static void gather_row(engram_gather_job_t *j, uint32_t row, uint64_t *bad, uint64_t *first_bad)
{
    const engram_gather_source_t *s = &j->src;
    const int64_t idx = j->buf.indices[row];
    char *dst = j->buf.staging + (uint64_t)row * s->row_bytes;
    engram_route_t r;
    bool ok = engram_route_index(&s->shape, idx, &r);
    if (ok && r.peer - s->first_peer >= s->local_peers)
        return; /* another node's row: its transport fills it */
    if (ok)
        memcpy(dst, s->span + (uint64_t)(r.peer - s->first_peer) * s->peer_stride + r.src_off, s->row_bytes);
    else
        memset(dst, 0, s->row_bytes);
    if (!ok && (*bad)++ == 0)
        *first_bad = row;
    if (s->packs == 0)
        return;
    const uint32_t tok = row / j->entries_per_token, e = row - tok * j->entries_per_token;
    const uint64_t col_stride = engram_scales_col_stride(j->num_tokens);
    for (uint32_t k = 0; k < s->packs; k++) {
        uint32_t v = ok ? s->scales[(uint64_t)idx * s->packs + k] : 0u;
        uint64_t at = j->col_major ? ((uint64_t)e * s->packs + k) * col_stride + tok : (uint64_t)row * s->packs + k;
        j->buf.scales[at] = v;
    }
}

static void prefetch_row(const engram_gather_job_t *j, uint32_t row)
{
    const engram_gather_source_t *s = &j->src;
    engram_route_t r;
    if (!engram_route_index(&s->shape, j->buf.indices[row], &r) || r.peer - s->first_peer >= s->local_peers)
        return;
    const char *p = s->span + (uint64_t)(r.peer - s->first_peer) * s->peer_stride + r.src_off;
    for (uint32_t off = 0; off < s->row_bytes; off += 64)
        __builtin_prefetch(p + off, 0, 3);
}

/* One task's rows; the worker that ends a chunk's last task flags it. */
static void run_task(engram_gather_job_t *j, uint32_t task)
{
    const uint32_t lo = task * j->task_rows;
    const uint32_t hi = lo + j->task_rows < j->num_rows ? lo + j->task_rows : j->num_rows;
    uint64_t bad = 0, first_bad = UINT64_MAX;
    for (uint32_t r = lo; r < hi && r < lo + PREFETCH_ROWS; r++)
        prefetch_row(j, r);
    for (uint32_t r = lo; r < hi; r++) {
        if (r + PREFETCH_ROWS < hi)
            prefetch_row(j, r + PREFETCH_ROWS);
        gather_row(j, r, &bad, &first_bad);
    }
    if (bad > 0) {
        atomic_fetch_add_explicit(&j->bad_count, bad, memory_order_relaxed);
        unsigned long long cur = atomic_load_explicit(&j->bad_first, memory_order_relaxed);
        while (first_bad < cur &&
               !atomic_compare_exchange_weak_explicit(&j->bad_first, &cur, first_bad, memory_order_relaxed,
                                                      memory_order_relaxed)) {
        }
    }
    const uint32_t chunk = lo / j->chunk_rows;
    /* acq_rel: every task of the chunk happens before the flag's store */
    if (atomic_fetch_sub_explicit(&j->chunk_left[chunk], 1, memory_order_acq_rel) == 1)
        __atomic_store_n(&j->buf.flags[chunk], 1u, __ATOMIC_RELEASE);
}

static void work_on(engram_gather_job_t *j)
{
    for (;;) {
        uint32_t task = atomic_fetch_add_explicit(&j->next_task, 1, memory_order_relaxed);
        if (task >= j->num_tasks)
            return;
        if (!atomic_load_explicit(&j->abandoned, memory_order_relaxed))
            run_task(j, task);
    }
}

/* The job a worker joins, under pool->mu; NULL once stopping. */
static engram_gather_job_t *take_job(engram_gather_pool_t *p)
{
    for (;;) {
        if (p->stop)
            return NULL;
        if (p->current == NULL && p->head != NULL) {
            p->current = p->head;
            p->head = p->head->next;
            if (p->head == NULL)
                p->tail = NULL;
        }
        if (p->current != NULL) {
            p->current->workers++;
            return p->current;
        }
        unsigned long long seen = atomic_load(&p->posts);
        pthread_mutex_unlock(&p->mu);
        int64_t until = engram_now_ns() + IDLE_SPIN_NS;
        while (atomic_load_explicit(&p->posts, memory_order_relaxed) == seen && engram_now_ns() < until)
            sched_yield();
        pthread_mutex_lock(&p->mu);
        if (atomic_load(&p->posts) == seen && !p->stop && p->head == NULL)
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
        buf->max_rows > UINT32_MAX ||
        buf->max_chunks != engram_gather_max_chunks(buf->max_rows, src->row_bytes, chunk_bytes))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host_gather job: inconsistent arguments");
    engram_gather_job_t *j = calloc(1, sizeof(*j));
    if (j != NULL)
        j->chunk_left = calloc(buf->max_chunks > 0 ? buf->max_chunks : 1, sizeof(*j->chunk_left));
    if (j == NULL || j->chunk_left == NULL) {
        free(j);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "host_gather job: out of memory for %u chunks", buf->max_chunks);
    }
    j->pool = pool;
    j->src = *src;
    j->buf = *buf;
    j->chunk_bytes = chunk_bytes;
    atomic_init(&j->finished, true);
    *out = j;
    return ENGRAM_OK;
}

void engram_gather_job_destroy(engram_gather_job_t *j)
{
    if (j == NULL)
        return;
    free(j->chunk_left);
    free(j);
}

/* The host function of step 2 (runs on CUDA's callback thread: no CUDA
 * calls, nothing that blocks beyond the pool's mutex). */
static void post_job(void *arg)
{
    engram_gather_job_t *j = arg;
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
}

static engram_status_t stream_error(const char *what, const char *err)
{
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "host_gather fetch: %s: %s", what, err);
}

/* Steps 3-4: the chunks' waits and copies, then the scales'. */
static engram_status_t queue_copies(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops, void *stream,
                                    char *rows_dst, uint32_t *scales_dst)
{
    const uint32_t row_bytes = j->src.row_bytes;
    for (uint32_t c = 0; c < j->num_chunks; c++) {
        const uint64_t first = (uint64_t)c * j->chunk_rows;
        const uint64_t rows = j->num_rows - first < j->chunk_rows ? j->num_rows - first : j->chunk_rows;
        const char *err = ops->wait_geq(stream, (const uint32_t *)j->buf.flags_dev + c, 1u);
        if (err != NULL)
            return stream_error("queueing the wait for a chunk", err);
        err = ops->copy(stream, rows_dst + first * row_bytes, j->buf.staging + first * row_bytes, rows * row_bytes);
        if (err != NULL)
            return stream_error("queueing a chunk's copy", err);
    }
    if (j->src.packs == 0)
        return ENGRAM_OK;
    uint64_t elems = j->col_major ? (uint64_t)j->entries_per_token * j->src.packs * engram_scales_col_stride(j->num_tokens)
                                  : (uint64_t)j->num_rows * j->src.packs;
    const char *err = ops->copy(stream, scales_dst, j->buf.scales, elems * sizeof(uint32_t));
    return err == NULL ? ENGRAM_OK : stream_error("queueing the scales' copy", err);
}

engram_status_t engram_gather_job_queue(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops, void *stream,
                                        const int64_t *indices, uint32_t num_tokens, uint32_t entries_per_token,
                                        bool scales_col_major, char *rows_dst, uint32_t *scales_dst)
{
    if (!atomic_load_explicit(&j->finished, memory_order_acquire))
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "host_gather fetch: the slot's last gather is still running");
    const uint64_t num_rows = (uint64_t)num_tokens * entries_per_token;
    if (num_rows > j->buf.max_rows)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "host_gather fetch: %llu rows exceed the slot's %llu",
                            (unsigned long long)num_rows, (unsigned long long)j->buf.max_rows);
    atomic_store_explicit(&j->bad_count, 0, memory_order_relaxed);
    atomic_store_explicit(&j->bad_first, UINT64_MAX, memory_order_relaxed);
    if (num_rows == 0)
        return ENGRAM_OK;
    j->num_rows = (uint32_t)num_rows;
    j->num_tokens = num_tokens;
    j->entries_per_token = entries_per_token;
    j->col_major = scales_col_major;
    j->num_chunks = plan(num_rows, j->src.row_bytes, j->chunk_bytes, &j->task_rows, &j->chunk_rows);
    if (j->num_chunks > j->buf.max_chunks) /* engram_gather_max_chunks bounds every fetch of the slot */
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "host_gather fetch: %u chunks exceed the slot's %u",
                            j->num_chunks, j->buf.max_chunks);
    j->num_tasks = (uint32_t)((num_rows + j->task_rows - 1) / j->task_rows);
    const uint32_t tasks_per_chunk = j->chunk_rows / j->task_rows;
    for (uint32_t c = 0; c < j->num_chunks; c++) {
        uint32_t left = j->num_tasks - c * tasks_per_chunk;
        atomic_store_explicit(&j->chunk_left[c], left < tasks_per_chunk ? left : tasks_per_chunk,
                              memory_order_relaxed);
        j->buf.flags[c] = 0;
    }
    atomic_store_explicit(&j->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&j->abandoned, false, memory_order_relaxed);
    const char *err = ops->copy(stream, j->buf.indices, indices, num_rows * sizeof(*indices));
    if (err != NULL)
        return stream_error("queueing the indices' copy", err);
    /* posted from here on: finished again once the pool has done it */
    atomic_store_explicit(&j->finished, false, memory_order_release);
    err = ops->host_func(stream, post_job, j);
    if (err != NULL) {
        atomic_store_explicit(&j->finished, true, memory_order_release);
        return stream_error("queueing the pool's start", err);
    }
    engram_status_t st = queue_copies(j, ops, stream, rows_dst, scales_dst);
    if (st != ENGRAM_OK)
        engram_gather_job_abandon(j); /* the waits already queued must pass */
    return st;
}

bool engram_gather_job_finished(engram_gather_job_t *j)
{
    return atomic_load_explicit(&j->finished, memory_order_acquire);
}

void engram_gather_job_bad(engram_gather_job_t *j, uint64_t *count, uint64_t *first_row)
{
    *count = atomic_load_explicit(&j->bad_count, memory_order_relaxed);
    *first_row = atomic_load_explicit(&j->bad_first, memory_order_relaxed);
}
