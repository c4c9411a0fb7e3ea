/* gpu_path: the one rule for which local path a GPU table's rows take
 * (engram_gpu_path_report, and table create through engram_gpu_path_pick):
 * host_gather where its capabilities (fetch_path.h) meet what the table
 * asks, and gpu_path asks it or, on auto, it delivers more than uva on
 * this host as the probe measured (gpu_reach.h; the decision is
 * path_choice.c's). */
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

/* host_gather's settings as a table of ctx on `device` takes them: its
 * shard's NUMA node (numa_node, else the GPU's), pages, pool and chunks. */
static engram_gpu_probe_want_t probe_want(const engram_context_t *ctx, int device, uint64_t node_bytes)
{
    int node = -1;
    if (ctx->cfg.numa_node >= 0)
        node = (int)ctx->cfg.numa_node;
    else if (cudaDeviceGetAttribute(&node, cudaDevAttrHostNumaId, device) != cudaSuccess || node < 0)
        node = -1;
    return (engram_gpu_probe_want_t){.bytes = node_bytes, .numa_node = node, .huge = ctx->cfg.huge_pages,
                                     .gather_threads = (int)ctx->cfg.gather_threads,
                                     .local_ranks = engram_group_local_size(ctx->group),
                                     .chunk_bytes = (uint64_t)ctx->cfg.gather_chunk_kib * 1024};
}

engram_status_t engram_gpu_path_pick(const engram_context_t *ctx, const char *call, int device, uint64_t node_bytes,
                                     engram_gpu_path_report_t *r, bool *uva_only)
{
    const engram_gpu_path_ask_t ask = {
        .gpu_path = (int)ctx->cfg.gpu_path,
        .lacks = engram_gpu_path_lacks(&engram_gpu_host_gather_path, table_needs(ctx)),
        .node_bytes = node_bytes,
    };
    *uva_only = ask.gpu_path == ENGRAM_GPU_PATH_UVA || ask.lacks != 0;
    engram_gpu_probe_t probe;
    if (engram_gpu_path_needs_probe(&ask)) {
        const engram_gpu_probe_want_t want = probe_want(ctx, device, node_bytes);
        engram_status_t st = engram_gpu_reach_measure(device, &want, &probe);
        if (st != ENGRAM_OK)
            return st;
    }
    if (engram_gpu_path_decide(&ask, engram_gpu_path_needs_probe(&ask) ? &probe : NULL, r) == ENGRAM_GPU_PICK_REFUSED)
        return refuse_host_gather(ctx, call, ask.lacks);
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
