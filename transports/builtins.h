/* The built-in transports of this build, for the registry's callers (the
 * engram layer, engram_info). //transports:builtins defines it; a test
 * binary that links the engram layer with a transport of its own defines
 * it instead (tests/recording_transport.c). */
#ifndef ENGRAM_TRANSPORTS_BUILTINS_H
#define ENGRAM_TRANSPORTS_BUILTINS_H

#include "hal/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

const engram_builtin_table_t *engram_transport_builtins(void);

#ifdef __cplusplus
}
#endif
#endif
