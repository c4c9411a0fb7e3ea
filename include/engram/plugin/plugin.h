/* A transport plugin's entry point: a shared object named
 * libengram_transport_<name>.so (in the library's module directory or a
 * plugin_path directory) that exports one record per transport ABI version
 * it supports, each under that version's symbol. The loader takes the
 * newest version it knows and adapts the older ones it can:
 *
 *   3  engram_transport_plugin_v3: the plugin is linked against
 *      libengram.so.0 and calls the services of <engram/plugin/...>
 *      (ENGRAM_PLUGIN_0.1) and <engram/log.h>.
 *   2  engram_transport_plugin_v1 (the name the symbol had then): the same
 *      ops; the plugin resolved the library's functions from the process's
 *      global scope, so it loads where libengram is in that scope (a program
 *      linked against it) and is refused, with its version named, where it
 *      is not (libengram itself loaded RTLD_LOCAL).
 *   older: refused, the version named.
 *
 * A plugin defines its record with ENGRAM_TRANSPORT_PLUGIN(ops). */
#ifndef ENGRAM_PLUGIN_PLUGIN_H
#define ENGRAM_PLUGIN_PLUGIN_H

#include <stdint.h>
#include "engram/plugin/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ENGRAM_TRANSPORT_ABI_VERSION 3u
#define ENGRAM_TRANSPORT_PLUGIN_SYMBOL "engram_transport_plugin_v3"
/* The previous version's symbol, which the loader still reads. */
#define ENGRAM_TRANSPORT_ABI_VERSION_V2 2u
#define ENGRAM_TRANSPORT_PLUGIN_SYMBOL_V2 "engram_transport_plugin_v1"

typedef struct engram_transport_plugin {
    uint32_t abi_version; /* the version of the symbol it is exported under */
    const engram_transport_ops_t *ops;
} engram_transport_plugin_t;

/* Exports `ops` (an engram_transport_ops_t) as this plugin's record of the
 * current version. */
#define ENGRAM_TRANSPORT_PLUGIN(ops)                                                                           \
    __attribute__((visibility("default"))) const engram_transport_plugin_t engram_transport_plugin_v3 = {     \
        ENGRAM_TRANSPORT_ABI_VERSION, &(ops)}

#ifdef __cplusplus
}
#endif
#endif
