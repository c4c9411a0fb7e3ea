/* nccl_gin transport: GPU-initiated one-sided gets through NCCL's GIN
 * (device API, NCCL >= 2.30.4). Posts no host-initiated gets: it provides a
 * fetch launcher (engram/plugin/gpu_launcher.h) for recv=CUDA tables. */
#ifndef ENGRAM_TRANSPORTS_NCCL_GIN_H
#define ENGRAM_TRANSPORTS_NCCL_GIN_H

#include "engram/plugin/transport.h"

extern const engram_transport_ops_t engram_nccl_gin_ops;

#endif
