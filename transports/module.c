/* A built-in backend as a module: libengram_transport_<name>.so exports
 * the plugin record over the backend's ops (ENGRAM_MODULE_NAME, set by
 * transports/BUILD.bazel). The loader checks it as any plugin; the ops
 * table is the same one a static build links, so gets cross no new
 * indirection. */
#include "hal/registry.h"

#define ENGRAM_PASTE(a, b, c) a##b##c
#define ENGRAM_OPS_OF(name) ENGRAM_PASTE(engram_, name, _ops)

extern const engram_transport_ops_t ENGRAM_OPS_OF(ENGRAM_MODULE_NAME);

ENGRAM_API const engram_transport_plugin_t engram_transport_plugin_v1 = {
    .abi_version = ENGRAM_TRANSPORT_ABI_VERSION,
    .ops = &ENGRAM_OPS_OF(ENGRAM_MODULE_NAME),
};
