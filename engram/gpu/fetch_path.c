/* The capability check of the GPU fetch paths (fetch_path.h). */
#include "engram/gpu/fetch_path.h"
#include "hal/log.h"

/* In the order a refusal names them: a table's setting first (the
 * shards' memory, then the transport, then the group), then a call's. */
static const struct {
    unsigned cap;
    const char *cannot; /* "the table's <path> path cannot ..." */
    const char *reason; /* why a table with such a need takes uva */
} caps[] = {
    {ENGRAM_GPU_CAP_DEVICE_SHARDS, "read shards in GPU memory",
     "the table is in GPU memory (gpu_table=device)"},
    {ENGRAM_GPU_CAP_BESIDE_LAUNCHER, "run beside a GPU launcher",
     "the transport fetches through the GPU (a fetch launcher), which reads the UVA layout"},
    {ENGRAM_GPU_CAP_NODES, "serve a group that spans nodes",
     "the group spans nodes, and rows of other nodes are placed by the UVA layout's scatter"},
    {ENGRAM_GPU_CAP_CAPTURE, "be captured in a CUDA graph", "fetches are captured in CUDA graphs"},
    {ENGRAM_GPU_CAP_STREAM_ORDER, "end a fetch in stream order", "fetches end in stream order"},
    {ENGRAM_GPU_CAP_ORDER_AT_CALL, "order its rows at the call", "fetches are ordered at the call"},
    {ENGRAM_GPU_CAP_DEDUP, "mark repeated rows on the GPU", "dedup=on"},
    {ENGRAM_GPU_CAP_NODE_PEERS, "take the rows of this node's other ranks",
     "the rows of this node's other ranks come by the other-nodes path"},
};

enum { NUM_CAPS = sizeof(caps) / sizeof(caps[0]) };

static int cap_index(unsigned cap)
{
    for (int i = 0; i < NUM_CAPS; i++)
        if (caps[i].cap == cap)
            return i;
    return -1;
}

unsigned engram_gpu_path_lacks(const engram_gpu_path_ops_t *path, unsigned need)
{
    for (int i = 0; i < NUM_CAPS; i++)
        if ((need & caps[i].cap) && !(path->caps & caps[i].cap))
            return caps[i].cap;
    return 0;
}

const char *engram_gpu_cap_reason(unsigned cap)
{
    int i = cap_index(cap);
    return i >= 0 ? caps[i].reason : "no capability is missing";
}

engram_status_t engram_gpu_path_require(const engram_gpu_path_t *paths, int n, unsigned need, const char *call,
                                        const char *asked, const char *advice)
{
    for (int p = 0; p < n; p++) {
        const engram_gpu_path_ops_t *ops = paths[p].ops;
        unsigned lacks = ops != NULL ? engram_gpu_path_lacks(ops, need) : 0;
        if (lacks == 0)
            continue;
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "%s: %s: the table's %s path cannot %s (%s)%s%s", call, asked,
                            ops->name, caps[cap_index(lacks)].cannot, ops->how, advice != NULL ? "; " : "",
                            advice != NULL ? advice : "");
    }
    return ENGRAM_OK;
}
