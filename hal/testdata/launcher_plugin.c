/* GPU-initiated plugins for the loader's fetch-launcher rule, one per build
 * define (hal/BUILD.bazel builds each as libengram_transport_<name>.so):
 *   LAUNCHER_OK      gpuonly:  a gpu_launcher and no host op: accepted
 *   LAUNCHER_NOFNS   gpunofns: the launcher lacks issue: refused
 *   LAUNCHER_MIXED   gpumixed: a launcher and some host ops: refused
 *   LAUNCHER_SMALL   gpusmall: launcher size older than its functions: refused
 * Nothing here is ever called: the loader only inspects the tables. */
#include "hal/registry.h"

#if defined(LAUNCHER_OK)
#define PLUGIN_NAME "gpuonly"
#elif defined(LAUNCHER_NOFNS)
#define PLUGIN_NAME "gpunofns"
#elif defined(LAUNCHER_MIXED)
#define PLUGIN_NAME "gpumixed"
#elif defined(LAUNCHER_SMALL)
#define PLUGIN_NAME "gpusmall"
#endif

static bool never_available(engram_group_t *group, const char **why)
{
    (void)group;
    *why = "launcher test plugin";
    return false;
}

static engram_status_t never_open(engram_group_t *group, const struct engram_config *cfg, engram_transport_t **out)
{
    (void)group, (void)cfg, (void)out;
    return ENGRAM_ERR_UNSUPPORTED;
}

static void no_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    (void)t, (void)caps;
}

static void no_close(engram_transport_t *t)
{
    (void)t;
}

static engram_status_t no_attach(struct engram_transport *t, const engram_gpu_span_t *span, engram_gpu_launch_t **out)
{
    (void)t, (void)span, (void)out;
    return ENGRAM_ERR_UNSUPPORTED;
}

#if !defined(LAUNCHER_NOFNS)
static engram_status_t no_issue(engram_gpu_launch_t *l, const engram_gpu_issue_t *fetch, void *stream)
{
    (void)l, (void)fetch, (void)stream;
    return ENGRAM_ERR_UNSUPPORTED;
}
#endif

static engram_status_t no_wait(engram_gpu_launch_t *l, int slot, void *stream)
{
    (void)l, (void)slot, (void)stream;
    return ENGRAM_ERR_UNSUPPORTED;
}

static void no_detach(engram_gpu_launch_t *l)
{
    (void)l;
}

static const engram_gpu_launcher_ops_t launcher = {
#if defined(LAUNCHER_SMALL)
    .size = offsetof(engram_gpu_launcher_ops_t, wait),
#else
    .size = sizeof(engram_gpu_launcher_ops_t),
#endif
    .attach = no_attach,
#if !defined(LAUNCHER_NOFNS)
    .issue = no_issue,
#endif
    .wait = no_wait,
    .detach = no_detach,
};

#if defined(LAUNCHER_MIXED)
static engram_status_t no_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                              uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                              unsigned flags)
{
    (void)t, (void)queue, (void)peer, (void)remote, (void)remote_off, (void)local, (void)local_off, (void)len,
        (void)flags;
    return ENGRAM_ERR_UNSUPPORTED;
}
#endif

static const engram_transport_ops_t ops = {
    .size = sizeof(engram_transport_ops_t),
    .name = PLUGIN_NAME,
    .available = never_available,
    .open = never_open,
    .caps = no_caps,
    .close = no_close,
#if defined(LAUNCHER_MIXED)
    .get = no_get,
#endif
    .gpu_launcher = &launcher,
};

ENGRAM_API const engram_transport_plugin_t engram_transport_plugin_v1 = {ENGRAM_TRANSPORT_ABI_VERSION, &ops};
