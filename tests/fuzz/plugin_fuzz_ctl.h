/* Control record shared by the plugin fuzz target and its template plugin:
 * how the template fills its exported engram_transport_plugin_v3_t. */
#ifndef ENGRAM_TESTS_FUZZ_PLUGIN_FUZZ_CTL_H
#define ENGRAM_TESTS_FUZZ_PLUGIN_FUZZ_CTL_H

#include <stddef.h>
#include <stdint.h>
#include "hal/plugin_v3.h"

#define PLUGIN_FUZZ_FN(i) (1u << (i)) /* the i-th mandatory function is set */
#define PLUGIN_FUZZ_ALL_FNS 0x7ffu    /* all 11 mandatory functions */
#define PLUGIN_FUZZ_NAME_NULL (1u << 15)

typedef struct plugin_fuzz_ctl {
    uint32_t abi_version;
    uint8_t ops_null;
    uint8_t size_raw;   /* 0: sizeof(ops); 1..: sizeof(ops) + size_delta; else size_value */
    int16_t size_delta;
    uint64_t size_value;
    uint16_t fn_mask;   /* PLUGIN_FUZZ_FN bits, PLUGIN_FUZZ_NAME_NULL */
    char name[9];       /* the template NUL-terminates it */
} plugin_fuzz_ctl_t;

static inline size_t plugin_fuzz_ops_size(const plugin_fuzz_ctl_t *ctl)
{
    if (ctl->size_raw == 0)
        return sizeof(engram_transport_ops_v3_t);
    if (ctl->size_raw < 128)
        return (size_t)((int64_t)sizeof(engram_transport_ops_v3_t) + ctl->size_delta);
    return (size_t)ctl->size_value;
}

#endif
