/* A transport that records every call instead of moving data, for checking
 * the engram layer's flush policy and routing. Gets write the source
 * (peer, remote offset) into the destination so routing can be verified. */
#ifndef ENGRAM_TESTS_RECORDING_TRANSPORT_H
#define ENGRAM_TESTS_RECORDING_TRANSPORT_H

#include "engram/plugin/transport.h"

#define RECORDING_MAX_OPS 65536

typedef struct recorded_op {
    char kind; /* 'g' get, 'f' flush */
    int queue, peer;
    uint64_t remote_off, local_off;
    size_t len;
    unsigned flags;
} recorded_op_t;

typedef struct recording_log {
    int num_ops;
    recorded_op_t ops[RECORDING_MAX_OPS];
    int open_regions;   /* registered and not yet deregistered */
    int open_requests;  /* flushed and not yet freed */
    engram_reg_span_t last_span;
} recording_log_t;

extern recording_log_t recording_log;
/* The capabilities the transport reports; tests change them to play other
 * kinds of backend and restore them with recording_caps_reset. Default:
 * host-initiated and hybrid, reading and writing host memory, 8 queues,
 * 2^20 gets outstanding per queue. */
extern engram_transport_caps_t recording_caps;
void recording_caps_reset(void);
/* alloc_symmetric's outcome: ENGRAM_ERR_UNSUPPORTED (the default: the
 * engram layer falls back to a host segment and reg_symmetric), ENGRAM_OK
 * (zeroed heap memory, recording_alloc_flags as the region's ENGRAM_REGION_* flags, its
 * address in recording_alloc_addr) or another error. Calls are counted. */
extern engram_status_t recording_alloc_status;
extern uint32_t recording_alloc_flags;
extern void *recording_alloc_addr;
extern int recording_alloc_calls;
/* What test answers for every request (default ENGRAM_OK; ENGRAM_INPROGRESS
 * plays gets that never complete). */
extern engram_status_t recording_test_status;
extern const engram_transport_ops_t recording_transport_ops;

#endif
