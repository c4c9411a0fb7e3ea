/* gpuplug: the skeleton of a GPU-initiated transport, built out of tree
 * against an installed prefix (tests/install/gpu_plugin_test.sh): the
 * <engram/plugin/...> headers, libengram.so.0, and nothing of the source
 * tree. It has no host data path: the engram layer drives its fetch
 * launcher (<engram/plugin/gpu_launcher.h>), whose kernel
 * (gpuplug_kernel.cu) routes every row with <engram/plugin/routing.h>, as
 * the engram layer's own kernels do.
 *
 * What a real backend fills in: open sets up its communicator over the
 * group; attach makes span->recv and span->shard remotely accessible on
 * every rank (collective) and keeps the per-slot request state; issue
 * launches the kernel on the stream; wait queues what completes the slot's
 * gets on the stream. This one says it cannot run, so what it exercises is
 * the build and the loader's checks. */
#include <stdlib.h>

#include <engram/log.h>
#include <engram/plugin/plugin.h>

struct engram_transport {
    engram_group_t *group;
};

/* One attached span: what the kernels need, per table. */
struct engram_gpu_launch {
    engram_gpu_span_t span;
};

static bool gp_available(engram_group_t *group, const char **why)
{
    (void)group;
    *why = "gpuplug is a skeleton: its launcher moves no rows";
    return false;
}

static engram_status_t gp_open(engram_group_t *group, const engram_config_view_t *config, engram_transport_t **out)
{
    (void)config;
    engram_transport_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "gpuplug: out of memory");
    t->group = group;
    *out = t;
    return ENGRAM_OK;
}

static void gp_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    (void)t;
    caps->flags = ENGRAM_CAP_GPU_INITIATED | ENGRAM_CAP_CROSS_HOST;
    caps->read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_CUDA_DEVICE) | ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_CUDA_HOST_NUMA);
    caps->write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_CUDA_DEVICE);
    caps->max_queues = 1;
    caps->max_outstanding = 0;
}

static void gp_close(engram_transport_t *t)
{
    free(t);
}

static engram_status_t gp_attach(engram_transport_t *t, const engram_gpu_span_t *span, engram_gpu_launch_t **out)
{
    (void)t;
    if (span->recv == NULL || span->shard == NULL || span->num_slots < 1)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "gpuplug attach: a span needs recv, shard and a slot");
    engram_gpu_launch_t *l = malloc(sizeof(*l));
    if (l == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "gpuplug attach: out of memory");
    l->span = *span;
    *out = l;
    return ENGRAM_OK;
}

static engram_status_t gp_issue(engram_gpu_launch_t *l, const engram_gpu_issue_t *fetch, void *stream)
{
    (void)stream;
    if (fetch->slot < 0 || fetch->slot >= l->span.num_slots)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "gpuplug issue: slot %d of %d", fetch->slot, l->span.num_slots);
    /* A real backend launches gpuplug_issue_kernel here with *fetch->shape,
     * fetch->indices and the slot's requests. */
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "gpuplug issue: a skeleton launches nothing");
}

static engram_status_t gp_wait(engram_gpu_launch_t *l, int slot, void *stream)
{
    (void)l, (void)slot, (void)stream;
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "gpuplug wait: a skeleton issued nothing");
}

static void gp_detach(engram_gpu_launch_t *l)
{
    free(l);
}

static const engram_gpu_launcher_ops_t gp_launcher = {
    .attach = gp_attach,
    .issue = gp_issue,
    .wait = gp_wait,
    .detach = gp_detach,
};

/* No host op: the engram layer uses the launcher. */
static const engram_transport_ops_t gp_ops = {
    .name = "gpuplug",
    .available = gp_available,
    .open = gp_open,
    .caps = gp_caps,
    .close = gp_close,
    .gpu_launcher = &gp_launcher,
};

ENGRAM_TRANSPORT_PLUGIN(gp_ops);
