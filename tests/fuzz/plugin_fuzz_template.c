/* The shared object the plugin fuzz target feeds the loader: its exported
 * plugin record, of transport ABI version 3 (hal/plugin_v3.h: the one whose
 * record and ops carry a version and sizes for the loader to check and
 * convert), is filled by a constructor from the control bytes in the file
 * named by FUZZ_PLUGIN_CTL, so one build yields every malformed export (ABI
 * version, ops NULL, ops size, name, missing functions). Built twice by
 * run_fuzz.sh: as is, and with -DFUZZ_NO_SYMBOL (exports no plugin symbol). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/plugin_v3.h"
#include "tests/fuzz/plugin_fuzz_ctl.h"

static void stub_void(void) {}

static char plugin_name[sizeof(((plugin_fuzz_ctl_t *)0)->name) + 1];
static engram_transport_ops_v3_t ops;

#ifdef FUZZ_NO_SYMBOL
__attribute__((visibility("default"))) engram_transport_plugin_v3_t engram_transport_plugin_v0;
#define EXPORTED engram_transport_plugin_v0
#else
__attribute__((visibility("default"))) engram_transport_plugin_v3_t engram_transport_plugin_v3;
#define EXPORTED engram_transport_plugin_v3
#endif

__attribute__((constructor)) static void fill_from_ctl(void)
{
    plugin_fuzz_ctl_t ctl;
    memset(&ctl, 0, sizeof(ctl));
    const char *path = getenv("FUZZ_PLUGIN_CTL");
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (f != NULL) {
        if (fread(&ctl, 1, sizeof(ctl), f) == 0)
            memset(&ctl, 0, sizeof(ctl));
        fclose(f);
    }
    memcpy(plugin_name, ctl.name, sizeof(ctl.name));
    ops.size = plugin_fuzz_ops_size(&ctl);
    ops.name = (ctl.fn_mask & PLUGIN_FUZZ_NAME_NULL) ? NULL : plugin_name;
    /* the loader only checks that functions are there; none is called */
#define SET_FN(i, field) ops.field = (ctl.fn_mask & PLUGIN_FUZZ_FN(i)) ? (__typeof__(ops.field))stub_void : NULL;
    SET_FN(0, available)
    SET_FN(1, open)
    SET_FN(2, caps)
    SET_FN(3, reg_symmetric)
    SET_FN(4, reg_local)
    SET_FN(5, dereg)
    SET_FN(6, get)
    SET_FN(7, flush)
    SET_FN(8, test)
    SET_FN(9, request_free)
    SET_FN(10, close)
#undef SET_FN
    EXPORTED.abi_version = ctl.abi_version;
    EXPORTED.ops = ctl.ops_null ? NULL : &ops;
}
