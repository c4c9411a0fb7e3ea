/* The nccl_gin kernels and the NCCL device-API calls (C++ only) behind a C
 * interface; nccl_gin_kernel.cu implements it. Internal to the backend. */
#ifndef ENGRAM_TRANSPORTS_NCCL_GIN_KERNEL_H
#define ENGRAM_TRANSPORTS_NCCL_GIN_KERNEL_H

#include <nccl.h>
#include <stdint.h>
#include "engram/plugin/routing.h"

/* CUDA's include directory may carry an older NCCL's headers: the build's
 * include order must put NCCL_HOME's first. */
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 30, 4)
#error "nccl_gin: compiled against NCCL headers older than 2.30.4"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One NCCL ncclGinRequest_t (checked in the .cu). */
typedef struct engram_nccl_gin_req {
    uint64_t opaque[2];
} engram_nccl_gin_req_t;

typedef struct engram_nccl_gin_issue_args {
    engram_route_shape_t shape;
    const int64_t *indices; /* device, [num_tokens * entries_per_token] */
    uint32_t num_tokens;
    uint32_t entries_per_token;
    uint32_t row_bytes;
    uint32_t flush_depth;
    uint64_t rows_off;    /* offset of the receive slot's row 0 in recv_win */
    uint32_t rail;        /* rail team (one rank per node: peer = node = rank); else world team */
    uint32_t first_local_peer, local_peers; /* routed peers the engram layer loads itself */
    uint32_t num_peers;   /* of the team */
    uint32_t contexts;    /* GIN contexts of the dev comm */
    uint32_t per_queue;   /* contexts each queue owns (nccl_gin_plan.h) */
    uint32_t batches;     /* blocks per queue of this fetch, <= per_queue */
    int first_queue, num_queues;
    ncclWindow_t recv_win;  /* this rank's receive region */
    ncclWindow_t shard_win; /* every rank's own shard: a row at engram_route_owner's offset */
    engram_nccl_gin_req_t *reqs; /* device, this slot's [num_queues * batches][num_peers] */
    uint8_t *flushed;            /* device, the same shape: reqs[i] is live */
} engram_nccl_gin_issue_args_t;

typedef struct engram_nccl_gin_wait_args {
    uint32_t num_peers;
    uint32_t contexts, per_queue, batches; /* the issue's */
    int first_queue, num_queues;
    const engram_nccl_gin_req_t *reqs;
    const uint8_t *flushed;
} engram_nccl_gin_wait_args_t;

/* NCCL_VERSION_CODE the kernels were compiled against. */
int engram_nccl_gin_built_version(void);
/* Queues and teams the kernel can serve: the largest team and the shared
 * memory its flush counters need stay below the device limit. */
uint32_t engram_nccl_gin_max_peers(void);

/* What ncclCommQueryProperties says about the communicator. */
typedef struct engram_nccl_gin_props {
    int device_api;      /* kernels may use the device API */
    int gin_type;        /* ncclGinType_t with FULL connections (0: none) */
    int railed_gin_type; /* ncclGinType_t with RAIL connections (0: none) */
    int lsa_teams;       /* NCCL's nodes: groups of ranks that share memory */
} engram_nccl_gin_props_t;
int engram_nccl_gin_query(ncclComm_t comm, engram_nccl_gin_props_t *out);

/* ncclDevCommCreate with `contexts` GIN contexts, RAIL (rail != 0) or
 * FULL connections, queue_depth (0: NCCL's default). *devcomm is an opaque
 * ncclDevComm; *made the contexts NCCL made. Returns an ncclResult_t. */
int engram_nccl_gin_devcomm_create(ncclComm_t comm, int contexts, int rail, int queue_depth, void **devcomm,
                                   uint32_t *made);
void engram_nccl_gin_devcomm_destroy(ncclComm_t comm, void *devcomm);

/* Launches on stream (a cudaStream_t); return the launch's cudaError_t. */
int engram_nccl_gin_issue_launch(const void *devcomm, const engram_nccl_gin_issue_args_t *a, void *stream);
int engram_nccl_gin_wait_launch(const void *devcomm, const engram_nccl_gin_wait_args_t *a, void *stream);

#ifdef __cplusplus
}
#endif
#endif
