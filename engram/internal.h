/* Engram layer internals shared by context.c, table.c, fetch.c. */
#ifndef ENGRAM_ENGRAM_INTERNAL_H
#define ENGRAM_ENGRAM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include "engram/dedup.h"
#include "engram/engram.h"
#include "engram/plugin/routing.h"
#include "hal/config_keys.h"
#include "engram/plugin/transport.h"

struct engram_context {
    engram_config_t cfg;
    engram_group_t *group;
    const engram_transport_ops_t *ops;
    engram_transport_t *transport;
    engram_transport_caps_t caps;
    int num_queues;
    /* Gets per (queue, peer) between doorbells: flush_depth, at most
     * caps.max_outstanding (context.c's doorbell_depth). */
    uint32_t flush_depth;
    int live_tables;
    int progress_regions; /* symmetric regions whose gets need their owner's CPU */
};

/* A fetch slot's state. LIVE: taken by a fetch not yet released, by
 * compare-and-swap from FREE so threads fetching on separate queues share
 * the table's slots. RETIRED: released while its gets may still land
 * (after a timeout); taken again only once they are known complete
 * (engram_fetch_begin), or freed with the table. ORDERED (GPU tables):
 * released in stream order while its GPU work may still run; taken again
 * by a fetch on the same stream, or by any once that work is seen
 * complete (engram/gpu/released.h). */
enum { ENGRAM_SLOT_FREE = 0, ENGRAM_SLOT_LIVE, ENGRAM_SLOT_RETIRED, ENGRAM_SLOT_ORDERED };

typedef struct engram_fetch_slot engram_fetch_slot_t;

/* One receive slot and the state of the fetch in it. The public
 * engram_fetch_t * handles name a slot and a generation (fetch_handle.h).
 * Every field but state belongs to the thread that holds the slot. */
struct engram_fetch_slot {
    engram_table_t *table;
    atomic_int state;
    uint32_t handle_record; /* fetch_handle.c's record + 1; 0 = none */
    bool completed;  /* every flush request has completed */
    bool timed_out;  /* a wait gave up on it: release retires it at once */
    bool polled;     /* a test has seen it in flight (recv=CUDA: later tests also ask CUDA for a fault) */
    bool captured;   /* recv=CUDA: issued into a CUDA graph being captured (its work runs at replays) */
    engram_status_t status; /* first error seen, sticky */
    uint32_t num_tokens;
    unsigned flags;
    int first_queue, num_queues; /* the queues this fetch issues on */
    void *rows;      /* this slot's receive rows */
    uint32_t *scales_out; /* this slot's scales */
    uint32_t *counters;        /* [queues][peers] requests issued this fetch */
    engram_request_t **reqs;   /* flush requests still to complete */
    int num_reqs;
    uint64_t bad_count;
    uint64_t cache_hits;       /* rows the GPU's hot-row cache served (GPU tables) */
    uint32_t first_bad_token, first_bad_entry;
    engram_dedup_t *dedup;     /* the slot's dedup state; NULL when dedup=off */
    engram_dedup_t *deduping;  /* this fetch's: dedup, or NULL when it reads every row */
};

/* The largest byte count of one table buffer, and of all of them: 2^47, the
 * user address space of x86-64 and aarch64 (48-bit VA). Larger sizes
 * cannot be allocated whatever the memory, so they are refused as
 * ENGRAM_ERR_OVERFLOW before any allocation. */
#define ENGRAM_MAX_BYTES_LOG2 47
#define ENGRAM_MAX_BYTES ((uint64_t)1 << ENGRAM_MAX_BYTES_LOG2)

/* A table's sizes (table_sizes.c), each and all together at most the
 * limit they were checked against. */
typedef struct engram_table_sizes {
    uint64_t row_stride;     /* bytes between shard rows: row_bytes rounded up to ENGRAM_ROW_ALIGN */
    uint64_t shard_bytes;    /* entries_per_rank * row_stride */
    uint64_t total_entries;  /* ranks * entries_per_rank, <= INT64_MAX */
    uint64_t slot_rows;      /* max_tokens * entries_per_token */
    uint64_t slot_row_bytes; /* slot_rows * row_bytes (rows land unpadded) */
    uint64_t recv_bytes;     /* slot_row_bytes * fetch_slots */
    uint64_t slot_scale_elems;  /* scale packs per slot, room for the column-major padding; 0 without scales */
    uint64_t scales_recv_bytes;  /* slot_scale_elems * 4 * fetch_slots */
    uint64_t scales_bytes;   /* total_entries * scale_packs * 4: the replicated scales */
} engram_table_sizes_t;

/* Every size of a table of params on `ranks` ranks (`local_ranks` per
 * node) with `slots` fetch slots; ENGRAM_ERR_OVERFLOW naming the params
 * when one, or their sum, passes limit_bytes (at most ENGRAM_MAX_BYTES). */
engram_status_t engram_table_sizes(const engram_table_params_t *p, uint64_t ranks, uint64_t local_ranks,
                                   uint64_t slots, uint64_t limit_bytes, engram_table_sizes_t *out);
/* This machine's physical memory (at most ENGRAM_MAX_BYTES): a host
 * table's buffers are all written (the shard by engram_write, the slots by
 * fetches), so more than this cannot work and is refused up front rather
 * than met by an allocation that succeeds lazily or aborts a sanitizer. */
uint64_t engram_host_memory_bytes(void);

struct engram_table {
    engram_context_t *ctx;
    engram_table_params_t params;
    engram_route_shape_t shape;
    int num_peers;
    engram_table_sizes_t sizes;
    engram_segment_t *shard;
    engram_region_t *shard_region; /* the shard as the transport reads it (GPU tables: a host mirror) */
    uint32_t shard_flags;          /* ENGRAM_REGION_* of the shard's region (owner progress) */
    engram_segment_t *recv;
    engram_region_t *recv_region;  /* where gets land (GPU tables: the host staging) */
    uint32_t *scales; /* replicated global scales, [total_entries][scale_packs] */
    /* recv=HOST scales out, [slots][slot_scale_elems] uint32, in a segment
     * of its own: mapped pages, as the rows, so a binding that lets views
     * outlive the table (the Python layer) can map zero pages over them
     * once freed */
    engram_segment_t *scales_recv;
    bool written;
    bool writing;                 /* between engram_write_begin and engram_write_end */
    engram_status_t write_status; /* the first failure of this rank's engram_write_rows since begin */
    atomic_int fetches_in_flight; /* live slots */
    /* engram_table_stats' counters (relaxed: fetches on several threads) */
    atomic_ullong stat_fetches, stat_rows, stat_bytes, stat_bad_rows, stat_repeats, stat_wait_ns, stat_cache_hits;
    atomic_int retired_slots;
    int num_slots;
    engram_fetch_slot_t *slots;
    void *gpu; /* recv=CUDA tables: engram/gpu's state */
};

/* Shared by the host and GPU table paths (table.c): the routing shape from
 * the params and t->shard's size; the fetch slots and their flush state. */
void engram_table_fill_shape(engram_table_t *t);
engram_status_t engram_table_alloc_slots(engram_table_t *t);
/* The table's own checks, `fn` naming the caller in the message (table.c):
 * no fetch in flight (ENGRAM_ERR_BUSY); inside engram_write_begin ..
 * engram_write_end (ENGRAM_ERR_STATE); rows [first_row, first_row +
 * num_rows) within the shard, without wrapping (ENGRAM_ERR_OVERFLOW). */
engram_status_t engram_table_check_idle(engram_table_t *t, const char *fn);
engram_status_t engram_table_check_writing(const engram_table_t *t, const char *fn);
engram_status_t engram_table_check_range(const engram_table_t *t, const char *fn, uint64_t first_row,
                                         uint64_t num_rows);
void engram_table_free_slots(engram_table_t *t);

/* The indices argument of a fetch entry point `fn` (engram_fetch and
 * engram_fetch_on_stream): NULL only with no tokens, and 8-byte aligned (a
 * misaligned int64 load is undefined in C, and in a GPU kernel a fault
 * that poisons the process's CUDA context). */
engram_status_t engram_fetch_check_indices(const char *fn, const int64_t *indices, uint32_t num_tokens);

/* The fetch steps shared by the host fetch (fetch.c) and the GPU fetch's
 * rows owned by other nodes (engram/gpu), so both issue and complete gets
 * the same way. */
/* Takes a free slot for a fetch on queues [first_queue, first_queue +
 * num_queues) and resets its flush state; NULL when all are in flight.
 * First takes back retired slots on those queues whose gets completed. */
engram_fetch_slot_t *engram_fetch_begin(engram_table_t *t, int first_queue, int num_queues, uint32_t num_tokens,
                                   unsigned flags);
/* engram_fetch_begin's reset of a slot just taken (f->state LIVE). */
void engram_fetch_reset(engram_fetch_slot_t *f, int first_queue, int num_queues, uint32_t num_tokens, unsigned flags);
/* The queues tokens 0, 1, ... of a fetch issue on, walked in order:
 * contiguous token ranges, token t on first_queue + t * num_queues /
 * num_tokens, with one division per queue rather than per token (over a
 * fetch of thousands of one-row tokens, a division each adds up). */
typedef struct engram_queue_walk {
    int queue;     /* the queue of the tokens from the last boundary */
    uint64_t next; /* the first token of the next queue */
} engram_queue_walk_t;
void engram_queue_walk_begin(const engram_fetch_slot_t *f, engram_queue_walk_t *w);
/* The queue of `token`; tokens in increasing order. */
int engram_queue_walk_to(const engram_fetch_slot_t *f, engram_queue_walk_t *w, uint32_t token);
/* One row's get from t->shard_region (as routed) into dst at dst_off, with
 * the flush policy of routing.h. */
engram_status_t engram_fetch_get_row(engram_fetch_slot_t *f, int queue, const engram_route_t *r, engram_region_t *dst,
                                     uint64_t dst_off);
/* Flushes each (queue, peer) that got gets; returns the first error. */
engram_status_t engram_fetch_flush(engram_fetch_slot_t *f);
/* Tests the flush requests, dropping completed ones: ENGRAM_INPROGRESS
 * while any remain, then f->status (the first error, sticky). */
engram_status_t engram_fetch_test_flushes(engram_fetch_slot_t *f);
/* At table destroy, before the regions go: frees the requests retired
 * slots still hold (the transport stops tracking those gets). */
void engram_fetch_drop_retired(engram_table_t *t);

/* Whether gets complete only while owners call ops->progress: some
 * symmetric region of the context needs it. */
bool engram_context_needs_progress(const engram_context_t *ctx);
/* The transport's fetch launcher (GPU-initiated backends), or NULL. */
const engram_gpu_launcher_ops_t *engram_context_gpu_launcher(const engram_context_t *ctx);
/* The region flags of a reg_symmetric region, which only the transport's
 * caps describe: ENGRAM_REGION_OWNER_PROGRESS when it has
 * ENGRAM_CAP_OWNER_PROGRESS. */
uint32_t engram_context_reg_flags(const engram_context_t *ctx);
/* Counts a symmetric region in (delta 1, after its registration) or out
 * (-1, after its dereg) when region_flags has ENGRAM_REGION_OWNER_PROGRESS;
 * the group's progress hook serves peers while any is counted. Collective
 * in effect: every rank counts the same regions. */
void engram_context_hold_progress(engram_context_t *ctx, uint32_t region_flags, int delta);
/* A teardown's status st once the group has failed (a peer that failed or
 * did not answer within the bound, in this teardown's collectives or
 * earlier ones): ENGRAM_ERR_PEER, saying that this rank tore down alone (fn
 * names the call) and why; st as it is while the group stands, and BUSY
 * (nothing torn down) always. */
engram_status_t engram_context_torn_down_alone(const engram_context_t *ctx, const char *fn, engram_status_t st);

/* n rows of row_bytes from packed host src into host dst, `stride` bytes
 * apart (a shard's layout): every host-side shard write. */
static inline void engram_rows_to_stride(char *dst, uint64_t stride, const void *src, uint32_t row_bytes, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        memcpy(dst + i * stride, (const char *)src + i * row_bytes, row_bytes);
}

/* engram_table_stats' counters for a fetch of num_tokens that completed
 * with bad_rows out-of-range indices and cache_hits rows from the cache. */
static inline void engram_table_count_done(engram_table_t *t, uint32_t num_tokens, uint64_t bad_rows,
                                           uint64_t cache_hits)
{
    atomic_fetch_add_explicit(&t->stat_bytes, (uint64_t)num_tokens * t->params.entries_per_token * t->params.row_bytes,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&t->stat_bad_rows, bad_rows, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->stat_cache_hits, cache_hits, memory_order_relaxed);
}

/* Bytes between stored rows: row_bytes rounded up to ENGRAM_ROW_ALIGN. */
static inline uint64_t engram_row_stride(uint32_t row_bytes)
{
    return ((uint64_t)row_bytes + ENGRAM_ROW_ALIGN - 1) / ENGRAM_ROW_ALIGN * ENGRAM_ROW_ALIGN;
}


#endif
