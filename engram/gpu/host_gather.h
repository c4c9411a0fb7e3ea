/* The host-gather path of GPU tables (gpu_path=host_gather): a pool of the
 * table's threads gathers the rows of a fetch from the node's host shards
 * into pinned staging, and the copy engine moves the staging onto the GPU
 * receive slot. No SM runs: beside a persistent GEMM it costs the GEMM
 * nothing, and it holds its rate on tables far larger than the reach of the
 * GPU's translation of host memory, beyond which the UVA kernel's rate
 * falls to a fraction of PCIe's (gpu_reach.h; engram_gpu_bench --paths
 * uva,host_gather measures both against table size).
 *
 * One fetch, queued on the fetch's stream and on the slot's own copy
 * stream, so the calling thread never blocks and the rows are valid in the
 * fetch stream's order once the fetch is joined:
 *   1. on the fetch's stream, a copy of the indices into the job's pinned
 *      index list;
 *   2. on the fetch's stream, a write of the fetch's seq into the job's
 *      ready word (a stream memory operation on host-mapped memory,
 *      ordered after the copy); the job is on the pool's list from the
 *      call, and the pool begins it when the word holds its seq: no host
 *      function, so neither CUDA's callback thread (shared by every stream
 *      of the process, and slow to wake beside a busy pool) nor its
 *      latency is on the fetch's path;
 *   3. (without a cache; with one, below) on the copy stream, a wait
 *      until the ready word reaches the seq (so the copies follow all the
 *      fetch stream's earlier work, which last read the slot), then per
 *      chunk k: a wait until flags[k] >= 1
 *      (a stream memory operation on host-mapped memory: the GPU's front
 *      end waits, no SM and no host thread), then the chunk's copy from
 *      staging to the receive rows, so the copy engine moves chunk k while
 *      the pool gathers k + 1 ...;
 *   4. on the copy stream, the scales' copy (the pool gathers them with
 *      the rows) behind the last chunk's wait, then a write of the seq
 *      into the job's copied word;
 *   5. the join (engram_gather_job_join): the fetch's stream waits until
 *      the copied word reaches the seq; queued by the fetch itself, or
 *      with ENGRAM_FETCH_ORDER_AT_WAIT by its first test, wait or buffer
 *      query.
 * Between the fetch and a late join the fetch's stream is free: fetches
 * queued back to back on one stream have their indices copied at once, so
 * the pool gathers one while the copy engine moves the one before, instead
 * of idling while the stream drains each fetch's copies before it reaches
 * the next one's indices.
 * The staging has a whole slot's rows, so the pool never waits for the
 * copy engine to free a buffer; chunks only pipeline gather and copy.
 *
 * With a hot-row cache the GPU tells hits from misses, so the pool never
 * probes the cache's index (each probe of a large index is a DRAM miss, as
 * costly as a row's gather): on the fetch's stream, between steps 1 and 2,
 * the indices are copied into GPU memory too (indices_dev) and a probe
 * kernel reads them there and writes each row's cache slot (GPU memory)
 * and a hit bit per row (hit_mask, host memory); after step 2 a kernel
 * copies the hits from the cache's rows, on the fetch's stream while the
 * pool gathers the misses. The pool stages each chunk's misses back to
 * back at the chunk's start with their receive rows beside them
 * (dst_rows), and the pool's thread that ends a chunk queues its move on
 * the copy stream itself, since only then is the chunk's size known: a
 * copy of the staged misses and of their receive rows into GPU memory
 * (stage_dev, dst_dev), then a kernel placing them from there; the thread
 * that queues the last chunk's queues the scales' copy and the copied
 * word. No SM ever reads host memory: a kernel reading pinned host memory
 * beside the pool's gather runs far below PCIe's rate, while the copy
 * engine holds it. Scales of every row come from the pool as without a
 * cache. A pool-side queueing error drains the copy stream, lets the join
 * pass and is the fetch's (engram_gather_job_error).
 *
 * This file is CUDA-free: the stream operations come through
 * engram_gather_stream_ops_t (CUDA's in gpu_host_gather_stream.c, a host fake in
 * the CPU tier's test). */
#ifndef ENGRAM_GPU_HOST_GATHER_H
#define ENGRAM_GPU_HOST_GATHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "engram/plugin/routing.h"
#include "hal/status.h"

/* What a stream can be asked to do, in its order. Each returns NULL, or
 * the text of the error that kept it from being queued (static text). */
typedef struct engram_gather_stream_ops {
    /* Writes value into *flag_dev once the work before it is done. */
    const char *(*write)(void *stream, void *flag_dev, uint32_t value);
    /* Waits until (int32_t)(*flag - value) >= 0 (CUDA's cyclic >=, so a
     * seq may wrap); flag_dev is the flag's device address. */
    const char *(*wait_geq)(void *stream, const void *flag_dev, uint32_t value);
    const char *(*copy)(void *stream, void *dst, const void *src, size_t bytes);
    /* The cache's probe of indices[num_rows] (GPU memory): row r's cache
     * slot, or ENGRAM_HOT_MISS, into slots_dev[r] (GPU memory), and bit
     * r % 32 of hit_mask[r / 32] (host memory the GPU writes, every word
     * of the rows) set for a hit; cache_dev is the cache
     * (engram_gather_job_queue's). */
    const char *(*probe)(void *stream, const void *cache_dev, const int64_t *indices, uint32_t num_rows,
                         uint32_t *slots_dev, uint32_t *hit_mask);
    /* rows_dst[r] = the cache's row slots_dev[r] for each r < num_rows
     * the probe found. */
    const char *(*hits)(void *stream, const void *cache_dev, const uint32_t *slots_dev, uint32_t num_rows,
                        uint32_t row_bytes, char *rows_dst);
    /* The pool's side, with a cache (called from the pool's threads). */
    /* Lets the calling thread queue work for the cache's GPU. */
    const char *(*bind)(const void *cache_dev);
    /* rows_dst[dst_rows[k]] = staged[k] for k < count (all GPU memory). */
    const char *(*place)(void *stream, const void *cache_dev, const char *staged, const uint32_t *dst_rows,
                         uint32_t count, uint32_t row_bytes, char *rows_dst);
    /* Returns once the stream has done all its work. */
    const char *(*drain)(void *stream);
    /* Work queued on `to` from now on follows the work queued on `from`
     * so far (`event` recorded on from, waited for on to); under capture
     * an edge of the graph, which also draws `to` into the capture. */
    const char *(*link)(void *from, void *to, void *event);
    /* fn(arg) on a host thread once the work before it is done (CUDA's
     * host function: it must make no CUDA call). */
    const char *(*notify)(void *stream, void (*fn)(void *), void *arg);
} engram_gather_stream_ops_t;

/* Where a table's rows are, for the pool: the routing of engram/plugin/routing.h over
 * the node's shards mapped back to back (the GPU kernel's addressing). */
typedef struct engram_gather_source {
    engram_route_shape_t shape;
    const char *span;       /* host address of routed peer first_peer's rows */
    uint64_t peer_stride;   /* span bytes per routed peer: rank_stride (direct), 0 (hybrid) */
    uint32_t first_peer;
    uint32_t local_peers;   /* rows of other routed peers are not this path's (another one fills them) */
    bool other_peers;       /* there are such rows: the pool stages none of them, only their scales */
    uint32_t row_bytes;
    const uint32_t *scales; /* host, replicated [total_entries][packs]; NULL when packs == 0 */
    uint32_t packs;
} engram_gather_source_t;

/* Row idx's address in the span, or NULL: *in_table false for an index
 * outside the table, true for a row of another node (not this path's). */
static inline const char *engram_gather_source_row(const engram_gather_source_t *s, int64_t idx, bool *in_table)
{
    engram_route_t r;
    *in_table = engram_route_index(&s->shape, idx, &r);
    if (!*in_table || r.peer - s->first_peer >= s->local_peers)
        return NULL;
    return s->span + (uint64_t)(r.peer - s->first_peer) * s->peer_stride + r.src_off;
}

typedef struct engram_gather_pool engram_gather_pool_t;
typedef struct engram_gather_job engram_gather_job_t;

/* Starts `threads` threads (1..1024), each bound to the CPUs of NUMA node
 * `numa_node` where the machine says which they are (-1: unbound). */
engram_status_t engram_gather_pool_create(int threads, int numa_node, engram_gather_pool_t **out);
/* Stops and joins the threads. Every job must be finished or abandoned
 * (engram_gather_job_abandon lets a posted job finish: the pool runs past
 * it). */
void engram_gather_pool_destroy(engram_gather_pool_t *pool);
int engram_gather_pool_threads(const engram_gather_pool_t *pool);

/* The default pool size for a shard on `numa_node` (-1: any) shared by
 * `local_ranks` ranks: that node's CPUs over the ranks, less one, at
 * least 1. */
int engram_gather_default_threads(int numa_node, int local_ranks);

/* A fetch is cut into chunks of at most chunk_bytes (a row at least), and
 * into 8 at least where its rows allow, so that small fetches pipeline
 * too. This is the most chunks any fetch of up to max_rows rows of
 * row_bytes has: the flags a slot needs. */
uint32_t engram_gather_max_chunks(uint64_t max_rows, uint32_t row_bytes, uint64_t chunk_bytes);

/* Memory one job (one receive slot) works in, all host memory the GPU can
 * reach, owned by the caller. flags_dev is the device address of flags. */
typedef struct engram_gather_buffers {
    int64_t *indices;        /* [max_rows] */
    char *staging;           /* [max_rows][row_bytes] */
    uint32_t *scales;        /* [max scale elems], NULL when packs == 0 */
    uint32_t *flags;         /* [max_chunks] */
    const void *flags_dev;
    uint32_t *ready;         /* the job's ready word (step 2), and its device address */
    void *ready_dev;
    uint32_t *copied;        /* the job's copied word (step 4), and its device address */
    void *copied_dev;
    void *copy_stream;       /* steps 3-4's stream, the job's own */
    /* with a cache (NULL without): */
    uint32_t *dst_rows;      /* [max_rows]: a staged row's receive row */
    uint32_t *hit_mask;      /* [(max_rows + 31) / 32]: the probe's hit bits */
    int64_t *indices_dev;    /* [max_rows], GPU memory: the indices the probe reads */
    uint32_t *hit_slots;     /* [max_rows], GPU memory: the probe's cache slots */
    char *stage_dev;         /* [max_rows][row_bytes], GPU memory: staged misses, moved */
    uint32_t *dst_dev;       /* [max_rows], GPU memory: their receive rows, moved */
    /* for a captured fetch (NULL: capture refused): the copy stream's
     * fork from the fetch's stream, and its join back */
    void *fork_event, *join_event;
    uint64_t max_rows;
    uint32_t max_chunks;     /* engram_gather_max_chunks(max_rows, ...) */
} engram_gather_buffers_t;

engram_status_t engram_gather_job_create(engram_gather_pool_t *pool, const engram_gather_source_t *src,
                                         const engram_gather_buffers_t *buf, uint64_t chunk_bytes,
                                         engram_gather_job_t **out);
void engram_gather_job_destroy(engram_gather_job_t *job);

/* One fetch's rows and scales into rows_dst / scales_dst (device), steps
 * 1-4 above, queued on `stream` and the job's copy stream; indices is the
 * fetch's index list wherever the stream's copy can read it; cache_dev
 * NULL, or the hot-row cache as ops->probe, hits and place take it (the
 * job's buffers then have the cache's members; the pool calls ops, which
 * must outlive the fetch). The job must be idle (its last fetch finished,
 * engram_gather_job_finished). A call refused
 * for its arguments or the job's state queues nothing; on a stream error
 * nothing more is queued and the job is abandoned (the waits already
 * queued let both streams pass). */
engram_status_t engram_gather_job_queue(engram_gather_job_t *job, const engram_gather_stream_ops_t *ops, void *stream,
                                        const int64_t *indices, uint32_t num_tokens, uint32_t entries_per_token,
                                        bool scales_col_major, const void *cache_dev, char *rows_dst,
                                        uint32_t *scales_dst);
/* Step 5: work queued on `stream` from now on follows the job's last
 * fetch's copies (a captured fetch's: the copy stream's join, then with a
 * cache the hits, below). */
engram_status_t engram_gather_job_join(engram_gather_job_t *job, const engram_gather_stream_ops_t *ops, void *stream);

/* A fetch captured into a CUDA graph (`stream` is capturing): each replay
 * of the graph is a whole fetch, with no call of the caller and none of
 * its threads. Its arguments are engram_gather_job_queue's; the indices
 * are read at each replay from where they are at capture, the shape is
 * fixed. The job then belongs to the graph until
 * engram_gather_job_uncapture; the pool watches its ready word. The
 * replay protocol, values fixed at capture (seq: the job's next):
 *   the graph, on the copy stream forked from the fetch's stream at the
 *     replay's start: a host function that wakes the pool's threads
 *     (unless the pool is set to watch only), so they poll while the
 *     indices come; without it (or should it come late) the pool's
 *     watcher looks every watch period;
 *   the graph, on the fetch's stream: the indices' copy into the job's
 *     pinned list (with a cache: into GPU memory too and the probe), then
 *     ready = seq (armed); the copy stream follows from there too;
 *   the pool, watching the word: once it reads seq (and the job's last
 *     replay is done), resets the chunk flags and the tallies, then
 *     ready = seq + 1 (taken), and gathers as for any fetch, flagging
 *     each chunk; a cache's hits are not gathered (their scales are);
 *   the graph, on the copy stream: a wait until ready reaches seq + 1
 *     (so no flag of the last replay is read), then per chunk its wait
 *     and copy, the scales' copy; the join (engram_gather_job_join)
 *     links the copy stream back to the fetch's stream, and with a cache
 *     the hits kernel follows, writing the cache's rows over what the
 *     chunks' copies wrote there.
 * Every flag and word is reset by the pool before it is read again, and
 * a replay waits only for words of its own: back-to-back replays, replays
 * of graphs of other jobs, and fetches queued on other jobs meanwhile all
 * hold. The last replay's bad-index tally (engram_gather_job_bad) is final
 * once the replay is (the pool adds it before the last flag). A capture
 * refused for its arguments queues nothing; a stream error abandons the
 * job (the caller then fails the capture). */
engram_status_t engram_gather_job_capture(engram_gather_job_t *job, const engram_gather_stream_ops_t *ops,
                                          void *stream, const int64_t *indices, uint32_t num_tokens,
                                          uint32_t entries_per_token, bool scales_col_major, const void *cache_dev,
                                          char *rows_dst, uint32_t *scales_dst);
/* Ends a captured fetch: the pool stops watching the job; a replay armed
 * and not begun is let pass (its rows undefined); returns once the pool
 * holds the job no more, which is then idle for engram_gather_job_queue.
 * Every replay launched must have armed the word by then (the GPU path
 * synchronizes the device first): one that arms it later would wait for
 * a pool that no longer watches. A job not captured: no-op. */
void engram_gather_job_uncapture(engram_gather_job_t *job);
/* Replays of the job's captured fetch the pool has begun. */
uint64_t engram_gather_job_replays(engram_gather_job_t *job);
/* How a captured fetch's replay wakes the pool: the watcher, an idle
 * pool's thread, looks at the ready words of captured fetches every
 * watch_ns (1 us .. 10 ms) once the pool has been idle a while; with
 * host_node, each replay also wakes the pool by a host function at its
 * start (set before the capture: it is part of the graph). Without it a
 * replay's wait for the pool is up to about watch_ns; an idle pool with
 * captured fetches costs one wake-up of one thread per watch_ns. */
engram_status_t engram_gather_pool_set_wake(engram_gather_pool_t *pool, int64_t watch_ns, bool host_node);
/* The host function a replay's host node runs (host_node above). */
void engram_gather_pool_kick(void *pool);
/* True once the pool has done all of the job's last fetch (every chunk
 * flagged, the tally final) and holds the job no more. */
bool engram_gather_job_finished(engram_gather_job_t *job);
/* The last fetch's bad-index tally (valid once finished): rows with an
 * index outside the table, zero-filled, and the lowest such row. */
void engram_gather_job_bad(engram_gather_job_t *job, uint64_t *count, uint64_t *first_row);
/* The last fetch's rows the cache served (valid once finished). */
uint64_t engram_gather_job_hits(engram_gather_job_t *job);
/* The error that kept the pool from queueing the last fetch's moves (a
 * cache's), or NULL (valid once finished); its rows are then undefined. */
const char *engram_gather_job_error(engram_gather_job_t *job);
/* Lets a stream that waits on the job pass: every flag and word set, the job not
 * gathered (if the pool has not begun it) or left as the pool ends it.
 * For destroy and failed queues; rows of an abandoned fetch are undefined. */
void engram_gather_job_abandon(engram_gather_job_t *job);

#endif
