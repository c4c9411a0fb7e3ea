/* A transport plugin's entry point: a shared object named
 * libengram_transport_<name>.so (in the library's module directory or a
 * plugin_path directory) that exports its ops under the symbol of the
 * transport ABI version it was built against. A plugin defines it with
 * ENGRAM_TRANSPORT_PLUGIN(ops).
 *
 * Versions. Two things grow, and each has one signal:
 *
 * - What a plugin provides (engram_transport_ops_t, its fetch launcher
 *   engram_gpu_launcher_ops_t, and what the library hands their functions):
 *   the transport ABI version, ENGRAM_TRANSPORT_ABI_VERSION, carried only
 *   by the entry symbol's name, engram_transport_plugin_v<N>. Each version
 *   is one fixed set of structs: nothing is appended to them, the ops and
 *   launcher a plugin fills carry no size, and a change is a new version
 *   with a new symbol. (The structs the library fills in and hands over,
 *   the configuration view, a span, an issue, segment parameters, state
 *   the library's sizeof in their size field; within a version it is
 *   fixed, so a plugin need not check it.)
 *   The loader reads the newest symbol it knows; a plugin of the previous
 *   version is converted into the current structs, field by field, before
 *   anything of it is used (the library keeps that version's structs
 *   frozen), as NCCL converts its net plugins; older ones are refused with
 *   their version named.
 * - What a plugin calls of the library (the services of <engram/plugin/...>
 *   marked ENGRAM_PLUGIN_API, and <engram/log.h>): the ELF version node of
 *   libengram.so.0 they are exported in, ENGRAM_PLUGIN_0.<minor>. A plugin
 *   linked against a newer library than the one that loads it is refused by
 *   the dynamic linker, naming the node it lacks.
 *
 * The versions this library loads:
 *   4  engram_transport_plugin_v4 (this header): a pointer to the ops.
 *   3  engram_transport_plugin_v3: a record {3, ops} whose ops and launcher
 *      begin with their size (fields appended over time); converted.
 *   2  engram_transport_plugin_v1: version 3's record and ops, from a
 *      plugin not linked against libengram.so.0 (it found the library's
 *      functions in the process's global scope, which a libengram loaded
 *      RTLD_LOCAL is not); converted as version 3.
 *   older: refused. */
#ifndef ENGRAM_PLUGIN_PLUGIN_H
#define ENGRAM_PLUGIN_PLUGIN_H

#include "engram/plugin/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ENGRAM_TRANSPORT_ABI_VERSION 4u
#define ENGRAM_TRANSPORT_PLUGIN_SYMBOL "engram_transport_plugin_v4"

/* Exports `ops` (an engram_transport_ops_t with static storage) as this
 * plugin's entry point of the current transport ABI version. */
#define ENGRAM_TRANSPORT_PLUGIN(ops)                                                                           \
    __attribute__((visibility("default"))) const engram_transport_ops_t *const engram_transport_plugin_v4 =   \
        &(ops)

#ifdef __cplusplus
}
#endif
#endif
