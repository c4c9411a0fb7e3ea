/* The binary interface of NCCL's RMA plugins, version 14 (NCCL 2.30.x),
 * declared here in our own words so that the plugin builds without NCCL's
 * headers. NCCL finds the table below under the symbol ncclRmaPlugin_v14;
 * every layout, constant and calling order in this file must match what
 * that NCCL reads, field by field (checked by rma_plugin_test against the
 * behaviour NCCL relies on, and end to end with a real NCCL). */
#ifndef ENGRAM_RMA_ABI_H
#define ENGRAM_RMA_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ncclResult_t values. */
typedef enum rma_result {
    RMA_SUCCESS = 0,
    RMA_ERR_CUDA = 1,
    RMA_ERR_SYSTEM = 2,
    RMA_ERR_INTERNAL = 3,
    RMA_ERR_ARGUMENT = 4,
    RMA_ERR_USAGE = 5,
    RMA_ERR_REMOTE = 6,
} rma_result_t;

/* NCCL's logger: level (ncclDebugLogLevel), subsystem mask, file, line. */
enum { RMA_LOG_WARN = 2, RMA_LOG_INFO = 3 };
enum { RMA_SUBSYS_INIT = 0x1, RMA_SUBSYS_NET = 0x10 };
typedef void (*rma_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

/* Pointer kinds (props.ptrSupport and the `type` of a registration). */
#define RMA_PTR_HOST 0x1
#define RMA_PTR_CUDA 0x2
#define RMA_PTR_DMABUF 0x4

/* Signal operations of iputSignal. */
#define RMA_SIGNAL_OP_INC 0x1
#define RMA_SIGNAL_OP_ADD 0x2

/* Size of the connection handle listen() fills in. */
#define RMA_HANDLE_BYTES 128

/* ncclNetDeviceType value that makes NCCL drive the device through its
 * GIN proxy (a host thread executing the GPU's descriptors). */
#define RMA_NET_DEVICE_GIN_PROXY 2

/* ncclNetProperties_v12_t. */
typedef struct rma_vdev_props {
    int ndevs;
    int devs[8];
} rma_vdev_props_t;

typedef struct rma_net_props {
    char *name;
    char *pci_path;
    uint64_t guid;
    int ptr_support;
    int reg_is_global;
    int force_flush;
    int speed_mbps;
    int port;
    float latency;
    int max_comms;
    int max_recvs;
    int net_device_type;
    int net_device_version;
    rma_vdev_props_t vprops;
    size_t max_p2p_bytes;
    size_t max_coll_bytes;
    int max_multi_request_size;
    int16_t rail_id;
    int16_t plane_id;
} rma_net_props_t;

/* ncclRmaConfig_v14_t. */
typedef struct rma_config {
    int n_contexts;
    int traffic_class;
    int rank_stride;
} rma_config_t;

/* ncclRma_v14_t: the entry points, in NCCL's order. */
typedef struct rma_plugin_v14 {
    const char *name;
    rma_result_t (*init)(void **ctx, uint64_t comm_id, rma_logger_t log);
    rma_result_t (*devices)(int *ndev);
    rma_result_t (*get_properties)(int dev, rma_net_props_t *props);
    rma_result_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
    rma_result_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listen_comm, void **coll_comm);
    rma_result_t (*create_context)(void *coll_comm, rma_config_t *config, void **rma_ctx);
    rma_result_t (*reg_mr_sym)(void *coll_comm, void *data, size_t size, int type, uint64_t mr_flags,
                               void **mhandle);
    rma_result_t (*reg_mr_sym_dmabuf)(void *coll_comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                      uint64_t mr_flags, void **mhandle);
    rma_result_t (*dereg_mr_sym)(void *coll_comm, void *mhandle);
    rma_result_t (*destroy_context)(void *rma_ctx);
    rma_result_t (*close_coll)(void *coll_comm);
    rma_result_t (*close_listen)(void *listen_comm);
    rma_result_t (*iput)(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                         void *dst_mh, uint32_t rank, void **request);
    rma_result_t (*iput_signal)(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t signal_off, void *signal_mh,
                                uint64_t signal_value, uint32_t signal_op, bool strong, void **request);
    rma_result_t (*iget)(void *rma_ctx, int context, uint64_t remote_off, void *remote_mh, size_t size,
                         uint64_t local_off, void *local_mh, uint32_t rank, void **request);
    rma_result_t (*iflush)(void *rma_ctx, int context, void *mhandle, uint32_t rank, void **request);
    rma_result_t (*test)(void *coll_comm, void *request, int *done);
    rma_result_t (*progress)(void *rma_ctx);
    rma_result_t (*query_last_error)(void *rma_ctx, bool *has_error);
    rma_result_t (*finalize)(void *ctx);
} rma_plugin_v14_t;

#endif
