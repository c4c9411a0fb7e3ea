/* Plugins the loader must refuse, one per build define (hal/BUILD.bazel
 * builds each as libengram_transport_<name>.so):
 *   BROKEN_BADVER  built for another transport ABI version
 *   BROKEN_NOSYM   exports no ENGRAM_TRANSPORT_PLUGIN_SYMBOL
 *   BROKEN_NOOPS   exports the symbol with ops NULL
 *   BROKEN_SMALL   ops->size smaller than the fields the library calls
 *   BROKEN_NAME    ops->name differs from the file's name
 *   BROKEN_NOFNS   ops lacking mandatory functions (caps onwards)
 * The loader checks in that order (version, ops, size, name, functions), so
 * only the NOFNS variant needs any functions at all. */
#include "hal/registry.h"

#if defined(BROKEN_NOSYM)
/* Exported, but under a name the loader does not look for. */
ENGRAM_API const engram_transport_plugin_t engram_transport_plugin_v0 = {ENGRAM_TRANSPORT_ABI_VERSION, NULL};
#elif defined(BROKEN_NOOPS)
ENGRAM_API const engram_transport_plugin_t engram_transport_plugin_v1 = {ENGRAM_TRANSPORT_ABI_VERSION, NULL};
#else

#if defined(BROKEN_BADVER)
#define PLUGIN_NAME "badver"
#define PLUGIN_ABI (ENGRAM_TRANSPORT_ABI_VERSION + 1)
#elif defined(BROKEN_SMALL)
#define PLUGIN_NAME "small"
#define PLUGIN_SIZE offsetof(engram_transport_ops_t, get)
#elif defined(BROKEN_NAME)
#define PLUGIN_NAME "someone_else"
#elif defined(BROKEN_NOFNS)
#define PLUGIN_NAME "nofns"
#endif
#ifndef PLUGIN_ABI
#define PLUGIN_ABI ENGRAM_TRANSPORT_ABI_VERSION
#endif
#ifndef PLUGIN_SIZE
#define PLUGIN_SIZE sizeof(engram_transport_ops_t)
#endif

static bool never_available(engram_group_t *group, const char **why)
{
    (void)group;
    *why = "broken test plugin";
    return false;
}

static engram_status_t never_open(engram_group_t *group, const struct engram_config *cfg, engram_transport_t **out)
{
    (void)group, (void)cfg, (void)out;
    return ENGRAM_ERR_UNSUPPORTED;
}

static const engram_transport_ops_t ops = {
    .size = PLUGIN_SIZE,
    .name = PLUGIN_NAME,
    .available = never_available,
    .open = never_open,
};

ENGRAM_API const engram_transport_plugin_t engram_transport_plugin_v1 = {PLUGIN_ABI, &ops};
#endif
