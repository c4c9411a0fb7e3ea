/* Fetch launcher: the contract of a GPU-initiated backend
 * (ENGRAM_CAP_GPU_INITIATED), reached through engram_transport_ops_t's
 * gpu_launcher field. Host-initiated backends leave that field NULL.
 *
 * The kernel is the backend's; what it applies is the engram layer's:
 * routing, the flush policy and the bad-index rule of
 * <engram/plugin/routing.h> (header-only, C and CUDA), over the table's
 * shape that each issue hands in (engram_gpu_issue_t.shape, host memory the
 * launcher copies into its kernels' arguments). This header names no CUDA
 * or NCCL type: streams travel as void *.
 *
 * What a backend may make remotely readable or writable: this rank's
 * receive region (GPU memory) and this rank's shard (HOST_NUMA or GPU
 * memory), each one allocation of its own (cuMem, exportable), with the same
 * sizes on every rank: a row owned by a peer is at the same offset in the
 * peer's shard as it would be in ours. (engram/gpu also maps the node's other
 * shards behind the receive region for its local gather; those mappings are
 * imports, which CUDA does not export again, so they are not offered here.)
 *
 * Sequence per table: attach (collective) -> { issue(slot, stream) ... wait(slot,
 * stream) }* -> detach (collective). The engram layer loads the rows of
 * this node (or of this rank in direct mode) itself, gathers the scales and
 * applies the bad-index rule in its local gather kernel on the same stream;
 * the launcher moves every other row. */
#ifndef ENGRAM_PLUGIN_GPU_LAUNCHER_H
#define ENGRAM_PLUGIN_GPU_LAUNCHER_H

#include <stddef.h>
#include <stdint.h>
#include "engram/plugin/routing.h"
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct engram_transport;

typedef struct engram_gpu_launch engram_gpu_launch_t; /* backend state of one attached span */

typedef struct engram_gpu_span {
    size_t size;          /* sizeof(engram_gpu_span_t), the library's */
    void *recv;           /* this rank's receive region */
    uint64_t recv_bytes;
    void *shard;          /* this rank's shard; routing's src_off (intra 0) addresses it */
    uint64_t shard_bytes;
    int hybrid;           /* rows of other nodes through the rail rank, else per rank */
    int num_slots;        /* fetches that may be in flight: one set of requests each */
    uint32_t max_rows;    /* rows one fetch may ask for */
} engram_gpu_span_t;

/* One fetch. Rows land at recv + rows_off + row * row_bytes. */
typedef struct engram_gpu_issue {
    size_t size; /* sizeof(engram_gpu_issue_t), the library's */
    const engram_route_shape_t *shape; /* host memory, valid during issue */
    const int64_t *indices; /* device, [num_tokens * entries_per_token] */
    uint32_t num_tokens;
    uint32_t entries_per_token;
    uint32_t row_bytes;
    uint64_t rows_off;
    /* Routed peers [first_local_peer, first_local_peer + local_peers) are
     * the engram layer's (its local gather loads them): skipped. */
    uint32_t first_local_peer;
    uint32_t local_peers;
    uint32_t flush_depth; /* routing.h's flush policy, per (queue, peer) */
    int first_queue;      /* tokens split into contiguous ranges over these queues */
    int num_queues;
    int slot; /* < span num_slots; this fetch's requests */
} engram_gpu_issue_t;

/* Of the plugin's transport ABI version, as engram_transport_ops_t. */
typedef struct engram_gpu_launcher_ops {
    /* Collective: makes the span remotely readable (e.g. a window) and the
     * device-side state the kernels need; the same status on every rank. */
    engram_status_t (*attach)(struct engram_transport *t, const engram_gpu_span_t *span, engram_gpu_launch_t **out);
    /* Queues the fetch's gets on `stream` (a cudaStream_t) and returns;
     * nothing waits for data here. */
    engram_status_t (*issue)(engram_gpu_launch_t *l, const engram_gpu_issue_t *fetch, void *stream);
    /* Queues on `stream` what completes slot's gets: work queued behind it
     * sees the rows. */
    engram_status_t (*wait)(engram_gpu_launch_t *l, int slot, void *stream);
    /* Collective; no fetch in flight. */
    void (*detach)(engram_gpu_launch_t *l);
} engram_gpu_launcher_ops_t;

#ifdef __cplusplus
}
#endif
#endif
