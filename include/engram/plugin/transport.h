/* Transport ops: the contract every one-sided-get backend implements.
 * Built-ins register statically; external ones are shared objects exporting
 * an entry symbol that points at their ops (plugin.h;
 * docs/ADDING_A_TRANSPORT.md).
 *
 * Model: the engram layer registers one segment per rank symmetrically, then
 * issues gets (queue, peer, remote offset -> local offset, length, flags),
 * then one flush per peer that received requests; the flush's request is
 * what completion is tested on. A get may complete at any time before its
 * flush completes; gets with ENGRAM_GET_AGGREGATE may be held back (no
 * doorbell) until a later get without the flag or a flush.
 *
 * Threads: calls on different queues may run concurrently; calls on one
 * queue must not. */
#ifndef ENGRAM_PLUGIN_TRANSPORT_H
#define ENGRAM_PLUGIN_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "engram/backend.h"
#include "engram/log.h"
#include "engram/plugin/config.h"
#include "engram/plugin/gpu_launcher.h"
#include "engram/plugin/group.h"
#include "engram/plugin/segment.h"
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Capability bits (ENGRAM_CAP_*) and memory kinds: <engram/backend.h>,
 * where applications read them too (engram_backend_list_get). */

#define ENGRAM_GET_AGGREGATE (1u << 0) /* do not ring the doorbell for this get */

/* Region flags (alloc_symmetric's *region_flags): what one region needs,
 * where the capability bits speak for the transport as a whole. */
/* Gets from this region complete only while its owner's CPU calls
 * ops->progress. The bit equals ENGRAM_CAP_OWNER_PROGRESS's, so either
 * name sets it; a reg_symmetric region takes it from that capability. */
#define ENGRAM_REGION_OWNER_PROGRESS (1u << 4)

/* How a symmetric region addresses its peers. */
typedef enum engram_reg_span {
    /* peer p (0..size-1) = rank p; region = rank p's segment */
    ENGRAM_REG_RANK = 0,
    /* peer p (0..size/local_size-1) = node p, reached through its rail rank
     * p * local_size + my local_rank; region = node p's local segments back
     * to back at a stride of the segment size (all equal) */
    ENGRAM_REG_NODE_SPAN = 1,
} engram_reg_span_t;

/* A host transport's view of its group, taken when it opens: its rank and
 * sizes, and how its flush peers map to ranks (from the mode key). */
typedef struct engram_transport_shape {
    int rank, size, local_rank, local_size;
    engram_reg_span_t span; /* NODE_SPAN in hybrid mode, RANK in direct */
    int npeers;             /* flush peers: nodes (NODE_SPAN) or ranks (RANK) */
} engram_transport_shape_t;

static inline engram_transport_shape_t engram_transport_shape_of(const engram_group_t *group, int64_t mode)
{
    engram_transport_shape_t s;
    s.rank = engram_group_rank(group);
    s.size = engram_group_size(group);
    s.local_rank = engram_group_local_rank(group);
    s.local_size = engram_group_local_size(group);
    s.span = mode == ENGRAM_MODE_HYBRID ? ENGRAM_REG_NODE_SPAN : ENGRAM_REG_RANK;
    s.npeers = s.span == ENGRAM_REG_NODE_SPAN ? s.size / s.local_size : s.size;
    return s;
}

/* The rank that serves flush peer `peer` under `span` (a region's span may
 * differ from the transport's): node peer's rail rank, or rank peer. */
static inline int engram_transport_peer_rank(const engram_transport_shape_t *s, engram_reg_span_t span, int peer)
{
    return span == ENGRAM_REG_NODE_SPAN ? peer * s->local_size + s->local_rank : peer;
}

typedef struct engram_transport engram_transport_t; /* backend state */
typedef struct engram_region engram_region_t;       /* backend state */
typedef struct engram_request engram_request_t;     /* backend state */

typedef struct engram_transport_caps {
    uint32_t flags;           /* ENGRAM_CAP_* */
    uint32_t read_kinds;      /* ENGRAM_MEM_KIND_BIT of kinds gets can read */
    uint32_t write_kinds;     /* ENGRAM_MEM_KIND_BIT of kinds gets can write */
    int max_queues;           /* queues it offers */
    /* Gets one queue holds in flight to one peer (a transport whose
     * bound is per queue, whatever the peers, states that bound); a get
     * on a full queue rings what it holds and blocks driving progress
     * until there is room. The engram layer rings the doorbell at least
     * every max_outstanding gets per (queue, peer) (it caps flush_depth
     * by it). 0: not stated, no cap. */
    int max_outstanding;
} engram_transport_caps_t;

/* A check of what the caller guarantees: a get's offsets lie inside its
 * regions because the engram layer derives them from the table's agreed
 * shape (the shard holds entries_per_rank rows, a fetch at most max_tokens
 * tokens), so it checks them once, when the table is created and at each
 * fetch. Transports keep their own bounds checks as debug aids:
 * ENGRAM_DEBUG_CHECK(cond) is cond in debug builds and 0 (compiled out) in
 * release builds (NDEBUG: bazel build --config=release). */
#ifdef NDEBUG
#define ENGRAM_DEBUG_CHECKS 0
#else
#define ENGRAM_DEBUG_CHECKS 1
#endif
#define ENGRAM_DEBUG_CHECK(cond) (ENGRAM_DEBUG_CHECKS && (cond))

/* Whether [off, off + len) lies inside `size` bytes (no overflow). */
static inline bool engram_range_inside(uint64_t off, size_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/* A get's bounds, checked and worded once for every transport: OK, or
 * ENGRAM_ERR_INVALID naming the side, offset, length and region size
 * ("<who> get: remote offset ... exceeds the remote region's N bytes").
 * For the transports' refused (cold) paths. */
static inline engram_status_t engram_get_bounds_status(const char *who, uint64_t remote_off, uint64_t remote_size,
                                                       uint64_t local_off, uint64_t local_size, size_t len)
{
    if (!engram_range_inside(remote_off, len, remote_size))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s get: remote offset %llu + length %zu exceeds the remote "
                            "region's %llu bytes", who, (unsigned long long)remote_off, len,
                            (unsigned long long)remote_size);
    if (!engram_range_inside(local_off, len, local_size))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s get: local offset %llu + length %zu exceeds the local "
                            "region's %llu bytes", who, (unsigned long long)local_off, len,
                            (unsigned long long)local_size);
    return ENGRAM_OK;
}

/* A get's queue, regions and peer, checked and worded once for every
 * transport's refused (cold) path: OK, or ENGRAM_ERR_INVALID naming the
 * first that is wrong. The region kinds are the transport's own tests
 * (made NULL-safe by the caller): remote_symmetric, a symmetric region to
 * read from; local_dest, a reg_local region to write into. */
static inline engram_status_t engram_get_args_status(const char *who, int queue, int nqueues, bool have_regions,
                                                     bool remote_symmetric, bool local_dest, int peer, int npeers)
{
    if (queue < 0 || queue >= nqueues)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s get: queue %d out of range [0, %d)", who, queue, nqueues);
    if (!have_regions)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s get: remote and local regions must not be NULL", who);
    if (!remote_symmetric)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s get: the remote region is a local (reg_local) region", who);
    if (!local_dest)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s get: the local region is a symmetric region, not a reg_local "
                            "destination", who);
    if (peer < 0 || peer >= npeers)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s get: peer %d out of range [0, %d)", who, peer, npeers);
    return ENGRAM_OK;
}

/* The ops of transport ABI version ENGRAM_TRANSPORT_ABI_VERSION
 * (<engram/plugin/plugin.h>): a fixed set of fields; a new one makes a new
 * version. */
typedef struct engram_transport_ops {
    const char *name;
    /* Whether this machine and group can run it; on false *why names the
     * reason (static or transport-owned string). May be collective
     * (same answer on every rank). */
    bool (*available)(engram_group_t *group, const char **why);
    /* Collective. Reads configuration only through `config` (core keys and
     * the ones in config_keys below), valid until open returns. */
    engram_status_t (*open)(engram_group_t *group, const engram_config_view_t *config, engram_transport_t **out);
    void (*caps)(const engram_transport_t *t, engram_transport_caps_t *caps);
    /* Collective: every rank registers its own segment (same size on every
     * rank); the returned region addresses the peers' segments per `span`. */
    engram_status_t (*reg_symmetric)(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                     engram_region_t **out);
    /* Local only: a destination buffer gets may write into. */
    engram_status_t (*reg_local)(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out);
    void (*dereg)(engram_transport_t *t, engram_region_t *region);
    /* Copy `len` bytes from the peer's region at remote_off into the local
     * region at local_off. The caller keeps both ranges inside their
     * regions; transports check that only as ENGRAM_DEBUG_CHECK (below). */
    engram_status_t (*get)(engram_transport_t *t, int queue, int peer, engram_region_t *remote, uint64_t remote_off,
                           engram_region_t *local, uint64_t local_off, size_t len, unsigned flags);
    /* Complete every get issued on (queue, peer) so far; *req is tested. */
    engram_status_t (*flush)(engram_transport_t *t, int queue, int peer, engram_request_t **req);
    /* ENGRAM_OK when done, ENGRAM_INPROGRESS, or an error. Drives progress. */
    engram_status_t (*test)(engram_transport_t *t, engram_request_t *req);
    void (*request_free)(engram_transport_t *t, engram_request_t *req);
    /* Optional, may be NULL: text describing what the transport selected
     * (e.g. UCX lanes), written into buf. */
    void (*describe)(const engram_transport_t *t, char *buf, size_t len);
    void (*close)(engram_transport_t *t);
    /* Optional, may be NULL: serve peers' gets and
     * advance every queue. Needed with ENGRAM_CAP_OWNER_PROGRESS. Must not
     * run concurrently with any other call on the transport. */
    engram_status_t (*progress)(engram_transport_t *t);
    /* Optional, may be NULL. Collective, as
     * reg_symmetric, but the transport provides the memory: for lanes that
     * read only memory they allocated themselves (UCX's posix and sysv), so
     * peers' gets need no owner CPU. Every rank passes the same
     * params->bytes; *addr receives this rank's params->bytes (rounded up
     * to the page size), zeroed, writable here, placed per
     * params->numa_node; *out addresses the peers' memory per `span`.
     * dereg frees the memory (peers may keep reading it until their own
     * dereg). Returns the same status on every rank; ENGRAM_ERR_UNSUPPORTED
     * means: allocate a segment and reg_symmetric it instead.
     * *region_flags receives ENGRAM_REGION_OWNER_PROGRESS when some rank's
     * gets from this region still need the owner's CPU; the cap
     * ENGRAM_CAP_OWNER_PROGRESS then speaks for reg_symmetric regions only. */
    engram_status_t (*alloc_symmetric)(engram_transport_t *t, const engram_segment_params_t *params,
                                       engram_reg_span_t span, engram_region_t **out, void **addr,
                                       uint32_t *region_flags);
    /* Optional, may be NULL: the fetch launcher of
     * a GPU-initiated backend (ENGRAM_CAP_GPU_INITIATED; engram/plugin/gpu_launcher.h). */
    const struct engram_gpu_launcher_ops *gpu_launcher;
    /* Optional, may be NULL: the configuration keys
     * this transport declares, each named <name>_<rest> after ops->name
     * (the loader refuses a plugin with any other). Their values
     * come from ENGRAM_<KEY>, the config file and engram_config_set like
     * the core keys', are checked against this table when a context is
     * created (a key loads only the transport it names), and are read at
     * open through the view. */
    const engram_config_key_decl_t *config_keys;
    int num_config_keys;
} engram_transport_ops_t;

#ifdef __cplusplus
}
#endif
#endif
