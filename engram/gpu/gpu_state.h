/* A GPU table's state (table->gpu): what every fetch path shares. Each
 * path's own state is its file's (fetch_path.h composes them). */
#ifndef ENGRAM_GPU_GPU_STATE_H
#define ENGRAM_GPU_GPU_STATE_H

#include <cuda_runtime_api.h>
#include "engram/gpu/fetch_path.h"
#include "engram/gpu/gather.h"
#include "engram/gpu/released.h"
#include "engram/internal.h"

typedef struct engram_gpu_dedup engram_gpu_dedup_t; /* gpu_dedup.h */
typedef struct engram_gpu_hot engram_gpu_hot_t;     /* hot_cache.h */

struct engram_gpu_table {
    int device;
    int sms;        /* the device's SMs */
    int blocks;     /* the kernel's grid: gpu_sms, auto's choice (gpu_sms.h), or every SM */
    size_t gran;    /* allocation granularity of the span's parts */
    engram_segment_t *recv_own;   /* the receive allocation (exported to map it into the span) */
    size_t recv_bytes;
    char *recv;                   /* the receive region as the local path maps it: the slots' rows */
    /* The span (uva maps it; NULL on host_gather), DeepEP-style and
     * identical in every local rank: this rank's receive region (GPU
     * memory) at base, then every local rank's shard at base + recv_bytes
     * + local_rank * shard stride. */
    char *base;
    size_t span_bytes;
    engram_segment_t **parts;     /* the span's mappings: [0] receive, [1 + i] local rank i's shard */
    int num_parts;
    /* The split of the rows between the paths: routed peers [first_peer,
     * first_peer + local_peers) are the local path's, peer_stride apart
     * in its shards (0: hybrid, src_off has it); the other-nodes path
     * takes the rest. */
    uint32_t first_peer;
    uint32_t local_peers;         /* local ranks (direct), 1 node (hybrid), or this rank (NODE_PEERS) */
    uint64_t peer_stride;
    uint32_t *scales_out;         /* GPU scale slots */
    /* host-mapped reports, [released.num_reports + 1][sms]: each fetch's
     * kernel reports into an entry of its own (released.h); the last one
     * takes what no one reads (graph replays, the cache's load) */
    engram_gpu_bad_t *bad;
    uint32_t *slot_report;        /* [slots]: the entry of the slot's fetch; ENGRAM_RELEASED_NO_REPORT: none */
    void **slot_stream;           /* [slots]: the stream of the slot's fetch */
    engram_released_t released;   /* fetches ended in stream order (engram_fetch_release_ordered) */
    cudaEvent_t *done;            /* [slots]: recorded after a fetch's last GPU work, unless it signals */
    /* [slots]: the seq a slot's kernel-signalled fetch waits for in every
     * block's report (gather.h); 0 while its completion is the event. */
    uint64_t *slot_seq;
    uint64_t last_seq;            /* the table's last seq handed to a kernel */
    /* [slots]: bit p set while path p's wait for the slot's fetch is not
     * queued yet (gpu_fetch.c's queue_waits_here; fetch_path.h's rule) */
    uint8_t *wait_pending;
    engram_gpu_path_t path[ENGRAM_GPU_NUM_PATHS]; /* in issue order: other nodes' rows, then this node's */
    engram_gpu_dedup_t *dedup;    /* dedup=on beside a local path with DEDUP; NULL: none */
    engram_gpu_hot_t *hot;        /* the hot-row cache; NULL without one */
};

/* Report entry `report`'s blocks (ENGRAM_RELEASED_NO_REPORT: the sink). */
static inline engram_gpu_bad_t *engram_gpu_report(const engram_gpu_table_t *g, uint32_t report)
{
    uint32_t e = report == ENGRAM_RELEASED_NO_REPORT ? g->released.num_reports : report;
    return g->bad + (size_t)e * (size_t)g->sms;
}

static inline const engram_gpu_path_t *engram_gpu_local(const engram_gpu_table_t *g)
{
    return &g->path[ENGRAM_GPU_PATH_LOCAL];
}

/* The receive slots' rows and scales, from recv (a local path's create). */
void engram_gpu_place_slots(engram_table_t *t, engram_gpu_table_t *g, char *recv);
/* A segment of `ops` on the table's device, bytes rounded up to its granularity. */
engram_status_t engram_gpu_alloc_segment(const engram_segment_ops_t *ops, const engram_gpu_table_t *g, size_t bytes,
                                         engram_segment_t **out);

#endif
