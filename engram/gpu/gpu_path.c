/* gpu_path: the one rule for which local path a GPU table's rows take
 * (engram_gpu_path_report, and table create through engram_gpu_path_pick):
 * host_gather where its capabilities (fetch_path.h) meet what the table
 * asks, and gpu_path asks it or the GPU's reach into host memory is
 * smaller than the node's rows. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "engram/gpu/fetch_path.h"
#include "engram/gpu/gpu_path.h"
#include "engram/gpu/gpu_reach.h"
#include "hal/log.h"

/* What a table of ctx asks of its local path. */
static unsigned table_needs(const engram_context_t *ctx)
{
    unsigned need = 0;
    if (ctx->cfg.gpu_table == ENGRAM_GPU_TABLE_DEVICE)
        need |= ENGRAM_GPU_CAP_DEVICE_SHARDS;
    if (engram_context_gpu_launcher(ctx) != NULL)
        need |= ENGRAM_GPU_CAP_BESIDE_LAUNCHER;
    if (engram_group_local_size(ctx->group) != engram_group_size(ctx->group))
        need |= ENGRAM_GPU_CAP_NODES;
    return need;
}

/* gpu_path=host_gather where the path lacks `cap`: the refusal. */
static engram_status_t refuse_host_gather(const engram_context_t *ctx, const char *call, unsigned cap)
{
    char asked[160];
    if (cap == ENGRAM_GPU_CAP_DEVICE_SHARDS)
        snprintf(asked, sizeof(asked), "gpu_path=host_gather with gpu_table=device");
    else if (cap == ENGRAM_GPU_CAP_BESIDE_LAUNCHER)
        snprintf(asked, sizeof(asked), "gpu_path=host_gather with transport %s (a GPU launcher)", ctx->ops->name);
    else
        snprintf(asked, sizeof(asked), "gpu_path=host_gather on %d nodes",
                 engram_group_size(ctx->group) / engram_group_local_size(ctx->group));
    engram_gpu_path_t host_gather = {.ops = &engram_gpu_host_gather_path};
    return engram_gpu_path_require(&host_gather, 1, cap, call, asked, NULL);
}

engram_status_t engram_gpu_path_pick(const engram_context_t *ctx, const char *call, int device, uint64_t node_bytes,
                                     engram_gpu_path_report_t *r, bool *uva_only)
{
    const int path = (int)ctx->cfg.gpu_path;
    memset((char *)r + sizeof(r->size), 0, sizeof(*r) - sizeof(r->size));
    r->path = engram_gpu_uva_path.name;
    *uva_only = true;
    if (path == ENGRAM_GPU_PATH_UVA) {
        r->reason = "gpu_path=uva";
        return ENGRAM_OK;
    }
    const unsigned lacks = engram_gpu_path_lacks(&engram_gpu_host_gather_path, table_needs(ctx));
    if (lacks != 0 && path == ENGRAM_GPU_PATH_HOST_GATHER)
        return refuse_host_gather(ctx, call, lacks);
    *uva_only = lacks != 0;
    if (lacks != 0) {
        r->reason = engram_gpu_cap_reason(lacks);
        return ENGRAM_OK;
    }
    if (path == ENGRAM_GPU_PATH_HOST_GATHER) {
        r->path = engram_gpu_host_gather_path.name;
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
        r->path = engram_gpu_host_gather_path.name;
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
    engram_status_t st = engram_gpu_path_pick(ctx, "engram_gpu_path_report", device, node_table_bytes, &r, &uva_only);
    if (st == ENGRAM_OK)
        *out = r;
    return st;
}
