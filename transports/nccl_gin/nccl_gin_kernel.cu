// GPU-initiated gets through NCCL GIN. The issue kernel runs one block per
// part of a queue's contiguous token range (nccl_gin_plan.h: one GIN context
// each, so no context holds more gets per peer than its queue takes): every
// lane routes a row with engram/plugin/routing.h, then the warp's elected lane posts one
// get per row that the engram layer does not load itself, with routing.h's
// flush policy (a per-warp counter per peer), and after the block's gets one
// flushAsync per peer that received any; the requests stay in device memory
// for the wait kernel, so no SM is held while the data moves.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include <new>

#include "transports/nccl_gin/nccl_gin_depth.h"
#include "transports/nccl_gin/nccl_gin_kernel.h"
#include "transports/nccl_gin/nccl_gin_plan.h"

static_assert(sizeof(engram_nccl_gin_req_t) == sizeof(ncclGinRequest_t), "request storage matches NCCL's");
static_assert((int)ENGRAM_NCCL_GIN_TYPE_PROXY == (int)NCCL_GIN_TYPE_PROXY, "the proxy's GIN type is NCCL's");

namespace {

constexpr int kIssueThreads = 128;
constexpr int kWarps = kIssueThreads / 32;
constexpr int kWaitThreads = 128;
constexpr uint32_t kMaxPeers = 2048; // kWarps * kMaxPeers counters = 32 KiB of shared memory

__global__ void __launch_bounds__(kIssueThreads) gin_issue(const ncclDevComm comm,
                                                            const engram_nccl_gin_issue_args_t a)
{
    extern __shared__ uint32_t counters[]; // [warps][peers]: requests issued, routing.h's flush counter
    for (uint32_t i = threadIdx.x; i < kWarps * a.num_peers; i += blockDim.x)
        counters[i] = 0;
    __syncthreads();
    const uint32_t b = blockIdx.x;
    ncclGin gin(comm, (int)engram_nccl_gin_block_context(a.first_queue, a.per_queue, a.batches, b, a.contexts));
    const ncclTeam team = a.rail ? ncclTeamRail(comm) : ncclTeamWorld(comm);
    const engram_nccl_gin_rows_t rows =
        engram_nccl_gin_block_rows(a.num_tokens, a.entries_per_token, (uint32_t)a.num_queues, a.batches, b);
    const uint64_t first = rows.first, end = rows.end;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint32_t *mine = counters + warp * a.num_peers;
    for (uint64_t base = first + (uint64_t)warp * 32; base < end; base += kWarps * 32) {
        const uint64_t row = base + lane;
        engram_route_t r = {0, 0};
        bool remote = false;
        uint32_t owner = 0;
        uint64_t owner_off = 0;
        if (row < end && engram_route_index(&a.shape, a.indices[row], &r))
            remote = r.peer - a.first_local_peer >= a.local_peers;
        // The owner's own shard window, the row at its offset there
        // (nccl_gin_launch.c says why not the node's rail peer).
        if (remote)
            engram_route_owner(&a.shape, a.indices[row], &owner, &owner_off);
        for (unsigned todo = __ballot_sync(~0u, remote); todo != 0; todo &= todo - 1) {
            const int src = __ffs(todo) - 1;
            const uint32_t peer = __shfl_sync(~0u, owner, src);
            const uint64_t off = __shfl_sync(~0u, owner_off, src);
            if (lane != 0)
                continue;
            const unsigned flags = engram_flush_next_flags(&mine[peer], a.flush_depth);
            gin.get(team, (int)peer, a.shard_win, off, a.recv_win, a.rows_off + (base + src) * a.row_bytes,
                    a.row_bytes, ncclCoopThread(), ncclGin_None{},
                    (flags & ENGRAM_ROUTE_AGGREGATE) ? ncclGinOptFlagsAggregateRequests : ncclGinOptFlagsDefault,
                    ncclGin_SegmentMixed{});
        }
    }
    __syncthreads();
    for (uint32_t p = threadIdx.x; p < a.num_peers; p += blockDim.x) {
        bool needed = false;
        for (int w = 0; w < kWarps; w++)
            needed |= engram_flush_needed(counters[w * a.num_peers + p]);
        const uint64_t i = (uint64_t)b * a.num_peers + p;
        if (needed)
            gin.flushAsync(team, p, reinterpret_cast<ncclGinRequest_t *>(&a.reqs[i]));
        a.flushed[i] = needed;
    }
}

__global__ void __launch_bounds__(kWaitThreads) gin_wait(const ncclDevComm comm, const engram_nccl_gin_wait_args_t a)
{
    const uint32_t b = blockIdx.x;
    ncclGin gin(comm, (int)engram_nccl_gin_block_context(a.first_queue, a.per_queue, a.batches, b, a.contexts));
    for (uint32_t p = threadIdx.x; p < a.num_peers; p += blockDim.x) {
        const uint64_t i = (uint64_t)b * a.num_peers + p;
        if (a.flushed[i]) {
            ncclGinRequest_t req = *reinterpret_cast<const ncclGinRequest_t *>(&a.reqs[i]);
            gin.wait(req);
        }
    }
}

}  // namespace

extern "C" int engram_nccl_gin_built_version(void)
{
    return NCCL_VERSION_CODE;
}

extern "C" uint32_t engram_nccl_gin_max_peers(void)
{
    return kMaxPeers;
}

extern "C" int engram_nccl_gin_query(ncclComm_t comm, engram_nccl_gin_props_t *out)
{
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    ncclResult_t r = ncclCommQueryProperties(comm, &props);
    if (r != ncclSuccess)
        return r;
    out->device_api = props.deviceApiSupport;
    out->gin_type = props.ginType;
    out->railed_gin_type = props.railedGinType;
    out->lsa_teams = props.nLsaTeams;
    return ncclSuccess;
}

extern "C" int engram_nccl_gin_devcomm_create(ncclComm_t comm, int contexts, int rail, int queue_depth, void **devcomm,
                                              uint32_t *made)
{
    // Loaded now, not at their first launch: under CUDA's lazy loading that
    // launch waits for the device to go idle, and the issue kernel spins
    // until the proxy thread has moved its gets (engram/gpu/gather.h).
    cudaFuncAttributes attr;
    if (cudaFuncGetAttributes(&attr, gin_issue) != cudaSuccess || cudaFuncGetAttributes(&attr, gin_wait) != cudaSuccess)
        return ncclUnhandledCudaError;
    ncclDevComm *dc = new (std::nothrow) ncclDevComm;
    if (dc == nullptr)
        return ncclSystemError;
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.ginContextCount = contexts;
    reqs.ginConnectionType = rail ? NCCL_GIN_CONNECTION_RAIL : NCCL_GIN_CONNECTION_FULL;
    reqs.ginQueueDepth = queue_depth;
    reqs.ginStrongSignalsRequired = false; // gets and flushes only
    reqs.ginVaSignalsRequired = false;
    ncclResult_t r = ncclDevCommCreate(comm, &reqs, dc);
    if (r != ncclSuccess) {
        delete dc;
        return r;
    }
    *devcomm = dc;
    *made = dc->ginContextCount;
    return ncclSuccess;
}

extern "C" void engram_nccl_gin_devcomm_destroy(ncclComm_t comm, void *devcomm)
{
    ncclDevComm *dc = static_cast<ncclDevComm *>(devcomm);
    (void)ncclDevCommDestroy(comm, dc);
    delete dc;
}

extern "C" int engram_nccl_gin_issue_launch(const void *devcomm, const engram_nccl_gin_issue_args_t *a, void *stream)
{
    const size_t shared = (size_t)kWarps * a->num_peers * sizeof(uint32_t);
    gin_issue<<<(unsigned)a->num_queues * a->batches, kIssueThreads, shared, static_cast<cudaStream_t>(stream)>>>(
        *static_cast<const ncclDevComm *>(devcomm), *a);
    return cudaGetLastError();
}

extern "C" int engram_nccl_gin_wait_launch(const void *devcomm, const engram_nccl_gin_wait_args_t *a, void *stream)
{
    gin_wait<<<(unsigned)a->num_queues * a->batches, kWaitThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        *static_cast<const ncclDevComm *>(devcomm), *a);
    return cudaGetLastError();
}
