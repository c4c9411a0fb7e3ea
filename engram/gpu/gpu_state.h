/* A GPU table's state (table->gpu), shared by gpu_table.c and gpu_fetch.c. */
#ifndef ENGRAM_GPU_GPU_STATE_H
#define ENGRAM_GPU_GPU_STATE_H

#include <cuda_runtime_api.h>
#include "engram/gpu/gather.h"
#include "engram/gpu/released.h"
#include "engram/internal.h"

typedef struct engram_gpu_remote engram_gpu_remote_t; /* gpu_remote.c */
typedef struct engram_gpu_host engram_gpu_host_t;     /* gpu_host_gather.c */
typedef struct engram_gpu_hot engram_gpu_hot_t;       /* hot_cache.h */
typedef struct engram_gpu_dedup engram_gpu_dedup_t;   /* gpu_dedup.h */

typedef struct engram_gpu_table {
    int device;
    int sms;        /* the device's SMs */
    int blocks;     /* the kernel's grid: gpu_sms, auto's choice (gpu_sms.h), or every SM */
    size_t gran;    /* allocation granularity of the span's parts */
    /* The span, DeepEP-style and identical in every local rank: this rank's
     * receive region (GPU memory) at base, then every local rank's shard at
     * base + recv_bytes + local_rank * shard stride. */
    char *base;
    size_t span_bytes;
    size_t recv_bytes;
    engram_segment_t *recv_own;   /* the receive allocation (exported to map it into the span) */
    engram_segment_t **parts;     /* the span's mappings: [0] receive, [1 + i] local rank i's shard */
    int num_parts;
    uint32_t first_peer;          /* routed peer of the span's first shard */
    uint32_t local_peers;         /* routed peers in the span: local ranks (direct) or 1 node (hybrid) */
    uint64_t peer_stride;
    uint32_t *scales;             /* GPU copy of the replicated scales */
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
    engram_gpu_remote_t *remote;  /* rows owned by other nodes; NULL on a one-node group */
    /* gpu_path (every rank of the group the same): host_gather rows come
     * from host threads and the copy engine (gpu_host_gather.h), and
     * nothing of the span below base + recv_bytes is mapped. */
    bool host_path;
    engram_gpu_host_t *host;      /* host_gather's state; NULL on the UVA path */
    /* GPU-initiated transport (engram/plugin/gpu_launcher.h): its kernel fetches the
     * rows of routed peers outside [first_peer, first_peer + local_peers),
     * and remote stays NULL. */
    const engram_gpu_launcher_ops_t *launcher;
    engram_gpu_launch_t *launch;
    /* [slots]: a fetch whose launcher wait or host-gather join is not
     * queued yet (gpu_fetch.c's queue_wait), and its stream */
    void **wait_stream;
    bool *wait_pending;
    const char *local_span; /* the gather kernel's shard of routed peer first_peer */
    engram_gpu_dedup_t *dedup;    /* dedup=on beside the UVA kernel (gpu_dedup.h); NULL: none */
    engram_gpu_hot_t *hot;        /* the hot-row cache; NULL without one */
} engram_gpu_table_t;

/* Report entry `report`'s blocks (ENGRAM_RELEASED_NO_REPORT: the sink). */
static inline engram_gpu_bad_t *engram_gpu_report(const engram_gpu_table_t *g, uint32_t report)
{
    uint32_t e = report == ENGRAM_RELEASED_NO_REPORT ? g->released.num_reports : report;
    return g->bad + (size_t)e * (size_t)g->sms;
}

#endif
