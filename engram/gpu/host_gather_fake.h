/* A host fake of the CUDA stream operations the host-gather jobs queue
 * (engram_gather_stream_ops_t): each fake stream is a thread running its
 * queued flag writes, flag waits, copies, event records and waits and the
 * cache's kernels in order; a stream may record instead (a capture) into a
 * fake graph, which a replay pushes onto the streams again. Also a table
 * laid out as the GPU path's span, a slot's buffers and job, a hot-row
 * cache, and checks of a fetch's rows, scales and tally. For the CPU tier's
 * host_gather tests. */
#ifndef ENGRAM_GPU_HOST_GATHER_FAKE_H
#define ENGRAM_GPU_HOST_GATHER_FAKE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "engram/gpu/host_gather.h"
#include "engram/gpu/hot_select.h"

enum { OP_WRITE, OP_WAIT, OP_COPY, OP_PROBE, OP_HITS, OP_PLACE, OP_RECORD, OP_WAIT_EVENT, OP_NOTIFY, OP_QUIT };
/* An event: records pushed so far, and the last one run. */
typedef struct fake_event {
    atomic_uint pushed, done;
} fake_event_t;
typedef struct op {
    int kind;
    const uint32_t *flag;
    uint32_t value;
    void *dst;
    const void *src;
    size_t bytes;
    const void *cache;        /* OP_PROBE, OP_HITS */
    const int64_t *indices;   /* OP_PROBE */
    uint32_t *slots, *mask;   /* OP_PROBE writes them, OP_HITS reads slots */
    const uint32_t *dst_rows; /* OP_PLACE */
    uint32_t count, row_bytes; /* OP_PROBE, OP_HITS, OP_PLACE: rows */
    struct fake_event *event;  /* OP_RECORD, OP_WAIT_EVENT */
    void (*fn)(void *);        /* OP_NOTIFY */
    void *arg;
    struct op *next;
} op_t;

/* The "GPU's" cache: the index and the rows it holds. */
typedef struct fake_cache {
    engram_hot_hash_t hash;
    const char *rows; /* [slot][row_bytes] */
} fake_cache_t;

typedef struct fake_stream {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    op_t *head, *tail;
    int pending;
    int fail_at; /* the n-th queued op (1-based) fails; 0: none */
    int queued;
    int copies;  /* copies run */
    uint64_t placed, hit_rows; /* rows the place ops moved, and the hits op served */
    int notified;              /* host functions run */
    pthread_t thread;
    struct fake_graph *rec; /* capturing: pushes are recorded into it */
} fake_stream_t;

/* A captured graph: the ops recorded, each with its stream, in order. */
typedef struct fake_graph {
    struct fake_graph_op {
        fake_stream_t *stream;
        op_t op;
    } *ops;
    size_t n, cap;
    fake_stream_t *streams[8]; /* drawn into the capture */
    int num_streams;
} fake_graph_t;

typedef struct shape {
    uint32_t ranks, scaleup; /* local ranks of this node; scaleup > 1: hybrid */
    uint64_t entries_per_rank;
    uint32_t row_bytes, packs;
    uint32_t first_peer, local_peers;
    uint64_t max_rows, chunk_bytes;
} shape_t;

typedef struct table {
    shape_t sh;
    uint64_t row_stride, rank_stride;
    char *span;
    uint32_t *scales;
    engram_gather_source_t src;
} table_t;

typedef struct slot {
    engram_gather_buffers_t buf;
    engram_gather_job_t *job;
    char *rows;      /* the "GPU" receive rows */
    uint32_t *scales_out;
    uint32_t *ready; /* the job's ready word */
    uint32_t *copied;
    fake_stream_t copy; /* the job's copy stream */
} slot_t;

/* A table, a pool, a stream and one slot: what most tests start from. */
typedef struct fixture {
    table_t t;
    engram_gather_pool_t *pool;
    fake_stream_t st;
    slot_t s;
} fixture_t;

/* A hot-row cache of every `every`-th row of the table (from row 1). */
typedef struct cache {
    fake_cache_t dev;
    int64_t *keys;
    uint32_t *vals;
    char *rows;
} cache_t;

extern const engram_gather_stream_ops_t fake_ops;
extern atomic_bool fail_bind; /* the pool's bind fails */
extern uint64_t rng;

const char *fake_write(void *stream, void *flag_dev, uint32_t value);
const char *fake_wait(void *stream, const void *flag_dev, uint32_t value);
const char *fake_copy(void *stream, void *dst, const void *src, size_t bytes);
const char *fake_probe(void *stream, const void *cache_dev, const int64_t *indices, uint32_t num_rows,
                              uint32_t *slots_dev, uint32_t *hit_mask);
const char *fake_hits(void *stream, const void *cache_dev, const uint32_t *slots_dev, uint32_t num_rows,
                             uint32_t row_bytes, char *rows_dst);
const char *fake_bind(const void *cache_dev);
const char *fake_place(void *stream, const void *cache_dev, const char *staged, const uint32_t *dst_rows,
                              uint32_t count, uint32_t row_bytes, char *rows_dst);
const char *fake_drain(void *stream);
void stream_start(fake_stream_t *s);
void stream_sync(fake_stream_t *s);
void stream_stop(fake_stream_t *s);
unsigned char byte_of(uint64_t idx, uint32_t b);
uint32_t scale_of(uint64_t idx, uint32_t k);
void table_make(table_t *t, shape_t sh);
void table_free(table_t *t);
uint64_t max_scale_elems(const shape_t *sh, uint32_t max_tokens, uint32_t ept);
void slot_make(slot_t *s, engram_gather_pool_t *pool, const table_t *t, uint32_t max_tokens, uint32_t ept);
void slot_free(slot_t *s);
void wait_finished(slot_t *s);
void fixture_open(fixture_t *fx, shape_t sh, int threads, uint32_t max_tokens, uint32_t ept);
void fixture_close(fixture_t *fx);
void join_sync(slot_t *s, fake_stream_t *st);
void check_fetch(const table_t *t, slot_t *s, const int64_t *idx, uint32_t tokens, uint32_t ept, bool col);
uint64_t next_rand(void);
void cache_make(cache_t *c, const table_t *t, uint64_t every);
void cache_free(cache_t *c);
void run_fetch_of(const table_t *t, slot_t *s, fake_stream_t *st, const int64_t *idx, uint32_t tokens,
                         uint32_t ept, bool col, const cache_t *cache);
void run_fetch_cached(const table_t *t, slot_t *s, fake_stream_t *st, uint32_t tokens, uint32_t ept, bool col,
                             bool bad, const cache_t *cache);
void run_fetch(const table_t *t, slot_t *s, fake_stream_t *st, uint32_t tokens, uint32_t ept, bool col,
                      bool bad);
/* Capture: pushes on s (and on every stream a link draws in) are recorded
 * into g until fake_graph_end; a replay pushes them onto their streams. */
void fake_graph_begin(fake_graph_t *g, fake_stream_t *s);
void fake_graph_end(fake_graph_t *g);
void fake_graph_replay(const fake_graph_t *g);
void fake_graph_free(fake_graph_t *g);
const char *fake_link(void *from, void *to, void *event);
const char *fake_notify(void *stream, void (*fn)(void *), void *arg);

#endif
