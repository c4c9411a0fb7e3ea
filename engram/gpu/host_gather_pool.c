/* The host-gather pool: threads bound to the shard's NUMA node that run
 * each posted job's tasks once its stream has reached it, gathering rows
 * into staging and flagging (or, with a cache, queueing the moves of) each
 * chunk as it ends (design in host_gather.h). */
#include <sched.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engram/gpu/host_gather_internal.h"
#include "engram/plugin/deadline.h"
#include "hal/log.h"
#include "memory/numa_sys.h"

/* How long an idle thread polls for the next job before it sleeps: back to
 * back fetches find it awake, an idle table costs no CPU. */
#define IDLE_SPIN_NS 200000
/* How often a job posted but not reached by its stream is looked at once
 * it has waited IDLE_SPIN_NS. */
#define POLL_SLEEP_NS 20000
/* The watcher's sleep between looks at captured jobs' words, unless set
 * (engram_gather_pool_set_wake), and its bounds. */
#define WATCH_DEFAULT_NS 1000000
#define WATCH_MIN_NS 1000
#define WATCH_MAX_NS 10000000
/* The pool's threads sleep this close to what they ask (the kernel's
 * default slack would add tens of microseconds to every poll). */
#define TIMER_SLACK_NS 1000

int engram_gather_default_threads(int numa_node, int local_ranks)
{
    cpu_set_t set;
    long cpus = engram_numa_node_cpus(numa_node, &set);
    if (cpus <= 0)
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long n = (cpus > 0 ? cpus : 1) / (local_ranks > 0 ? local_ranks : 1) - 1;
    return n < 1 ? 1 : (n > MAX_THREADS ? MAX_THREADS : (int)n);
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
    if (ok && src == NULL) { /* another node's row: its transport fills it, the scales are replicated */
        if (s->packs > 0)
            put_scales(j, row, idx, true);
        return;
    }
    if (ok)
        memcpy(dst, src, s->row_bytes);
    else
        memset(dst, 0, s->row_bytes);
    if (!ok && (*bad)++ == 0)
        *first_bad = row;
    if (s->packs > 0)
        put_scales(j, row, idx, ok);
}

/* Whether row `row` is another path's (a row of another node). */
static bool other_peers_row(const engram_gather_job_t *j, uint32_t row)
{
    bool in_table;
    return engram_gather_source_row(&j->src, j->buf.indices[row], &in_table) == NULL && in_table;
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
        err = ops->copy(stream, j->scales_dst, j->buf.scales, engram_gather_scale_bytes(j));
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
        } else if (j->src.other_peers && other_peers_row(j, r)) {
            if (j->src.packs > 0) /* its row comes by the other path; its scales are replicated */
                put_scales(j, r, j->buf.indices[r], true);
        } else {
            rows[m++] = r;
        }
    }
    /* With a cache, outside a graph, the misses are staged together at
     * the chunk's next free rows; a captured fetch's rows are staged in
     * place (its chunks' copies are fixed at capture). */
    const bool packed = j->cache_dev != NULL && !j->captured;
    if (packed)
        at = (uint64_t)chunk * j->chunk_rows +
             atomic_fetch_add_explicit(&j->chunk_fill[chunk], m, memory_order_relaxed);
    for (uint32_t i = 0; i < m && i < PREFETCH_ROWS; i++)
        prefetch_row(j, rows[i]);
    for (uint32_t i = 0; i < m; i++) {
        if (i + PREFETCH_ROWS < m)
            prefetch_row(j, rows[i + PREFETCH_ROWS]);
        if (packed)
            j->buf.dst_rows[at + i] = rows[i];
        gather_row(j, rows[i], packed ? at + i : rows[i], &bad, &first_bad);
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
    if (!packed) {
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

/* A captured job its graph has armed (its ready word holds its seq),
 * its last replay done, begun: its counts reset, then the word set to
 * seq + 1, which lets the graph's copy stream read its flags (pool->mu). */
static engram_gather_job_t *begin_watched(engram_gather_pool_t *p)
{
    for (engram_gather_job_t *j = p->watched; j != NULL; j = j->watch_next) {
        if (__atomic_load_n(j->buf.ready, __ATOMIC_ACQUIRE) != j->seq ||
            !atomic_load_explicit(&j->finished, memory_order_acquire))
            continue;
        engram_gather_job_reset(j);
        atomic_store_explicit(&j->finished, false, memory_order_relaxed);
        atomic_fetch_add_explicit(&j->replays, 1, memory_order_relaxed);
        __atomic_store_n(j->buf.ready, j->seq + 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&p->cv); /* the sleeping threads join it */
        return j;
    }
    return NULL;
}

/* The job a worker joins, under pool->mu; NULL once stopping. Jobs are
 * begun as their streams reach them, not in the order they were posted, so
 * one stream waiting on another's fetch never holds the pool. Idle, every
 * thread polls for IDLE_SPIN_NS; then a job posted and not yet reached is
 * polled every POLL_SLEEP_NS by all, captured jobs' words every watch_ns
 * by one thread (the watcher), and the others sleep until a post, a
 * watch or a begun job wakes them. */
static engram_gather_job_t *take_job(engram_gather_pool_t *p)
{
    int64_t idle_since = engram_now_ns();
    unsigned long long news = atomic_load_explicit(&p->kicks, memory_order_relaxed) + atomic_load(&p->posts);
    bool watcher = false;
    for (;;) {
        /* a post, or a replay's host function: poll again while its stream
         * comes to its word */
        const unsigned long long n = atomic_load_explicit(&p->kicks, memory_order_relaxed) + atomic_load(&p->posts);
        if (n != news) {
            news = n;
            idle_since = engram_now_ns();
        }
        if (!p->stop && p->current == NULL)
            p->current = unlink_ready(p);
        if (!p->stop && p->current == NULL)
            p->current = begin_watched(p);
        if (watcher && (p->stop || p->current != NULL || p->watched == NULL)) {
            p->watcher = false;
            watcher = false;
        }
        if (p->stop)
            return NULL;
        if (p->current != NULL) {
            p->current->workers++;
            return p->current;
        }
        const bool posted = p->head != NULL; /* posted, not ready: its stream writes the word, nothing signals */
        const bool watching = p->watched != NULL;
        const unsigned long long seen = atomic_load(&p->posts);
        const int64_t watch_ns = p->watch_ns;
        pthread_mutex_unlock(&p->mu);
        const int64_t now = engram_now_ns();
        const bool spinning = now - idle_since < IDLE_SPIN_NS;
        if (spinning && (posted || watching))
            sched_yield();
        else if (posted)
            nanosleep(&(struct timespec){.tv_nsec = POLL_SLEEP_NS}, NULL); /* a stream held up long */
        else if (watcher)
            nanosleep(&(struct timespec){.tv_sec = watch_ns / 1000000000, .tv_nsec = watch_ns % 1000000000}, NULL);
        else if (spinning)
            while (atomic_load_explicit(&p->posts, memory_order_relaxed) == seen &&
                   engram_now_ns() < idle_since + IDLE_SPIN_NS)
                sched_yield();
        pthread_mutex_lock(&p->mu);
        if (p->stop || p->head != NULL || atomic_load(&p->posts) != seen || watcher ||
            engram_now_ns() - idle_since < IDLE_SPIN_NS)
            continue;
        if (p->watched != NULL && !p->watcher) {
            p->watcher = watcher = true;
            continue;
        }
        pthread_cond_wait(&p->cv, &p->mu);
    }
}

static void *worker(void *arg)
{
    engram_gather_pool_t *p = arg;
    (void)prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0); /* a hint: polls merely wake later without it */
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
    p->watch_ns = WATCH_DEFAULT_NS;
    p->host_node = true;
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

/* Begun once the stream has written its seq (job_ready). */
void engram_gather_pool_post(engram_gather_job_t *j)
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

void engram_gather_pool_watch(engram_gather_job_t *j)
{
    engram_gather_pool_t *p = j->pool;
    pthread_mutex_lock(&p->mu);
    j->captured = true;
    j->watch_next = p->watched;
    p->watched = j;
    pthread_cond_broadcast(&p->cv); /* a sleeping thread becomes the watcher */
    pthread_mutex_unlock(&p->mu);
}

void engram_gather_pool_unwatch(engram_gather_job_t *j)
{
    engram_gather_pool_t *p = j->pool;
    pthread_mutex_lock(&p->mu);
    for (engram_gather_job_t **at = &p->watched; *at != NULL; at = &(*at)->watch_next)
        if (*at == j) {
            *at = j->watch_next;
            break;
        }
    j->watch_next = NULL;
    /* Armed and not begun: its replay must not wait for a pool that no
     * longer looks; it passes with its rows undefined. */
    if (__atomic_load_n(j->buf.ready, __ATOMIC_ACQUIRE) == j->seq &&
        atomic_load_explicit(&j->finished, memory_order_acquire)) {
        for (uint32_t c = 0; c < j->buf.max_chunks; c++)
            __atomic_store_n(&j->buf.flags[c], 1u, __ATOMIC_RELEASE);
        __atomic_store_n(j->buf.ready, j->seq + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&p->mu);
    while (!atomic_load_explicit(&j->finished, memory_order_acquire))
        sched_yield(); /* a replay begun ends in its fetch's time */
}

engram_status_t engram_gather_pool_set_wake(engram_gather_pool_t *p, int64_t ns, bool host_node)
{
    if (p == NULL || ns < WATCH_MIN_NS || ns > WATCH_MAX_NS)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host_gather pool: a watch period of %lld ns is outside %d..%d",
                            (long long)ns, WATCH_MIN_NS, WATCH_MAX_NS);
    pthread_mutex_lock(&p->mu);
    p->watch_ns = ns;
    p->host_node = host_node;
    pthread_mutex_unlock(&p->mu);
    return ENGRAM_OK;
}

void engram_gather_pool_kick(void *arg)
{
    engram_gather_pool_t *p = arg;
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->kicks, 1, memory_order_relaxed);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}
