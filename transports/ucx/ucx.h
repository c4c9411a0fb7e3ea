/* UCX transport: host-initiated one-sided gets through UCP, the fallback
 * that runs on any fabric UCX drives (rc/dc mlx5, TCP, shared memory).
 * One ucp_context, one worker per queue, endpoints from every worker to the
 * same-numbered worker of every rank. UCX's own environment (UCX_TLS,
 * UCX_NET_DEVICES, ...) selects the transports. */
#ifndef ENGRAM_TRANSPORTS_UCX_H
#define ENGRAM_TRANSPORTS_UCX_H

#include "engram/plugin/transport.h"

extern const engram_transport_ops_t engram_ucx_ops;

#endif
