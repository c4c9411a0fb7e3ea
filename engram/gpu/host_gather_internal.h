/* The host-gather pool's and jobs' state, shared by host_gather.c (a
 * job's plan and its stream side) and host_gather_pool.c (the threads that
 * gather it); design in host_gather.h. */
#ifndef ENGRAM_GPU_HOST_GATHER_INTERNAL_H
#define ENGRAM_GPU_HOST_GATHER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "engram/gpu/host_gather.h"

enum {
    /* Rows a thread claims at once: few enough that a chunk's rows are
     * spread over every thread, enough that claiming costs nothing. */
    TASK_ROWS = 32,
    /* Rows ahead whose sources are prefetched: random rows are DRAM misses
     * (and TLB misses on 4 KiB pages), so a thread keeps several in flight
     * (into every cache level; engram_gpu_bench --paths host_gather
     * measures the gather). */
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
    /* captured (engram_gather_job_capture): armed at seq, taken at seq + 1 */
    bool captured;                   /* pool->mu while watched */
    engram_gather_job_t *watch_next; /* the pool's watched list (pool->mu) */
    atomic_ullong replays;
};

struct engram_gather_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    engram_gather_job_t *head, *tail; /* posted, not yet begun */
    engram_gather_job_t *current;     /* the job new workers join */
    atomic_ullong posts;              /* jobs posted so far: what idle threads poll */
    engram_gather_job_t *watched;     /* captured jobs, begun when their graph arms them */
    bool watcher;                     /* an idle thread watches their words (the others sleep) */
    int64_t watch_ns;                 /* its sleep between looks */
    bool host_node;                   /* replays wake the pool by a host function */
    atomic_ullong kicks;              /* host functions run: the threads poll again */
    bool stop;
    int num_threads, started;
    int numa_node;
    pthread_t *threads;
};

/* The bytes of the fetch's scales, in its layout. */
static inline size_t engram_gather_scale_bytes(const engram_gather_job_t *j)
{
    uint64_t elems = j->col_major
                         ? (uint64_t)j->entries_per_token * j->src.packs * engram_scales_col_stride(j->num_tokens)
                         : (uint64_t)j->num_rows * j->src.packs;
    return (size_t)(elems * sizeof(uint32_t));
}

/* Step 2's other half (host_gather_pool.c): the job on the pool's list,
 * begun once the stream has written its seq. */
void engram_gather_pool_post(engram_gather_job_t *j);
/* A captured job on the pool's watched list, and off it (host_gather_pool.c). */
void engram_gather_pool_watch(engram_gather_job_t *j);
void engram_gather_pool_unwatch(engram_gather_job_t *j);
/* The job's chunk counts, flags and tallies set for a fetch of its shape:
 * before it is posted, or begun again (a captured job). */
void engram_gather_job_reset(engram_gather_job_t *j);

#endif
