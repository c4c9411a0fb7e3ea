/* State shared by the nccl_gin transport (communicator) and its fetch
 * launcher (windows, dev comms, kernels). */
#ifndef ENGRAM_TRANSPORTS_NCCL_GIN_INTERNAL_H
#define ENGRAM_TRANSPORTS_NCCL_GIN_INTERNAL_H

#include <nccl.h>
#include <stdbool.h>
#include "engram/plugin/gpu_launcher.h"
#include "engram/plugin/transport.h"

/* Queues offered: one GIN context (and one kernel block) each. */
#define ENGRAM_NCCL_GIN_MAX_QUEUES 16

struct engram_transport {
    engram_group_t *group;
    ncclComm_t comm;
    int rank, size, local_size;
    bool hybrid;     /* node spans: the engram layer loads its node's rows */
    bool rail;       /* RAIL connections (hybrid, one rank per node); else FULL */
    int queue_depth; /* ginQueueDepth; 0 = NCCL's default */
    int gin_type;    /* ncclGinType_t of the connections used */
};

extern const engram_gpu_launcher_ops_t engram_nccl_gin_launcher;

/* An NCCL failure as an engram error, with NCCL's last error text. */
engram_status_t engram_nccl_gin_error(ncclComm_t comm, const char *what, ncclResult_t r);

#endif
