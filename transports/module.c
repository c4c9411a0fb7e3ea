/* A built-in backend as a module: libengram_transport_<name>.so exports
 * the plugin entry symbol, a pointer to the backend's ops
 * (ENGRAM_MODULE_NAME, set by transports/BUILD.bazel), built as any
 * out-of-tree plugin is: against <engram/plugin/...> alone, linked against
 * libengram.so.0. The loader checks it as any plugin; the ops table is
 * the same one a static build links, so gets cross no new indirection. */
#include "engram/plugin/plugin.h"

#define ENGRAM_PASTE(a, b, c) a##b##c
#define ENGRAM_OPS_OF(name) ENGRAM_PASTE(engram_, name, _ops)

extern const engram_transport_ops_t ENGRAM_OPS_OF(ENGRAM_MODULE_NAME);

ENGRAM_TRANSPORT_PLUGIN(ENGRAM_OPS_OF(ENGRAM_MODULE_NAME));
