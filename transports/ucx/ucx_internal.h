/* State shared by the UCX transport's files (internal). */
#ifndef ENGRAM_TRANSPORTS_UCX_INTERNAL_H
#define ENGRAM_TRANSPORTS_UCX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#include "engram/plugin/deadline.h"
#include "engram/plugin/transport.h"
#include "engram/plugin/held_copy.h"
#include "engram/plugin/segment.h"

#define UCX_DEFAULT_QUEUES 4

typedef struct ucx_queue ucx_queue_t;

/* One endpoint: (queue, rank). Its address is the user data of the error
 * handler and of the get callbacks, so both know whom they are about. */
typedef struct ucx_conn {
    ucp_ep_h ep;
    ucx_queue_t *queue;
    engram_transport_t *t;
    int rank;
    unsigned inflight;      /* this endpoint's share of queue->inflight */
    unsigned posted;        /* ucp_get_nbx calls since the last flush: none, nothing to flush */
    ucs_status_t get_error; /* first failed get since the last flush reported it */
    uint64_t am_issued;     /* active-message gets ever sent (their seq) */
} ucx_conn_t;

/* An active-message get awaiting its reply (ucx_am_get.c). */
typedef struct ucx_am_slot {
    ucx_conn_t *conn; /* NULL: free */
    char *dst;
    uint32_t next_free;
    struct ucx_am_get_hdr {
        uint64_t addr;  /* in the owner's address space */
        uint64_t len;
        uint64_t seq;   /* conn->am_issued at issue: what flushes wait for */
        uint32_t token; /* this slot's index on the requester's queue */
        int32_t rank;   /* requester (in a request), owner (in a reply) */
        int32_t status; /* reply: 0, or the owner refused the bytes */
        uint32_t pad;
    } hdr; /* the request's header, read by UCP until it is sent */
} ucx_am_slot_t;

/* Direct gets (peer memory mapped here) held per queue until the doorbell. */
#define UCX_HELD_DEPTH 1024

struct ucx_queue {
    engram_transport_t *t;
    /* Held by the queue's own calls and, briefly, by another queue's
     * thread serving peers through this worker (owner-progress transports:
     * a stalled queue must not starve peers waiting on this one). */
    int busy;
    ucp_worker_h worker;
    ucx_conn_t *conns; /* [size] */
    unsigned inflight; /* gets posted whose completion callback has not run */
    engram_request_t *requests; /* flushes not yet freed by the caller */
    /* Direct gets since the last doorbell, copied in one prefetching loop.
     * Only the queue's own calls and dereg/close touch them, never
     * serve_others, so direct gets do not take `busy`. */
    engram_held_copy_t *held; /* [UCX_HELD_DEPTH] */
    unsigned nheld;
    /* Our active-message gets (t->am_gets): ucx_window slots, a free list. */
    ucx_am_slot_t *am_slots;
    uint32_t am_nslots, am_free;
};

struct engram_region {
    engram_region_t *next; /* the transport's list, so close frees leftovers */
    bool symmetric;
    engram_reg_span_t span;
    ucp_mem_h memh;
    char *local_base; /* this process's view of the registered memory */
    size_t local_size;
    int npeers;
    uint64_t *remote_base; /* [npeers]: the peer's address of its region */
    size_t remote_size;    /* bytes each peer's region holds */
    ucp_rkey_h *rkeys;     /* [nqueues * npeers], unpacked on each queue's endpoint */
    /* [npeers]: the peer's region mapped into this process (ucp_rkey_ptr:
     * posix/sysv/xpmem memory UCX allocated; this rank's own region), read
     * with memcpy, no request, no owner CPU; NULL where gets go through
     * ucp_get_nbx. Only queue 0's rkey is unpacked for such a peer. Whole
     * array NULL after a quiesce. */
    char **direct;
    bool allocated; /* memh's memory is UCX's (alloc_symmetric) */
    engram_segment_span_t node_span; /* hybrid: node-mates' segments back to back */
};

struct engram_transport {
    engram_group_t *group;
    engram_transport_shape_t shape;
    unsigned window;
    uint64_t timeout_ns;
    ucp_context_h ctx;
    int nqueues;
    ucx_queue_t *queues;
    uint8_t *peer_dead; /* [size]: set on failure reports and pid checks, read with atomics */
    int *peer_watch;    /* [size]: pid_watch of a peer on this host, -1 when it cannot be watched */
    bool err_mode_peer; /* endpoints report peer failure (not all UCX transports can) */
    engram_region_t *regions;
    bool target_progress; /* no lane reads remote memory: gets are active messages the owner serves */
    bool am_gets;         /* ... and they are ours (ucx_am_get.c), not UCP's emulation */
    char quiesced[192];   /* why every worker was destroyed; empty: they were not */
};

struct engram_request {
    engram_request_t *prev, *next; /* the queue's list */
    ucs_status_ptr_t ucp_req; /* the endpoint flush; NULL once finished */
    uint64_t am_seq;          /* active-message gets: waits for the conn's gets up to this seq; 0 once finished */
    ucx_conn_t *conn;
    uint64_t deadline_ns;
    uint64_t next_check_ns; /* when to look at the peer's pid again */
    engram_status_t result; /* final status once ucp_req is NULL */
};

bool engram_ucx_peer_is_dead(const engram_transport_t *t, int rank);
/* Collective: learns which peers share this host and watches them
 * (pid_watch.h); liveness_close closes the watches. */
engram_status_t engram_ucx_liveness_init(engram_transport_t *t);
void engram_ucx_liveness_close(engram_transport_t *t);
/* Whether `rank` has failed; marks it dead if its watched process exited. */
bool engram_ucx_check_peer(engram_transport_t *t, int rank);

/* Collective: every rank contributes `len` bytes (lengths may differ);
 * *all receives size blobs at a stride of *stride, *lens their lengths.
 * The caller frees *all and *lens. */
engram_status_t engram_ucx_allgather_blobs(engram_group_t *group, const void *mine, size_t len, char **all,
                                           size_t *stride, size_t **lens);

engram_status_t engram_ucx_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                         engram_region_t **out);
engram_status_t engram_ucx_alloc_symmetric(engram_transport_t *t, const engram_segment_params_t *params,
                                           engram_reg_span_t span, engram_region_t **out, void **addr,
                                           uint32_t *region_flags);
engram_status_t engram_ucx_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out);
void engram_ucx_dereg(engram_transport_t *t, engram_region_t *region);
/* Destroys every worker (`why`: a peer failure): peers' gets still on
 * their way are then never served. Once only; gets and flushes then fail,
 * requests still open end with ENGRAM_ERR_PEER. */
void engram_ucx_quiesce(engram_transport_t *t, const char *why);
void engram_ucx_rkeys_destroy(engram_transport_t *t);
/* Copies every held direct get of every queue (before memory they read or
 * write goes away). */
void engram_ucx_ring_all(engram_transport_t *t);
/* Ends the queue's open requests with ENGRAM_ERR_PEER (the queue held). */
void engram_ucx_requests_cancel(engram_transport_t *t, ucx_queue_t *q);
/* A failed rank (pid checks included), or -1 when none is known. */
int engram_ucx_failed_peer(engram_transport_t *t);

engram_status_t engram_ucx_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                               uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                               unsigned flags);
engram_status_t engram_ucx_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req);
engram_status_t engram_ucx_test(engram_transport_t *t, engram_request_t *req);
void engram_ucx_request_free(engram_transport_t *t, engram_request_t *req);
engram_status_t engram_ucx_progress(engram_transport_t *t);
void engram_ucx_queue_enter(ucx_queue_t *q);
void engram_ucx_queue_leave(ucx_queue_t *q);
/* With owner progress: progresses the other queues' workers that are not
 * in use right now, so peers' gets to them are served. */
void engram_ucx_serve_others(engram_transport_t *t, const ucx_queue_t *self);

/* Gets as active messages (ucx_am_get.c says why). am_init: the queue's
 * slots and handlers; am_get: one get (the window has room); am_flushed:
 * the conn's gets up to `seq` have landed; am_reclaim: a dead peer's gets
 * give their slots back (late replies are then ignored). */
engram_status_t engram_ucx_am_init(engram_transport_t *t, ucx_queue_t *q);
engram_status_t engram_ucx_am_get(ucx_conn_t *conn, uint64_t remote_addr, char *dst, size_t len);
bool engram_ucx_am_flushed(const ucx_conn_t *conn, uint64_t seq);
void engram_ucx_am_reclaim(ucx_conn_t *conn);

/* The endpoints' lanes as "tl/dev(roles), ..." into buf; returns whether
 * any lane does RMA itself (false: gets are active messages, served by the
 * owner's CPU: ucx_am_get.c). */
bool engram_ucx_lanes(const engram_transport_t *t, char *buf, size_t len);
void engram_ucx_describe(const engram_transport_t *t, char *buf, size_t len);

#endif
