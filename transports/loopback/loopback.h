/* Loopback transport: the hardware-free reference. Ranks on one host map
 * each other's segments read-only (fds passed over Unix sockets) and a get
 * is a copy. Honours the whole transport contract (queues, AGGREGATE,
 * per-peer flush requests, bounds checks) so the engram layer cannot tell
 * it from a NIC. */
#ifndef ENGRAM_TRANSPORTS_LOOPBACK_H
#define ENGRAM_TRANSPORTS_LOOPBACK_H

#include "engram/plugin/transport.h"

extern const engram_transport_ops_t engram_loopback_ops;

#endif
