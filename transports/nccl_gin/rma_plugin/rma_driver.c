/* Loading the CUDA driver entry points (memory/cuda_driver.h: found through
 * the runtime, so the plugin needs no libcuda at link time), logging, the
 * calling thread's device, and the one-thread kernel that applies a signal
 * to this rank's memory. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "transports/nccl_gin/rma_plugin/rma_internal.h"

static _Atomic(rma_logger_t) logger;

void rma_set_logger(rma_logger_t log)
{
    atomic_store(&logger, log);
}

void rma_log(int level, const char *file, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rma_logger_t log = atomic_load(&logger);
    if (log != NULL)
        log(level, RMA_SUBSYS_NET | RMA_SUBSYS_INIT, file, line, "engram RMA: %s", msg);
    else if (level == RMA_LOG_WARN)
        fprintf(stderr, "engram RMA %s:%d: %s\n", file, line, msg);
}

rma_result_t rma_driver_load(void)
{
    const char *why = NULL;
    if (!engram_cu_driver_load(&why)) {
        RMA_WARN("%s", why);
        return RMA_ERR_CUDA;
    }
    return RMA_SUCCESS;
}

rma_result_t rma_use_device(rma_comm_t *c)
{
    cudaError_t e = cudaSetDevice(c->cuda_dev);
    if (e != cudaSuccess) {
        RMA_WARN("cudaSetDevice(%d): %s", c->cuda_dev, cudaGetErrorString(e));
        return RMA_ERR_CUDA;
    }
    return RMA_SUCCESS;
}

/* add_u64(addr, value): one atomic add by one thread. PTX, JIT-compiled by
 * the driver for whatever GPU this is. */
static const char signal_ptx[] = ".version 7.0\n"
                                 ".target sm_70\n"
                                 ".address_size 64\n"
                                 ".visible .entry engram_rma_signal_add(.param .u64 p_addr, .param .u64 p_value)\n"
                                 "{\n"
                                 "  .reg .u64 %rd<4>;\n"
                                 "  ld.param.u64 %rd1, [p_addr];\n"
                                 "  ld.param.u64 %rd2, [p_value];\n"
                                 "  atom.add.u64 %rd3, [%rd1], %rd2;\n"
                                 "  ret;\n"
                                 "}\n";

rma_result_t rma_signal_kernel_load(rma_comm_t *c)
{
    CUresult r = engram_cu.cuModuleLoadData(&c->module, signal_ptx);
    if (r == CUDA_SUCCESS)
        r = engram_cu.cuModuleGetFunction(&c->signal_add, c->module, "engram_rma_signal_add");
    if (r != CUDA_SUCCESS) {
        RMA_WARN("loading the signal kernel on GPU %d: %s", c->cuda_dev, engram_cu_str(r));
        return RMA_ERR_CUDA;
    }
    return RMA_SUCCESS;
}

rma_result_t rma_signal_kernel_add(rma_comm_t *c, uint64_t *addr, uint64_t value)
{
    void *args[] = {&addr, &value};
    CUresult r = engram_cu.cuLaunchKernel(c->signal_add, 1, 1, 1, 1, 1, 1, 0, (CUstream)c->signal_stream, args, NULL);
    if (r != CUDA_SUCCESS) {
        RMA_WARN("launching the signal kernel: %s", engram_cu_str(r));
        return RMA_ERR_CUDA;
    }
    return RMA_SUCCESS;
}
