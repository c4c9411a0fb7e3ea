/* The built-in transport table, handed to hal/registry.c by its callers
 * (hal includes no transport; this is the layer above it that knows them
 * all). Its rows are BUILTIN_BACKENDS of transports/builtins.bzl, written
 * by transports/BUILD.bazel into transports/builtin_rows.h, one macro a
 * row:
 *   ENGRAM_BUILTIN_LINKED(name, priority)          linked in: engram_<name>_ops
 *   ENGRAM_BUILTIN_MODULE(name, priority)          a module, loaded on first use from
 *                                                  <libdir>/engram (linked in where
 *                                                  ENGRAM_BUILTINS_LINK_MODULES is defined:
 *                                                  //transports:builtins_static)
 *   ENGRAM_BUILTIN_ABSENT(name, priority, reason)  not in this build, and why
 * An absent backend keeps its row, so transport=<name> and transport=auto
 * can say why. */
#include "transports/builtins.h"

#ifdef ENGRAM_BUILTINS_LINK_MODULES
#define ENGRAM_BUILTIN_MODULE(name, priority) ENGRAM_BUILTIN_LINKED(name, priority)
#endif

/* The ops of the rows linked in, defined by their backends' libraries. */
#define ENGRAM_BUILTIN_LINKED(name, priority) extern const engram_transport_ops_t engram_##name##_ops;
#ifndef ENGRAM_BUILTINS_LINK_MODULES
#define ENGRAM_BUILTIN_MODULE(name, priority)
#endif
#define ENGRAM_BUILTIN_ABSENT(name, priority, reason)
#include "transports/builtin_rows.h"
#undef ENGRAM_BUILTIN_LINKED
#ifndef ENGRAM_BUILTINS_LINK_MODULES
#undef ENGRAM_BUILTIN_MODULE
#endif
#undef ENGRAM_BUILTIN_ABSENT

static const engram_builtin_t builtins[] = {
#define ENGRAM_BUILTIN_LINKED(name, priority) {#name, &engram_##name##_ops, NULL, priority, false},
#ifndef ENGRAM_BUILTINS_LINK_MODULES
#define ENGRAM_BUILTIN_MODULE(name, priority) {#name, NULL, NULL, priority, true},
#endif
#define ENGRAM_BUILTIN_ABSENT(name, priority, reason) {#name, NULL, reason, priority, false},
#include "transports/builtin_rows.h"
};

static const engram_builtin_table_t table = {builtins, (int)(sizeof(builtins) / sizeof(builtins[0]))};

const engram_builtin_table_t *engram_transport_builtins(void)
{
    return &table;
}
