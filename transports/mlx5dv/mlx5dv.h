/* mlx5dv transport: RDMA READs posted as raw WQEs on ConnectX send queues
 * (one RC QP per (queue, peer)), completions polled from the CQ by owner
 * bit. Absent with "no mlx5 device" where rdma-core finds none. */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_H
#define ENGRAM_TRANSPORTS_MLX5DV_H

#include "engram/plugin/transport.h"

extern const engram_transport_ops_t engram_mlx5dv_ops;

#endif
