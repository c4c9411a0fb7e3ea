/* testplug (tests/install/testplug.c, included: its functions) as a plugin
 * of transport ABI version 3 exports it, or with TESTPLUG_V2 as one of
 * version 2: a record of the frozen structs (hal/plugin_v3.h) under that
 * version's symbol, so the loader's conversion is tested end to end. */
#include <engram/plugin/plugin.h>

/* testplug's own entry point of the current version is left out. */
#undef ENGRAM_TRANSPORT_PLUGIN
#define ENGRAM_TRANSPORT_PLUGIN(ops) __attribute__((unused)) static const engram_transport_ops_t *const current = &(ops)
#include "tests/install/testplug.c"

#include "hal/plugin_v3.h"

static engram_transport_ops_v3_t v3_ops;

/* Filled before the loader reads the record (constructors run in dlopen). */
__attribute__((constructor)) static void fill_v3(void)
{
    v3_ops = (engram_transport_ops_v3_t){
        .size = sizeof(v3_ops),
        .name = tp_ops.name,
        .available = tp_ops.available,
        .open = tp_ops.open,
        .caps = tp_ops.caps,
        .reg_symmetric = tp_ops.reg_symmetric,
        .reg_local = tp_ops.reg_local,
        .dereg = tp_ops.dereg,
        .get = tp_ops.get,
        .flush = tp_ops.flush,
        .test = tp_ops.test,
        .request_free = tp_ops.request_free,
        .describe = tp_ops.describe,
        .close = tp_ops.close,
        .config_keys = tp_ops.config_keys,
        .num_config_keys = tp_ops.num_config_keys,
    };
}

#ifdef TESTPLUG_V2
ENGRAM_API const engram_transport_plugin_v3_t engram_transport_plugin_v1 = {ENGRAM_TRANSPORT_ABI_VERSION_V2, &v3_ops};
#else
ENGRAM_API const engram_transport_plugin_v3_t engram_transport_plugin_v3 = {ENGRAM_TRANSPORT_ABI_VERSION_V3, &v3_ops};
#endif
