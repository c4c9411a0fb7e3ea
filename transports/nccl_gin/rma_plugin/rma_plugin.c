/* The exported table (ncclRmaPlugin_v14) and the entry points that are not
 * data movement: one virtual device for the whole host, its properties,
 * communicator setup and teardown. See README.md for how NCCL loads it. */
#include <stdlib.h>

#include "transports/nccl_gin/rma_plugin/rma_internal.h"

/* Every init() hands out the same instance: NCCL sometimes passes another
 * plugin's context to connect(), so nothing may depend on it. */
static int instance;

static rma_result_t plugin_init(void **ctx, uint64_t comm_id, rma_logger_t log)
{
    (void)comm_id;
    if (ctx == NULL)
        return RMA_ERR_ARGUMENT;
    rma_set_logger(log);
    /* Copies run on this plugin's streams while NCCL's GIN kernels spin
     * until those copies complete. CUDA maps streams onto
     * CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 unless set before the
     * process first uses CUDA); a copy queued behind a spinning kernel on a
     * shared queue never runs. Seen with 768 gets per context (README.md). */
    const char *conn = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (conn == NULL || atoi(conn) < 32)
        RMA_WARN("CUDA_DEVICE_MAX_CONNECTIONS is %s: set it to 32 before the process first uses CUDA, or a "
                 "GIN kernel waiting for queue credits can block the copies it waits for",
                 conn != NULL ? conn : "unset (8)");
    rma_result_t res = rma_driver_load();
    if (res != RMA_SUCCESS)
        return res;
    *ctx = &instance;
    return RMA_SUCCESS;
}

static rma_result_t plugin_devices(int *ndev)
{
    if (ndev == NULL)
        return RMA_ERR_ARGUMENT;
    *ndev = 1;
    return RMA_SUCCESS;
}

static rma_result_t plugin_get_properties(int dev, rma_net_props_t *props)
{
    static char name[] = "engram-cuda-ipc";
    if (dev != 0 || props == NULL) {
        RMA_WARN("getProperties: no device %d", dev);
        return RMA_ERR_ARGUMENT;
    }
    *props = (rma_net_props_t){
        .name = name,
        .pci_path = NULL, /* no PCI device: NCCL attaches it to the first CPU */
        .guid = 0x656e6772616d4950ull,
        /* DMABUF too: NCCL then accepts windows made of several physical
         * allocations; the fd it passes is not needed (regMrSymDmaBuf). */
        .ptr_support = RMA_PTR_HOST | RMA_PTR_CUDA | RMA_PTR_DMABUF,
        .speed_mbps = 400000,
        .port = 1,
        .latency = 0.0f,
        .max_comms = 65536,
        .max_recvs = 8, /* NCCL's GIN proxy queues 32 x max_recvs descriptors per peer */
        .net_device_type = RMA_NET_DEVICE_GIN_PROXY,
        .net_device_version = 0,
        .vprops = {.ndevs = 1, .devs = {0}},
        .max_p2p_bytes = (size_t)1 << 40,
        .max_coll_bytes = (size_t)1 << 40,
        .max_multi_request_size = 1,
        .rail_id = -1,
        .plane_id = -1,
    };
    return RMA_SUCCESS;
}

static rma_result_t plugin_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
    (void)ctx;
    if (dev != 0 || handle == NULL || listen_comm == NULL) {
        RMA_WARN("listen: bad arguments (device %d)", dev);
        return RMA_ERR_ARGUMENT;
    }
    return rma_mesh_listen(handle, listen_comm);
}

static rma_result_t plugin_close_coll(void *coll_comm)
{
    rma_comm_t *c = coll_comm;
    if (c == NULL)
        return RMA_SUCCESS;
    rma_result_t res = rma_use_device(c);
    while (c->regions != NULL) {
        RMA_INFO("rank %d: closing with a registration left; releasing it", c->rank);
        rma_result_t r = rma_region_deregister(c, c->regions);
        if (res == RMA_SUCCESS)
            res = r;
    }
    while (c->contexts != NULL) {
        rma_result_t r = rma_ops_destroy_context(c->contexts);
        if (res == RMA_SUCCESS)
            res = r;
    }
    if (c->module != NULL)
        engram_cu.cuModuleUnload(c->module);
    if (c->signal_stream != NULL)
        cudaStreamDestroy(c->signal_stream);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->sig_lock);
    rma_mesh_close(c);
    return res;
}

static rma_result_t plugin_connect(void *ctx, void *handles[], int nranks, int rank, void *listen_comm,
                                   void **coll_comm)
{
    (void)ctx;
    rma_result_t res = rma_driver_load();
    int dev = -1;
    if (res == RMA_SUCCESS && cudaGetDevice(&dev) != cudaSuccess) {
        RMA_WARN("connect: no current CUDA device");
        res = RMA_ERR_CUDA;
    }
    rma_comm_t *c = NULL;
    if (res == RMA_SUCCESS)
        res = rma_mesh_connect(handles, nranks, rank, listen_comm, &c);
    if (res != RMA_SUCCESS)
        return res;
    c->cuda_dev = dev;
    cudaError_t e = cudaStreamCreateWithFlags(&c->signal_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        RMA_WARN("connect: cudaStreamCreate: %s", cudaGetErrorString(e));
        res = RMA_ERR_CUDA;
    }
    if (res == RMA_SUCCESS)
        res = rma_signal_kernel_load(c);
    if (res != RMA_SUCCESS) {
        (void)plugin_close_coll(c);
        return res;
    }
    RMA_INFO("rank %d of %d connected on GPU %d", rank, nranks, dev);
    *coll_comm = c;
    return RMA_SUCCESS;
}

static rma_result_t plugin_reg_mr_sym(void *coll_comm, void *data, size_t size, int type, uint64_t mr_flags,
                                      void **mhandle)
{
    (void)mr_flags; /* strict ordering is what every copy here has anyway */
    if (coll_comm == NULL)
        return RMA_ERR_ARGUMENT;
    return rma_region_register(coll_comm, data, size, type, mhandle);
}

static rma_result_t plugin_reg_mr_sym_dmabuf(void *coll_comm, void *data, size_t size, int type, uint64_t offset,
                                             int fd, uint64_t mr_flags, void **mhandle)
{
    (void)offset;
    (void)fd; /* NCCL closes it; the address range is what gets shared */
    return plugin_reg_mr_sym(coll_comm, data, size, type, mr_flags, mhandle);
}

static rma_result_t plugin_dereg_mr_sym(void *coll_comm, void *mhandle)
{
    if (coll_comm == NULL)
        return RMA_ERR_ARGUMENT;
    return rma_region_deregister(coll_comm, mhandle);
}

static rma_result_t plugin_finalize(void *ctx)
{
    (void)ctx;
    return RMA_SUCCESS;
}

__attribute__((visibility("default"))) rma_plugin_v14_t ncclRmaPlugin_v14 = {
    .name = "engram_cuda_ipc",
    .init = plugin_init,
    .devices = plugin_devices,
    .get_properties = plugin_get_properties,
    .listen = plugin_listen,
    .connect = plugin_connect,
    .create_context = rma_ops_create_context,
    .reg_mr_sym = plugin_reg_mr_sym,
    .reg_mr_sym_dmabuf = plugin_reg_mr_sym_dmabuf,
    .dereg_mr_sym = plugin_dereg_mr_sym,
    .destroy_context = rma_ops_destroy_context,
    .close_coll = plugin_close_coll,
    .close_listen = rma_mesh_close_listen,
    .iput = rma_ops_iput,
    .iput_signal = rma_ops_iput_signal,
    .iget = rma_ops_iget,
    .iflush = rma_ops_iflush,
    .test = rma_ops_test,
    .progress = rma_ops_progress,
    .query_last_error = rma_ops_query_last_error,
    .finalize = plugin_finalize,
};
