/* nccl_gin transport: an NCCL communicator made from the engram group
 * (rank 0's ncclUniqueId through the group's allgather), checked for the
 * device API and the GIN connections the mode needs. Tables attach to it
 * through the fetch launcher (nccl_gin_launch.c).
 *
 * The kernels are compiled against one NCCL; the device API's structures
 * are that version's, so the library loaded at run time must be the same
 * version exactly (checked in available() and open()).
 *
 * Where NCCL runs GIN in proxy mode (no GIN-capable NIC: every get is a
 * descriptor a host thread moves), the caps say ENGRAM_CAP_HOST_PROXIED
 * and transport=auto passes it over for a faster backend. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/log.h"
#include "engram/plugin/group.h"
#include "transports/nccl_gin/nccl_gin.h"
#include "transports/nccl_gin/nccl_gin_depth.h"
#include "transports/nccl_gin/nccl_gin_internal.h"
#include "transports/nccl_gin/nccl_gin_kernel.h"

enum { GIN_TYPE_NONE = 0 }; /* ncclGinType_t's NCCL_GIN_TYPE_NONE */

engram_status_t engram_nccl_gin_error(ncclComm_t comm, const char *what, ncclResult_t r)
{
    return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "nccl_gin: %s: %s (%s)", what, ncclGetErrorString(r),
                        ncclGetLastError(comm));
}

static void version_text(int code, char *buf, size_t len)
{
    snprintf(buf, len, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
}

/* Into reason (len bytes) when the loaded libnccl is not the one the
 * kernels were compiled against; false then. */
static bool version_matches(char *reason, size_t len)
{
    int have = 0;
    ncclResult_t r = ncclGetVersion(&have);
    if (r != ncclSuccess) {
        snprintf(reason, len, "ncclGetVersion failed: %s", ncclGetErrorString(r));
        return false;
    }
    if (have == engram_nccl_gin_built_version())
        return true;
    char h[32], b[32];
    version_text(have, h, sizeof(h));
    version_text(engram_nccl_gin_built_version(), b, sizeof(b));
    snprintf(reason, len,
             "the loaded libnccl is %s but the GIN kernels were compiled against NCCL %s; "
             "load the NCCL of the build (NCCL_HOME/lib on LD_LIBRARY_PATH)",
             h, b);
    return false;
}

static bool nccl_gin_available(engram_group_t *group, const char **why)
{
    (void)group;
    static __thread char reason[320];
    /* the library first: a wrong libnccl is what the user must fix, and
     * saying so needs no GPU */
    if (!version_matches(reason, sizeof(reason))) {
        *why = reason;
        return false;
    }
    int devices = 0;
    cudaError_t ce = cudaGetDeviceCount(&devices);
    if (ce != cudaSuccess || devices == 0) {
        char v[32];
        version_text(engram_nccl_gin_built_version(), v, sizeof(v));
        snprintf(reason, sizeof(reason), "no CUDA GPU visible (%s); NCCL %s loaded, the kernels' version",
                 ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices", v);
        *why = reason;
        return false;
    }
    return true;
}

/* Rank 0's unique id to every rank, once every rank is ready (st: this
 * rank's readiness so far). */
static engram_status_t exchange_id(engram_transport_t *t, engram_status_t st, ncclUniqueId *out)
{
    ncclUniqueId mine;
    memset(&mine, 0, sizeof(mine));
    ncclUniqueId *all = st == ENGRAM_OK ? malloc((size_t)t->size * sizeof(*all)) : NULL;
    if (st == ENGRAM_OK && all == NULL)
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "nccl_gin: out of memory for %d unique ids", t->size);
    if (st == ENGRAM_OK && t->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&mine);
        if (r != ncclSuccess)
            st = engram_nccl_gin_error(NULL, "ncclGetUniqueId", r);
    }
    st = engram_group_agree_step(t->group, st, "prepare its NCCL communicator");
    if (st == ENGRAM_OK)
        st = engram_group_allgather(t->group, &mine, all, sizeof(mine));
    if (st == ENGRAM_OK)
        *out = all[0];
    free(all);
    return st;
}

/* The device API and the connections the mode needs; with RAIL
 * connections NCCL's nodes must be the group's, or rail peers would
 * differ. */
static engram_status_t check_props(engram_transport_t *t)
{
    engram_nccl_gin_props_t p;
    ncclResult_t r = (ncclResult_t)engram_nccl_gin_query(t->comm, &p);
    if (r != ncclSuccess)
        return engram_nccl_gin_error(t->comm, "ncclCommQueryProperties", r);
    if (!p.device_api)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "nccl_gin: NCCL offers no device API on this communicator");
    t->gin_type = t->rail ? p.railed_gin_type : p.gin_type;
    if (t->gin_type == GIN_TYPE_NONE)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "nccl_gin: NCCL offers no GIN with %s connections on this communicator (no GIN-capable "
                            "NIC; on a host without one, load the NIC-less RMA plugin: transports/nccl_gin/README.md)",
                            t->rail ? "RAIL" : "FULL");
    int nodes = t->size / t->local_size;
    if (t->rail && p.lsa_teams != nodes)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "nccl_gin: mode=hybrid with one rank per node gets over RAIL connections, which need "
                            "NCCL's nodes to be the group's, but NCCL sees %d and the "
                            "group %d (local_size %d); give each node's ranks their own NCCL_HOSTID",
                            p.lsa_teams, nodes, t->local_size);
    return ENGRAM_OK;
}

/* "NCCL 2.30.7, GIN proxy over RMA plugin <NCCL_RMA_PLUGIN>, FULL
 * connections; hybrid mode: ...": the version, the GIN type NCCL chose
 * (gdaki: the NIC's GPU-direct path; proxy: a host thread, over the RMA
 * plugin named in NCCL_RMA_PLUGIN when set), the connections, and what
 * hybrid mode takes on each topology. */
static void nccl_gin_describe(const engram_transport_t *t, char *buf, size_t len)
{
    static const char *const types[] = {"none", "?", "proxy", "gdaki (GPU-initiated on the NIC)", "gpi"};
    char v[32];
    version_text(engram_nccl_gin_built_version(), v, sizeof(v));
    int ty = t->gin_type >= 0 && t->gin_type <= 4 ? t->gin_type : 1;
    const char *plugin = getenv("NCCL_RMA_PLUGIN");
    bool over_plugin = ty == ENGRAM_NCCL_GIN_TYPE_PROXY && plugin != NULL && plugin[0] != '\0';
    snprintf(buf, len,
             "NCCL %s, GIN %s%s%s, %s connections; hybrid mode: one rank per node over RAIL connections (NCCL's "
             "nodes must be the group's: NCCL_HOSTID), several over FULL connections (each get to the rank that "
             "holds the row, off the rail)",
             v, types[ty], over_plugin ? " over RMA plugin " : "", over_plugin ? plugin : "", t->rail ? "RAIL" : "FULL");
}

/* The keys nccl_gin declares (read through the view at open). */
static const engram_config_key_decl_t nccl_gin_keys[] = {
    {"nccl_gin_queue_depth", ENGRAM_CONFIG_INT, "0", "0..65536",
     "GIN queue depth per context and peer; 0 = NCCL's default"},
};

static engram_status_t nccl_gin_open(engram_group_t *group, const engram_config_view_t *cfg,
                                     engram_transport_t **out)
{
    int64_t mode, queue_depth;
    engram_status_t st = cfg->get_int(cfg, "mode", &mode);
    if (st == ENGRAM_OK)
        st = cfg->get_int(cfg, "nccl_gin_queue_depth", &queue_depth);
    if (st != ENGRAM_OK)
        return st;
    engram_transport_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "nccl_gin: out of memory for the transport");
    t->group = group;
    t->rank = engram_group_rank(group);
    t->size = engram_group_size(group);
    t->local_size = engram_group_local_size(group);
    t->hybrid = mode == ENGRAM_MODE_HYBRID;
    /* A rail peer reads only its own registrations: with one rank per
     * node that is its node's shard, with more the node's other shards are
     * their owners' to serve, so gets go to the owner over FULL
     * connections (nccl_gin_launch.c). */
    t->rail = t->hybrid && t->local_size == 1;
    t->queue_depth = (int)queue_depth;
    char reason[320];
    if (!version_matches(reason, sizeof(reason)))
        st = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "nccl_gin: %s", reason);
    ncclUniqueId id;
    st = exchange_id(t, st, &id);
    if (st != ENGRAM_OK)
        goto err_free;
    ncclResult_t r = ncclCommInitRank(&t->comm, t->size, id, t->rank);
    st = engram_group_agree_step(t->group,
                                 r == ncclSuccess ? check_props(t) : engram_nccl_gin_error(NULL, "ncclCommInitRank", r),
                                 "create its NCCL communicator with GIN");
    if (st != ENGRAM_OK)
        goto err_destroy_comm;
    char desc[1024];
    nccl_gin_describe(t, desc, sizeof(desc));
    ENGRAM_INFO("nccl_gin: rank %d of %d: communicator ready: %s", t->rank, t->size, desc);
    *out = t;
    return ENGRAM_OK;

err_destroy_comm:
    if (t->comm != NULL)
        ncclCommDestroy(t->comm);
err_free:
    free(t);
    return st;
}

static void nccl_gin_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    *caps = (engram_transport_caps_t){
        .flags = ENGRAM_CAP_GPU_INITIATED | ENGRAM_CAP_HYBRID | ENGRAM_CAP_CROSS_HOST |
                 (t->gin_type == ENGRAM_NCCL_GIN_TYPE_PROXY ? ENGRAM_CAP_HOST_PROXIED : 0u),
        .read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_CUDA_DEVICE) | ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_CUDA_HOST_NUMA),
        .write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_CUDA_DEVICE),
        .max_queues = ENGRAM_NCCL_GIN_MAX_QUEUES,
        .max_outstanding = t->queue_depth,
    };
}

static void nccl_gin_close(engram_transport_t *t)
{
    /* Tables detached first (the engram layer destroys them before the
     * context), so no window or dev comm is left on the communicator. */
    ncclCommFinalize(t->comm);
    ncclCommDestroy(t->comm);
    free(t);
}

/* The host-initiated ops stay NULL: the engram layer refuses host-receive
 * tables on a transport without ENGRAM_CAP_HOST_INITIATED, and GPU tables
 * go through the launcher. */
const engram_transport_ops_t engram_nccl_gin_ops = {
    .name = "nccl_gin",
    .available = nccl_gin_available,
    .open = nccl_gin_open,
    .caps = nccl_gin_caps,
    .describe = nccl_gin_describe,
    .close = nccl_gin_close,
    .gpu_launcher = &engram_nccl_gin_launcher,
    .config_keys = nccl_gin_keys,
    .num_config_keys = sizeof(nccl_gin_keys) / sizeof(nccl_gin_keys[0]),
};
