/* Shared state of the NIC-less RMA plugin (see README.md): a full mesh of
 * Unix sockets among the ranks of one host, registrations mapped into every
 * rank through exported cuMem handles, copies on CUDA streams. */
#ifndef ENGRAM_RMA_INTERNAL_H
#define ENGRAM_RMA_INTERNAL_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "memory/cuda_driver.h"
#include <pthread.h>
#include <stdatomic.h>

#include "transports/nccl_gin/rma_plugin/rma_abi.h"
#include "transports/nccl_gin/rma_plugin/rma_order.h"

#define RMA_HIDDEN __attribute__((visibility("hidden")))

/* ---- logging through NCCL's logger (stderr before init) ---- */
RMA_HIDDEN void rma_log(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
RMA_HIDDEN void rma_set_logger(rma_logger_t log);
#define RMA_WARN(...) rma_log(RMA_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define RMA_INFO(...) rma_log(RMA_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)

/* ---- CUDA driver entry points: memory/cuda_driver.h's engram_cu ---- */
/* Loads the entry points once; RMA_ERR_CUDA (logged) when one is missing. */
RMA_HIDDEN rma_result_t rma_driver_load(void);

/* ---- the mesh: one collective communicator ---- */
typedef struct rma_region rma_region_t;
typedef struct rma_context rma_context_t;

typedef struct rma_comm {
    int nranks, rank;
    int cuda_dev;
    int *ctl; /* per peer: collective steps (registration); -1 for self */
    int *sig; /* per peer: signal updates for the peer's memory; -1 for self */
    pthread_mutex_t sig_lock; /* the sig sockets: sends and drains */
    pthread_mutex_t lock;     /* regions and contexts */
    rma_region_t *regions;
    rma_context_t *contexts;
    uint64_t next_region_id;
    cudaStream_t signal_stream; /* signal updates applied to this rank's GPU-visible memory */
    CUmodule module;
    CUfunction signal_add; /* one thread: atomic add of a u64 */
    atomic_bool failed;    /* sticky: what queryLastError reports */
} rma_comm_t;

/* A signal update travelling to the owner of the signal's memory. */
typedef struct rma_signal_msg {
    uint64_t region_id; /* the owner's id of the registration */
    uint64_t offset;
    uint64_t value; /* already resolved: INC travels as 1 */
} rma_signal_msg_t;

RMA_HIDDEN rma_result_t rma_mesh_listen(void *handle, void **listen_comm);
RMA_HIDDEN rma_result_t rma_mesh_close_listen(void *listen_comm);
RMA_HIDDEN rma_result_t rma_mesh_connect(void *handles[], int nranks, int rank, void *listen_comm,
                                         rma_comm_t **out);
RMA_HIDDEN void rma_mesh_close(rma_comm_t *c);
/* Sends `len` bytes (one packet) with `nfds` fds to every peer. */
RMA_HIDDEN rma_result_t rma_mesh_send_all(rma_comm_t *c, const void *buf, size_t len, const int *fds, int nfds);
/* Receives one packet from `peer`: at most `cap` bytes and `max_fds` fds. */
RMA_HIDDEN rma_result_t rma_mesh_recv(rma_comm_t *c, int peer, void *buf, size_t cap, size_t *len, int *fds,
                                      int max_fds, int *nfds);
/* Collective: true on every rank iff `ok` on every rank. */
RMA_HIDDEN bool rma_mesh_agree(rma_comm_t *c, bool ok);
/* Queues a signal update to `peer` (never blocks on a peer that drains). */
RMA_HIDDEN rma_result_t rma_mesh_send_signal(rma_comm_t *c, int peer, const rma_signal_msg_t *m);
/* Applies every signal update the peers have sent to this rank. */
RMA_HIDDEN rma_result_t rma_mesh_drain(rma_comm_t *c);

/* ---- registrations ---- */
typedef struct rma_view {
    char *base;    /* where this rank reaches the rank's registration; NULL: not shared */
    uint64_t size; /* that rank's registered size */
    uint64_t id;   /* that rank's id of it (signal messages name it) */
    CUdeviceptr va; /* our reservation holding the mapping, 0 if none */
    size_t va_len;
    int nseg;
    CUmemGenericAllocationHandle *handles;
    size_t *seg_len;
} rma_view_t;

struct rma_region {
    rma_region_t *next;
    rma_comm_t *comm;
    uint64_t id;
    char *addr;
    size_t size;
    bool cpu_signal; /* memory CUDA does not know: signals applied by the CPU */
    rma_view_t *views; /* per rank; views[own rank].base == addr */
};

RMA_HIDDEN rma_result_t rma_region_register(rma_comm_t *c, void *data, size_t size, int type, void **mhandle);
RMA_HIDDEN rma_result_t rma_region_deregister(rma_comm_t *c, void *mhandle);
/* Adds `value` to the u64 at `offset` of this rank's region `id`. */
RMA_HIDDEN rma_result_t rma_region_apply_signal(rma_comm_t *c, const rma_signal_msg_t *m);

/* ---- contexts and requests ---- */
/* NCCL contexts share the context's copy streams round-robin beyond this
 * many (context i on stream i % RMA_MAX_STREAMS): CUDA has at most 32
 * hardware queues (CUDA_DEVICE_MAX_CONNECTIONS), and a copy stream that
 * shares one with a GIN kernel spinning for that copy never runs, so the
 * plugin keeps half of them and leaves the rest to the application's
 * streams whatever the number of GIN contexts. */
#define RMA_MAX_STREAMS 16

struct rma_context {
    rma_context_t *next;
    rma_comm_t *comm;
    int n;                     /* NCCL contexts */
    int nstreams;              /* min(n, RMA_MAX_STREAMS) */
    cudaStream_t *streams;     /* [nstreams]: context i copies on stream i % nstreams */
    rma_stream_order_t *order; /* [nstreams] */
};

RMA_HIDDEN rma_result_t rma_ops_create_context(void *coll_comm, rma_config_t *config, void **rma_ctx);
RMA_HIDDEN rma_result_t rma_ops_destroy_context(void *rma_ctx);
/* Waits for every copy this communicator's contexts issued. */
RMA_HIDDEN rma_result_t rma_ops_quiesce(rma_comm_t *c);
RMA_HIDDEN rma_result_t rma_ops_iput(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                     uint64_t dst_off, void *dst_mh, uint32_t rank, void **request);
RMA_HIDDEN rma_result_t rma_ops_iput_signal(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                            uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t signal_off,
                                            void *signal_mh, uint64_t signal_value, uint32_t signal_op, bool strong,
                                            void **request);
RMA_HIDDEN rma_result_t rma_ops_iget(void *rma_ctx, int context, uint64_t remote_off, void *remote_mh, size_t size,
                                     uint64_t local_off, void *local_mh, uint32_t rank, void **request);
RMA_HIDDEN rma_result_t rma_ops_iflush(void *rma_ctx, int context, void *mhandle, uint32_t rank, void **request);
RMA_HIDDEN rma_result_t rma_ops_test(void *coll_comm, void *request, int *done);
RMA_HIDDEN rma_result_t rma_ops_progress(void *rma_ctx);
RMA_HIDDEN rma_result_t rma_ops_query_last_error(void *rma_ctx, bool *has_error);

/* The signal kernel: loaded once per communicator; adds `value` to the
 * u64 at `addr` (GPU-visible) on the communicator's signal stream. */
RMA_HIDDEN rma_result_t rma_signal_kernel_load(rma_comm_t *c);
RMA_HIDDEN rma_result_t rma_signal_kernel_add(rma_comm_t *c, uint64_t *addr, uint64_t value);

/* Makes the communicator's GPU current on the calling thread (NCCL calls
 * from its own progress threads). */
RMA_HIDDEN rma_result_t rma_use_device(rma_comm_t *c);

#endif
