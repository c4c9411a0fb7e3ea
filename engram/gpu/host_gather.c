/* The host-gather jobs: how a fetch is cut into tasks and chunks, and its
 * steps on the fetch's stream and the job's copy stream (design in
 * host_gather.h; the pool that gathers it in host_gather_pool.c). */
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/host_gather_internal.h"
#include "hal/log.h"

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

void engram_gather_job_abandon(engram_gather_job_t *j)
{
    if (j->captured) { /* a replay's: engram_gather_job_uncapture lets it pass */
        engram_gather_job_uncapture(j);
        return;
    }
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
 * fetch's stream (captured: for the pool's taken word, seq + 1), the
 * chunks' waits and copies, the scales' copy, the copied word (captured:
 * none, the join links the streams). */
static engram_status_t queue_copies(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops, bool captured,
                                    char *rows_dst, uint32_t *scales_dst)
{
    void *stream = j->buf.copy_stream;
    const uint32_t row_bytes = j->src.row_bytes;
    const char *err = ops->wait_geq(stream, j->buf.ready_dev, captured ? j->seq + 1 : j->seq);
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
        err = ops->copy(stream, scales_dst, j->buf.scales, engram_gather_scale_bytes(j));
        if (err != NULL)
            return stream_error("queueing the scales' copy", err);
    }
    if (captured)
        return ENGRAM_OK;
    err = ops->write(stream, j->buf.copied_dev, j->seq);
    return err == NULL ? ENGRAM_OK : stream_error("queueing the copy stream's end", err);
}

void engram_gather_job_reset(engram_gather_job_t *j)
{
    atomic_store_explicit(&j->bad_count, 0, memory_order_relaxed);
    atomic_store_explicit(&j->bad_first, UINT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&j->hits, 0, memory_order_relaxed);
    atomic_store_explicit(&j->error, NULL, memory_order_relaxed);
    const uint32_t tasks_per_chunk = j->num_chunks > 0 ? j->chunk_rows / j->task_rows : 0;
    for (uint32_t c = 0; c < j->num_chunks; c++) {
        uint32_t left = j->num_tasks - c * tasks_per_chunk;
        atomic_store_explicit(&j->chunk_left[c], left < tasks_per_chunk ? left : tasks_per_chunk,
                              memory_order_relaxed);
        atomic_store_explicit(&j->chunk_fill[c], 0, memory_order_relaxed);
        __atomic_store_n(&j->buf.flags[c], 0u, __ATOMIC_RELAXED);
    }
    atomic_store_explicit(&j->chunks_queued, 0, memory_order_relaxed);
    atomic_store_explicit(&j->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&j->abandoned, false, memory_order_relaxed);
}

/* What a queued and a captured fetch share: the job's state and
 * arguments checked, the tallies cleared, and (rows > 0) the fetch's
 * shape planned: tasks, chunks (with packed misses, CACHE_CHUNK_SPAN
 * times the rows: each chunk's moves still carry about a chunk's bytes;
 * the moves' fixed cost is per chunk). Refusals change nothing. */
static engram_status_t job_plan(engram_gather_job_t *j, const char *call, const engram_gather_stream_ops_t *ops,
                                uint32_t num_tokens, uint32_t entries_per_token, bool scales_col_major,
                                const void *cache_dev, bool packed, char *rows_dst, uint32_t *scales_dst)
{
    if (!atomic_load_explicit(&j->finished, memory_order_acquire) || j->captured)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "%s: the slot's last gather is still running%s", call,
                            j->captured ? " (its job belongs to a captured fetch)" : "");
    if (cache_dev != NULL && (j->buf.dst_rows == NULL || j->buf.hit_mask == NULL || j->buf.indices_dev == NULL ||
                              j->buf.hit_slots == NULL || j->buf.stage_dev == NULL || j->buf.dst_dev == NULL))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: a cache needs the job's dst_rows, hit_mask, "
                                                "indices_dev, hit_slots, stage_dev and dst_dev", call);
    const uint64_t num_rows = (uint64_t)num_tokens * entries_per_token;
    if (num_rows > j->buf.max_rows)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "%s: %llu rows exceed the slot's %llu", call,
                            (unsigned long long)num_rows, (unsigned long long)j->buf.max_rows);
    uint32_t task_rows = 0, chunk_rows = 0, num_chunks = 0;
    if (num_rows > 0) {
        const uint64_t span = packed ? CACHE_CHUNK_SPAN : 1;
        const uint64_t chunk_bytes = j->chunk_bytes > UINT64_MAX / span ? UINT64_MAX : j->chunk_bytes * span;
        num_chunks = plan(num_rows, j->src.row_bytes, chunk_bytes, TASK_ROWS * span, &task_rows, &chunk_rows);
        if (num_chunks > j->buf.max_chunks) /* engram_gather_max_chunks bounds every fetch of the slot */
            return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "%s: %u chunks exceed the slot's %u", call, num_chunks,
                                j->buf.max_chunks);
    }
    j->num_rows = (uint32_t)num_rows;
    j->num_tokens = num_tokens;
    j->entries_per_token = entries_per_token;
    j->col_major = scales_col_major;
    j->ops = ops;
    j->cache_dev = cache_dev;
    j->rows_dst = rows_dst;
    j->scales_dst = scales_dst;
    j->task_rows = task_rows;
    j->chunk_rows = chunk_rows;
    j->num_chunks = num_chunks;
    j->num_tasks = num_rows > 0 ? (uint32_t)((num_rows + task_rows - 1) / task_rows) : 0;
    engram_gather_job_reset(j);
    return ENGRAM_OK;
}

/* Step 1 (and with a cache the GPU's copy of the indices and the probe),
 * then step 2's write of the job's next seq: on failure the job is
 * abandoned (a join of it passes). */
static engram_status_t queue_start(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops, void *stream,
                                   const int64_t *indices)
{
    const char *what = "queueing the indices' copy";
    const char *err = ops->copy(stream, j->buf.indices, indices, (size_t)j->num_rows * sizeof(*indices));
    if (err == NULL && j->cache_dev != NULL)
        err = ops->copy(stream, j->buf.indices_dev, indices, (size_t)j->num_rows * sizeof(*indices));
    if (err == NULL && j->cache_dev != NULL) {
        what = "queueing the cache's probe";
        err = ops->probe(stream, j->cache_dev, j->buf.indices_dev, j->num_rows, j->buf.hit_slots, j->buf.hit_mask);
    }
    if (err == NULL) {
        j->seq++;
        what = "queueing the pool's start";
        err = ops->write(stream, j->buf.ready_dev, j->seq);
    }
    if (err == NULL)
        return ENGRAM_OK;
    engram_gather_job_abandon(j);
    return stream_error(what, err);
}

engram_status_t engram_gather_job_queue(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops, void *stream,
                                        const int64_t *indices, uint32_t num_tokens, uint32_t entries_per_token,
                                        bool scales_col_major, const void *cache_dev, char *rows_dst,
                                        uint32_t *scales_dst)
{
    engram_status_t st = job_plan(j, "host_gather fetch", ops, num_tokens, entries_per_token, scales_col_major,
                                  cache_dev, cache_dev != NULL, rows_dst, scales_dst);
    if (st != ENGRAM_OK || j->num_rows == 0)
        return st;
    st = queue_start(j, ops, stream, indices);
    if (st != ENGRAM_OK)
        return st;
    /* posted from here on: finished again once the pool has done it */
    atomic_store_explicit(&j->finished, false, memory_order_release);
    engram_gather_pool_post(j);
    if (cache_dev == NULL) {
        st = queue_copies(j, ops, false, rows_dst, scales_dst);
    } else { /* the hits on the fetch's stream, beside the pool's gather of the misses */
        const char *err = ops->hits(stream, cache_dev, j->buf.hit_slots, j->num_rows, j->src.row_bytes, rows_dst);
        if (err != NULL)
            st = stream_error("queueing the cache's hits", err);
    }
    if (st != ENGRAM_OK)
        engram_gather_job_abandon(j); /* the waits already queued must pass */
    return st;
}

engram_status_t engram_gather_job_capture(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops,
                                          void *stream, const int64_t *indices, uint32_t num_tokens,
                                          uint32_t entries_per_token, bool scales_col_major, const void *cache_dev,
                                          char *rows_dst, uint32_t *scales_dst)
{
    if (j->buf.fork_event == NULL || j->buf.join_event == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host_gather capture: the job has no fork and join events");
    engram_status_t st = job_plan(j, "host_gather capture", ops, num_tokens, entries_per_token, scales_col_major,
                                  cache_dev, false, rows_dst, scales_dst);
    if (st != ENGRAM_OK || j->num_rows == 0)
        return st; /* a fetch of no rows captures nothing */
    /* the pool woken from the replay's start, while the indices come */
    const char *what = "queueing the copy stream's fork";
    const char *err = ops->link(stream, j->buf.copy_stream, j->buf.fork_event);
    if (err == NULL && j->pool->host_node) {
        what = "queueing the pool's wake-up";
        err = ops->notify(j->buf.copy_stream, engram_gather_pool_kick, j->pool);
    }
    if (err != NULL)
        return stream_error(what, err);
    st = queue_start(j, ops, stream, indices);
    if (st == ENGRAM_OK) /* the copy stream's reads of the words follow the armed word */
        err = ops->link(stream, j->buf.copy_stream, j->buf.fork_event);
    if (st == ENGRAM_OK && err != NULL) {
        engram_gather_job_abandon(j);
        st = stream_error("queueing the copy stream's fork", err);
    }
    if (st == ENGRAM_OK)
        st = queue_copies(j, ops, true, rows_dst, scales_dst);
    if (st != ENGRAM_OK)
        return st; /* abandoned: the capture fails, nothing was watched */
    engram_gather_pool_watch(j);
    return ENGRAM_OK;
}

void engram_gather_job_uncapture(engram_gather_job_t *j)
{
    if (!j->captured)
        return;
    engram_gather_pool_unwatch(j);
    j->captured = false;
    j->seq++; /* the word holds seq + 1 (taken, or let pass): the next fetch's seq follows it */
}

uint64_t engram_gather_job_replays(engram_gather_job_t *j)
{
    return atomic_load_explicit(&j->replays, memory_order_relaxed);
}

engram_status_t engram_gather_job_join(engram_gather_job_t *j, const engram_gather_stream_ops_t *ops, void *stream)
{
    if (!j->captured) {
        const char *err = ops->wait_geq(stream, j->buf.copied_dev, j->seq);
        return err == NULL ? ENGRAM_OK : stream_error("queueing the wait for the copy stream", err);
    }
    const char *err = ops->link(j->buf.copy_stream, stream, j->buf.join_event);
    if (err != NULL)
        return stream_error("queueing the copy stream's join", err);
    if (j->cache_dev != NULL) /* over the chunks' copies: the cache's rows */
        err = ops->hits(stream, j->cache_dev, j->buf.hit_slots, j->num_rows, j->src.row_bytes, j->rows_dst);
    return err == NULL ? ENGRAM_OK : stream_error("queueing the cache's hits", err);
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
