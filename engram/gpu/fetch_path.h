/* The contract every GPU fetch path implements, and the one place that
 * says what each path can do.
 *
 * A recv=CUDA table composes two paths (gpu_table.c): the local path, which
 * loads the rows of this node (uva: the gather kernel over the UVA layout;
 * host_gather: host threads and the copy engine), and the other-nodes path,
 * which moves every other row (launcher: a GPU-initiated transport's
 * kernels; remote: the host transport, routed on the host; none on one
 * node without a launcher). The table holds what is common (gpu_state.h);
 * dedup=on's marking kernel (gpu_dedup.h) and the hot-row cache
 * (hot_cache.h) compose with the local path: the table holds them, and the
 * path's issue applies them. A fetch (gpu_fetch.c) issues the paths in
 * issue order (the other-nodes path first, so its gets fly while the local
 * path loads), then queues the waits due at the call; test, wait,
 * engram_fetch_buffers and engram_fetch_release_ordered queue the rest,
 * and test and wait see the paths complete.
 *
 * Capabilities (engram_gpu_path_ops_t.caps), and the path asked:
 *   CAPTURE          a fetch may be captured in a CUDA graph: its replays
 *                    need no call of the caller (every path of the table)
 *   NODES            rows of other nodes: composes with an other-nodes
 *                    path (the local path)
 *   BESIDE_LAUNCHER  composes with a GPU launcher (the local path)
 *   STREAM_ORDER     stream order without a host wait: the rows reach the
 *                    stream's order with no host call after the issue, and
 *                    a slot serves the next fetch on its stream before the
 *                    host has seen it complete (engram_fetch_release_ordered;
 *                    every path of the table)
 *   DEVICE_SHARDS    reads shards in GPU memory, gpu_table=device (the
 *                    local path)
 *   ORDER_AT_CALL    its wait, if it has one, is queued at the call unless
 *                    the caller passes ENGRAM_FETCH_ORDER_AT_WAIT (the
 *                    ordering rule below; uva has none, its rows are in
 *                    order at the call either way)
 *   DEDUP            dedup=on's marking kernel composes with it (the local
 *                    path; without, dedup=on leaves its rows alone)
 *   NODE_PEERS       in direct mode it also takes the rows of this node's
 *                    other ranks, the local path this rank's own only (the
 *                    other-nodes path)
 *
 *   path          CAPTURE NODES BESIDE STREAM DEVICE AT_CALL DEDUP PEERS  wait
 *   uva              x      x     x      x      x      x      x     -   none
 *   host_gather      x      x     -      -      -      x      -     -   the pool's copies (the join)
 *   launcher         x      -     -      x      -      -      -     x   the launcher's wait kernel
 *   remote           -      -     -      -      -      -      -     -   none (rows land at a test)
 *
 * A refusal is engram_gpu_path_require, one check with one message:
 * "<call>: <what was asked>: the table's <path> path cannot <capability>
 * (<how its rows come; what can>)[; <advice>]".
 *
 * Ordering (engram_fetch_on_stream), the one rule: a path's issue queues on
 * the fetch's stream the work that writes its rows; its wait (queue_wait;
 * NULL: none needed, the issued work is in the stream's order at the call)
 * makes work queued after it see them. The wait is queued at the call when
 * the fetch is captured (no later host call would) or when the path has
 * ORDER_AT_CALL and the caller did not pass ENGRAM_FETCH_ORDER_AT_WAIT;
 * otherwise by the fetch's first engram_test, engram_wait,
 * engram_fetch_buffers or engram_fetch_release_ordered (engram_gpu_fetch_order).
 * So uva's rows are in order at the call either way; host_gather joins at
 * the call, or with the flag at the first test (fetches queued back to back
 * are gathered while the copy engine moves the one before); the launcher
 * queues its wait at the first test with or without the flag (work queued
 * in between overlaps its gets); remote's rows, lacking STREAM_ORDER, reach
 * the slot only once a test or wait has seen their gets (progress queues
 * their scatter). One flag cannot time every path: callers that pass none
 * see uva's and host_gather's rows from the call, and the launcher's from
 * their first test. The event that tells the host a fetch is done is
 * recorded behind the last wait, or at the call when none is pending,
 * unless the local path's kernel signals (gpu_uva.c) or the fetch is
 * captured (a captured fetch records no event).
 *
 * CUDA-free (engram_gpu_path_require is tested in the CPU tier). */
#ifndef ENGRAM_GPU_FETCH_PATH_H
#define ENGRAM_GPU_FETCH_PATH_H

#include <stdbool.h>
#include <stdint.h>
#include "engram/internal.h"

typedef struct engram_gpu_table engram_gpu_table_t; /* gpu_state.h */

enum {
    ENGRAM_GPU_CAP_CAPTURE = 1u << 0,
    ENGRAM_GPU_CAP_NODES = 1u << 1,
    ENGRAM_GPU_CAP_BESIDE_LAUNCHER = 1u << 2,
    ENGRAM_GPU_CAP_STREAM_ORDER = 1u << 3,
    ENGRAM_GPU_CAP_DEVICE_SHARDS = 1u << 4,
    ENGRAM_GPU_CAP_ORDER_AT_CALL = 1u << 5,
    ENGRAM_GPU_CAP_DEDUP = 1u << 6,
    ENGRAM_GPU_CAP_NODE_PEERS = 1u << 7,
};

/* Each path's capabilities: the table above, which its ops carry. */
#define ENGRAM_GPU_UVA_CAPS                                                                                     \
    (ENGRAM_GPU_CAP_CAPTURE | ENGRAM_GPU_CAP_NODES | ENGRAM_GPU_CAP_BESIDE_LAUNCHER | ENGRAM_GPU_CAP_STREAM_ORDER | \
     ENGRAM_GPU_CAP_DEVICE_SHARDS | ENGRAM_GPU_CAP_ORDER_AT_CALL | ENGRAM_GPU_CAP_DEDUP)
#define ENGRAM_GPU_HOST_GATHER_CAPS (ENGRAM_GPU_CAP_CAPTURE | ENGRAM_GPU_CAP_NODES | ENGRAM_GPU_CAP_ORDER_AT_CALL)
#define ENGRAM_GPU_LAUNCHER_CAPS (ENGRAM_GPU_CAP_CAPTURE | ENGRAM_GPU_CAP_STREAM_ORDER | ENGRAM_GPU_CAP_NODE_PEERS)
#define ENGRAM_GPU_REMOTE_CAPS 0u

/* One fetch, as the driver hands it to each path's issue. */
typedef struct engram_gpu_fetch {
    engram_fetch_slot_t *f;  /* rows, scales_out, num_tokens, flags, queues */
    int slot;
    const int64_t *indices;  /* GPU memory, [num_tokens][entries_per_token] */
    void *stream;            /* a cudaStream_t of the table's device, which is current */
    bool captured;           /* the stream is capturing a CUDA graph */
    /* No other path queues GPU work for the fetch after this one's issue,
     * and it is not captured: the local path's kernel may signal completion
     * itself instead of an event (gather.h's seq; it sets slot_seq). */
    bool may_signal;
} engram_gpu_fetch_t;

typedef struct engram_gpu_path_ops {
    const char *name; /* "uva", "host_gather", "launcher", "remote" (engram_table_stats names the local path) */
    /* How its rows come, and what can do what it cannot: a refusal's parenthesis. */
    const char *how;
    const char *work; /* what the GPU runs for it, for a fault ("kernel", "copy"; local paths) */
    unsigned caps;

    /* ---- the table ---- */
    /* Local paths: this rank's shard into t->shard (before the table's shape is filled). */
    engram_status_t (*alloc_shard)(engram_table_t *t, engram_gpu_table_t *g);
    /* Collective, the status agreed. *state is set as soon as there is one,
     * so destroy releases what create got to when it fails. A local path
     * places the receive slots (engram_gpu_place_slots). */
    engram_status_t (*create)(engram_table_t *t, engram_gpu_table_t *g, void **state);
    /* Releases what create took; no fetch is in flight (a retired one's
     * work may still run: a path that must wait for it does). Also called
     * with state NULL for a path whose create never ran or set none: it
     * must accept that. */
    void (*destroy)(engram_table_t *t, engram_gpu_table_t *g, void *state);
    /* Rows [first, first + n) of this rank's shard; the replicated scales.
     * A local path sets both (the table calls them without a check); the
     * other-nodes path sets write_rows where it keeps its own copy of the
     * shard (NULL: nothing to write), and its write_scales is not called. */
    engram_status_t (*write_rows)(engram_table_t *t, void *state, uint64_t first, uint64_t n, const void *rows);
    engram_status_t (*write_scales)(engram_table_t *t, engram_gpu_table_t *g, void *state, const uint32_t *scales);
    /* Local paths: rows[n] of this node (also in GPU memory at rows_dev)
     * into GPU memory dst[n][row_bytes], returning once they are there
     * (the hot-row cache's load). */
    engram_status_t (*load_rows)(engram_table_t *t, engram_gpu_table_t *g, void *state, const int64_t *rows,
                                 const int64_t *rows_dev, uint64_t n, char *dst);
    /* Host threads it runs, for engram_table_stats (NULL: none). */
    int (*threads)(const void *state);

    /* ---- a fetch ---- */
    /* Queues the fetch's work on its stream; *wait_due set when that work
     * needs queue_wait before later work sees the rows. On failure what it
     * queued must let the stream pass; on a failure of either path the
     * driver issues no later path, queues the waits already due (the
     * other-nodes path's gets write into the slot) and synchronizes the
     * stream: nothing of a failed fetch runs once the call returns. Under
     * capture it does not synchronize (nothing of a captured fetch runs at
     * the call; synchronizing a capturing stream invalidates the capture). */
    engram_status_t (*issue)(void *state, engram_gpu_table_t *g, const engram_gpu_fetch_t *fx, bool *wait_due);
    /* Host work at the call once every path's stream work is queued (NULL:
     * none); not for captured fetches. An error is the fetch's status. */
    engram_status_t (*issue_host)(void *state, engram_gpu_table_t *g, engram_fetch_slot_t *f, int slot);
    /* Queues on stream what makes later work see slot's rows (NULL: none). */
    engram_status_t (*queue_wait)(void *state, int slot, void *stream);
    /* Each test, before the slot's GPU work is asked (NULL: nothing):
     * ENGRAM_INPROGRESS while the path waits on the host side. */
    engram_status_t (*progress)(void *state, engram_gpu_table_t *g, engram_fetch_slot_t *f, int slot);
    /* Each test once the slot's GPU work is complete (NULL: nothing): the
     * path's outcome folded into f and f->status returned, or
     * ENGRAM_INPROGRESS while it has more to do. */
    engram_status_t (*test)(void *state, engram_gpu_table_t *g, engram_fetch_slot_t *f, int slot);

    /* ---- a captured fetch (paths with CAPTURE) ---- */
    /* The captured fetch of `slot` is released: what its replays hold is
     * let go (NULL: nothing). Every replay launched before has ended (the
     * driver synchronizes the device first); the graph is not replayed
     * after. */
    void (*end_captured)(void *state, int slot);
    /* The bad indices of the captured fetch's last replay: their count
     * and the first row (NULL: the path tallies none per replay). */
    void (*replay_bad)(void *state, int slot, uint64_t *count, uint64_t *first_row);
} engram_gpu_path_ops_t;

/* A table's path: its ops (NULL: none) and its state. */
typedef struct engram_gpu_path {
    const engram_gpu_path_ops_t *ops;
    void *state;
} engram_gpu_path_t;

/* A table's paths, in issue order. */
enum { ENGRAM_GPU_PATH_OTHER = 0, ENGRAM_GPU_PATH_LOCAL = 1, ENGRAM_GPU_NUM_PATHS = 2 };

extern const engram_gpu_path_ops_t engram_gpu_uva_path;         /* gpu_uva.c */
extern const engram_gpu_path_ops_t engram_gpu_host_gather_path; /* gpu_host_gather.c */
extern const engram_gpu_path_ops_t engram_gpu_launcher_path;    /* gpu_launch.c */
extern const engram_gpu_path_ops_t engram_gpu_remote_path;      /* gpu_remote.c */

/* The first capability of `need` (in the order DEVICE_SHARDS,
 * BESIDE_LAUNCHER, NODES, CAPTURE, STREAM_ORDER, then the rest) that path
 * lacks, or 0. */
unsigned engram_gpu_path_lacks(const engram_gpu_path_ops_t *path, unsigned need);
/* Why a table takes uva (engram_gpu_path_report's reason) when the local
 * path it would take lacks `cap`: static text. */
const char *engram_gpu_cap_reason(unsigned cap);
/* The one capability check: ENGRAM_OK when each path of paths[n] (in
 * order; NULL ops: none) has every capability in `need`, else
 * ENGRAM_ERR_UNSUPPORTED with the refusal above (advice NULL: none). */
engram_status_t engram_gpu_path_require(const engram_gpu_path_t *paths, int n, unsigned need, const char *call,
                                        const char *asked, const char *advice);

#endif
