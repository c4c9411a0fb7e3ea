/* gpu_path: the one rule for which path a GPU table's rows take
 * (engram_gpu_path_report, and table create through engram_gpu_path_pick). */
#include <cuda_runtime_api.h>
#include <string.h>

#include "engram/gpu/gpu_host_gather.h"
#include "engram/gpu/gpu_path.h"
#include "engram/gpu/gpu_reach.h"
#include "hal/log.h"

engram_status_t engram_gpu_path_pick(const engram_context_t *ctx, int device, uint64_t node_bytes,
                                     engram_gpu_path_report_t *r, bool *uva_only)
{
    const int path = (int)ctx->cfg.gpu_path;
    memset((char *)r + sizeof(r->size), 0, sizeof(*r) - sizeof(r->size));
    r->path = "uva";
    *uva_only = true;
    if (path == ENGRAM_GPU_PATH_UVA) {
        r->reason = "gpu_path=uva";
        return ENGRAM_OK;
    }
    const char *why = ctx->cfg.gpu_table == ENGRAM_GPU_TABLE_DEVICE ? "the table is in GPU memory (gpu_table=device)"
                                                                     : engram_gpu_host_gather_unsupported(ctx);
    if (why != NULL && path == ENGRAM_GPU_PATH_HOST_GATHER)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "gpu_path=host_gather: %s", why);
    *uva_only = why != NULL;
    if (why != NULL) {
        r->reason = why;
        return ENGRAM_OK;
    }
    if (path == ENGRAM_GPU_PATH_HOST_GATHER) {
        r->path = "host_gather";
        r->reason = "gpu_path=host_gather";
        return ENGRAM_OK;
    }
    if (node_bytes <= ENGRAM_GPU_REACH_MIN_BYTES) {
        r->reason = "gpu_path=auto: the node's rows fit the first probe window (64 MiB)";
        return ENGRAM_OK;
    }
    engram_gpu_reach_t reach;
    engram_status_t st = engram_gpu_reach_measure(device, node_bytes, &reach);
    if (st != ENGRAM_OK)
        return st;
    r->reach_bytes = reach.reach_bytes;
    r->probed_bytes = reach.probed_bytes;
    r->share_past = reach.share_past;
    r->gbps_first = reach.gbps_first;
    if (node_bytes > reach.reach_bytes) {
        r->path = "host_gather";
        r->reason = "gpu_path=auto: the node's rows pass the GPU's measured reach into host memory";
    } else {
        r->reason = "gpu_path=auto: the node's rows are within the GPU's measured reach into host memory";
    }
    return ENGRAM_OK;
}

engram_status_t engram_gpu_path_report(const engram_context_t *ctx, uint64_t node_table_bytes,
                                       engram_gpu_path_report_t *out)
{
    if (ctx == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_gpu_path_report: ctx and out must not be NULL");
    if (out->size < sizeof(*out))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_gpu_path_report: out->size is %zu; set it to %zu",
                            out->size, sizeof(*out));
    int device = -1;
    cudaError_t ce = cudaGetDevice(&device);
    if (ce != cudaSuccess)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "engram_gpu_path_report: no current CUDA device: %s",
                            cudaGetErrorString(ce));
    bool uva_only;
    engram_gpu_path_report_t r = {.size = sizeof(r)};
    engram_status_t st = engram_gpu_path_pick(ctx, device, node_table_bytes, &r, &uva_only);
    if (st == ENGRAM_OK)
        *out = r;
    return st;
}
