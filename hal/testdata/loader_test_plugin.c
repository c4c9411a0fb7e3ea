/* Plugins for the loader's checks, one per build define (hal/BUILD.bazel
 * builds each as libengram_transport_<name>.so). Of the current transport
 * ABI version unless said otherwise. Refused:
 *   BROKEN_NOSYM    nosym: exports no entry symbol the loader knows
 *   BROKEN_NOOPS    noops: the entry symbol points to no ops
 *   BROKEN_NAME     badname: ops->name differs from the file's name
 *   BROKEN_NOFNS    nofns: ops lacking mandatory functions (caps onwards)
 *   LAUNCHER_NOFNS  gpunofns: a gpu_launcher lacking issue
 *   LAUNCHER_MIXED  gpumixed: a gpu_launcher and only some host ops
 *   BROKEN_KEYS     badkeys: a config key table whose default is out of range
 *   BROKEN_PREFIX   badprefix: a config key not named badprefix_<rest>
 *   BROKEN_BADVER   badver: version 3's symbol with another version in its record
 *   BROKEN_V3_NOOPS v3noops: version 3's record with ops NULL
 *   BROKEN_SMALL    small: version 3's ops->size short of the fields it had
 *   LAUNCHER_SMALL  gpusmall: version 3's gpu_launcher->size short of its functions
 * Accepted:
 *   LAUNCHER_OK     gpuonly: a gpu_launcher and no host op (GPU-initiated)
 *   OLD_ABI         oldabi: a GPU-initiated plugin of version 2
 *                   (engram_transport_plugin_v1), converted
 * The loader checks in order (symbol, version, ops, sizes, name,
 * functions), so only the NOFNS and LAUNCHER variants need functions; none
 * is ever called. */
#include <engram/plugin/plugin.h>

#include "hal/plugin_v3.h"

#if defined(BROKEN_NOSYM)
/* Exported, but under a name the loader does not look for. */
ENGRAM_API const engram_transport_ops_t *const engram_transport_plugin_v0 = NULL;
#elif defined(BROKEN_NOOPS)
ENGRAM_API const engram_transport_ops_t *const engram_transport_plugin_v4 = NULL;
#elif defined(BROKEN_V3_NOOPS)
ENGRAM_API const engram_transport_plugin_v3_t engram_transport_plugin_v3 = {ENGRAM_TRANSPORT_ABI_VERSION_V3, NULL};
#else

#if defined(BROKEN_BADVER)
#define PLUGIN_NAME "badver"
#define V3_ABI (ENGRAM_TRANSPORT_ABI_VERSION_V3 + 1)
#elif defined(BROKEN_SMALL)
#define PLUGIN_NAME "small"
#define V3_SIZE offsetof(engram_transport_ops_v3_t, get)
#elif defined(BROKEN_NAME)
#define PLUGIN_NAME "someone_else"
#elif defined(BROKEN_NOFNS)
#define PLUGIN_NAME "nofns"
#elif defined(LAUNCHER_OK)
#define PLUGIN_NAME "gpuonly"
#elif defined(LAUNCHER_NOFNS)
#define PLUGIN_NAME "gpunofns"
#elif defined(LAUNCHER_MIXED)
#define PLUGIN_NAME "gpumixed"
#elif defined(LAUNCHER_SMALL)
#define PLUGIN_NAME "gpusmall"
#elif defined(BROKEN_KEYS)
#define PLUGIN_NAME "badkeys"
#elif defined(BROKEN_PREFIX)
#define PLUGIN_NAME "badprefix"
#elif defined(OLD_ABI)
#define PLUGIN_NAME "oldabi"
#endif
/* Exported as a version 3 (or 2) record of hal/plugin_v3.h's structs. */
#if defined(BROKEN_BADVER) || defined(BROKEN_SMALL) || defined(LAUNCHER_SMALL) || defined(OLD_ABI)
#define OLDER 1
#endif
/* BROKEN_KEYS and BROKEN_PREFIX have a sound launcher, so only their key
 * tables are wrong; OLD_ABI is a sound GPU-initiated plugin of version 2. */
#if defined(LAUNCHER_OK) || defined(LAUNCHER_NOFNS) || defined(LAUNCHER_MIXED) || defined(LAUNCHER_SMALL) || \
    defined(BROKEN_KEYS) || defined(BROKEN_PREFIX) || defined(OLD_ABI)
#define WITH_LAUNCHER 1
#endif

static bool never_available(engram_group_t *group, const char **why)
{
    (void)group;
    *why = "loader test plugin";
    return false;
}

static engram_status_t never_open(engram_group_t *group, const engram_config_view_t *cfg, engram_transport_t **out)
{
    (void)group, (void)cfg, (void)out;
    return ENGRAM_ERR_UNSUPPORTED;
}

#ifdef WITH_LAUNCHER
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

#ifdef OLDER
static const engram_gpu_launcher_ops_v3_t launcher = {
#if defined(LAUNCHER_SMALL)
    .size = offsetof(engram_gpu_launcher_ops_v3_t, wait),
#else
    .size = sizeof(engram_gpu_launcher_ops_v3_t),
#endif
#else
static const engram_gpu_launcher_ops_t launcher = {
#endif
    .attach = no_attach,
#if !defined(LAUNCHER_NOFNS)
    .issue = no_issue,
#endif
    .wait = no_wait,
    .detach = no_detach,
};
#endif

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

#if defined(BROKEN_KEYS)
static const engram_config_key_decl_t bad_keys[] = {
    {"badkeys_depth", ENGRAM_CONFIG_INT, "9", "0..4", "a default its own range refuses"},
};
#elif defined(BROKEN_PREFIX)
/* The first key is sound; the second lacks the transport's name. */
static const engram_config_key_decl_t bad_keys[] = {
    {"badprefix_depth", ENGRAM_CONFIG_INT, "1", "0..4", "a sound key"},
    {"depth", ENGRAM_CONFIG_INT, "1", "0..4", "a key named after no transport"},
};
#endif

#ifdef OLDER
#ifndef V3_SIZE
#define V3_SIZE sizeof(engram_transport_ops_v3_t)
#endif
static const engram_transport_ops_v3_t ops = {
    .size = V3_SIZE,
#else
static const engram_transport_ops_t ops = {
#endif
    .name = PLUGIN_NAME,
    .available = never_available,
    .open = never_open,
#ifdef WITH_LAUNCHER
    .caps = no_caps,
    .close = no_close,
    .gpu_launcher = &launcher,
#endif
#if defined(LAUNCHER_MIXED)
    .get = no_get,
#endif
#if defined(BROKEN_KEYS) || defined(BROKEN_PREFIX)
    .config_keys = bad_keys,
    .num_config_keys = sizeof(bad_keys) / sizeof(bad_keys[0]),
#endif
};

#if defined(OLD_ABI)
ENGRAM_API const engram_transport_plugin_v3_t engram_transport_plugin_v1 = {ENGRAM_TRANSPORT_ABI_VERSION_V2, &ops};
#elif defined(OLDER)
#ifndef V3_ABI
#define V3_ABI ENGRAM_TRANSPORT_ABI_VERSION_V3
#endif
ENGRAM_API const engram_transport_plugin_v3_t engram_transport_plugin_v3 = {V3_ABI, &ops};
#else
ENGRAM_TRANSPORT_PLUGIN(ops);
#endif
#endif
