/* The gets one GIN context holds in flight per peer, as NCCL 2.30 sizes its
 * queues: what nccl_gin_plan.h spreads a fetch against. */
#ifndef ENGRAM_TRANSPORTS_NCCL_GIN_DEPTH_H
#define ENGRAM_TRANSPORTS_NCCL_GIN_DEPTH_H

#include <stdint.h>

/* ncclGinType_t's NCCL_GIN_TYPE_PROXY: descriptors through a host thread. */
enum { ENGRAM_NCCL_GIN_TYPE_PROXY = 2 };

/* gin_type: the communicator's ncclGinType_t; configured: the
 * nccl_gin_queue_depth key (0 = NCCL's default); proxy_env, gdaki_env: the
 * values of NCCL_GIN_PROXY_QUEUE_SIZE and NCCL_GIN_GDAKI_QP_DEPTH (NULL
 * when unset). Proxy mode: NCCL_GIN_PROXY_QUEUE_SIZE when it is a power of
 * two up to 256, else 256 (32 requests x the 8 receives of NCCL's IB proxy
 * and of engram's RMA plugin); NCCL ignores ginQueueDepth there. Otherwise
 * (GDAKI): configured, else NCCL_GIN_GDAKI_QP_DEPTH, else 128. */
uint32_t engram_nccl_gin_queue_depth(int gin_type, int configured, const char *proxy_env, const char *gdaki_env);

#endif
