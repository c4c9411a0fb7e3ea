/* Engram layer internals shared by context.c, table.c, fetch.c. */
#ifndef ENGRAM_ENGRAM_INTERNAL_H
#define ENGRAM_ENGRAM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include "engram/dedup.h"
#include "engram/engram.h"
#include "engram/routing.h"
#include "hal/config_keys.h"
#include "hal/transport.h"

struct engram_context {
    engram_config_t cfg;
    engram_group_t *group;
    const engram_transport_ops_t *ops;
    engram_transport_t *transport;
    engram_transport_caps_t caps;
    int num_queues;
    int live_tables;
    int progress_regions; /* symmetric regions whose gets need their owner's CPU */
};

struct engram_fetch {
    engram_table_t *table;
    /* Slot taken by a fetch not yet released; taken by compare-and-swap so
     * threads fetching on separate queues share the table's slots. Every
     * other field belongs to the thread that took the slot. */
    atomic_bool in_use;
    bool completed;  /* every flush request has completed */
    engram_status_t status; /* first error seen, sticky */
    uint32_t num_tokens;
    unsigned flags;
    int first_queue, num_queues; /* the queues this fetch issues on */
    void *rows;      /* this slot's receive rows */
    uint32_t *sf;    /* this slot's scales */
    uint32_t *counters;        /* [queues][peers] requests issued this fetch */
    engram_request_t **reqs;   /* flush requests still to complete */
    int num_reqs;
    uint64_t bad_count;
    uint32_t first_bad_token, first_bad_entry;
    engram_dedup_t *dedup;     /* the slot's dedup state; NULL when dedup=off */
    engram_dedup_t *deduping;  /* this fetch's: dedup, or NULL when it reads every row */
};

struct engram_table {
    engram_context_t *ctx;
    engram_table_params_t params;
    engram_route_shape_t shape;
    int num_peers;
    uint64_t slot_row_bytes; /* max_tokens * entries_per_token * row_bytes */
    uint64_t slot_sf_elems;  /* scale packs per slot, room for the column-major padding */
    engram_segment_t *shard;
    engram_region_t *shard_region; /* the shard as the transport reads it (GPU tables: a host mirror) */
    uint32_t shard_flags;          /* ENGRAM_CAP_OWNER_PROGRESS when peers' gets need this rank's CPU */
    engram_segment_t *recv;
    engram_region_t *recv_region;  /* where gets land (GPU tables: the host staging) */
    uint32_t *scales; /* replicated global scales, [total_entries][scale_packs] */
    uint32_t *sf_recv;
    bool written;
    atomic_int fetches_in_flight;
    int num_slots;
    engram_fetch_t *slots;
    void *gpu; /* recv=CUDA tables: engram/gpu's state */
};

/* Shared by the host and GPU table paths (table.c): the routing shape from
 * the params and t->shard's size; the fetch slots and their flush state. */
void engram_table_fill_shape(engram_table_t *t);
engram_status_t engram_table_alloc_slots(engram_table_t *t);
void engram_table_free_slots(engram_table_t *t);

/* The fetch steps shared by the host fetch (fetch.c) and the GPU fetch's
 * rows owned by other nodes (engram/gpu), so both issue and complete gets
 * the same way. */
/* Takes a free slot for a fetch on queues [first_queue, first_queue +
 * num_queues) and resets its flush state; NULL when all are in flight. */
engram_fetch_t *engram_fetch_begin(engram_table_t *t, int first_queue, int num_queues, uint32_t num_tokens,
                                   unsigned flags);
/* The queue `token` issues on: contiguous token ranges per queue. */
int engram_fetch_queue(const engram_fetch_t *f, uint32_t token);
/* One row's get from t->shard_region (as routed) into dst at dst_off, with
 * the flush policy of routing.h. */
engram_status_t engram_fetch_get_row(engram_fetch_t *f, int queue, const engram_route_t *r, engram_region_t *dst,
                                     uint64_t dst_off);
/* Flushes each (queue, peer) that got gets; returns the first error. */
engram_status_t engram_fetch_flush(engram_fetch_t *f);
/* Tests the flush requests, dropping completed ones: ENGRAM_INPROGRESS
 * while any remain, then f->status (the first error, sticky). */
engram_status_t engram_fetch_test_flushes(engram_fetch_t *f);

/* Whether gets complete only while owners call ops->progress: some
 * symmetric region of the context needs it. */
bool engram_context_needs_progress(const engram_context_t *ctx);
/* The transport's fetch launcher (GPU-initiated backends), or NULL. */
const engram_gpu_launcher_ops_t *engram_context_gpu_launcher(const engram_context_t *ctx);
/* Counts a symmetric region in (delta 1, after its registration) or out
 * (-1, after its dereg) when region_flags has ENGRAM_CAP_OWNER_PROGRESS;
 * the group's progress hook serves peers while any is counted. Collective
 * in effect: every rank counts the same regions. */
void engram_context_hold_progress(engram_context_t *ctx, uint32_t region_flags, int delta);

/* Bytes between stored rows: row_bytes rounded up to ENGRAM_ROW_ALIGN. */
static inline uint64_t engram_row_stride(uint32_t row_bytes)
{
    return ((uint64_t)row_bytes + ENGRAM_ROW_ALIGN - 1) / ENGRAM_ROW_ALIGN * ENGRAM_ROW_ALIGN;
}


#endif
