/* Transport ABI version 3 (and 2) into the current version: see
 * plugin_v3.h. */
#include "hal/plugin_v3.h"

#include <stdlib.h>

#include "hal/log.h"

/* The functions every version 3 transport (fetch launcher) provides end at
 * close (detach); a size short of that was refused by that version too. */
#define V3_OPS_MIN_SIZE (offsetof(engram_transport_ops_v3_t, close) + sizeof(((engram_transport_ops_v3_t *)0)->close))
#define V3_LAUNCHER_MIN_SIZE                                                                                   \
    (offsetof(engram_gpu_launcher_ops_v3_t, detach) + sizeof(((engram_gpu_launcher_ops_v3_t *)0)->detach))
/* Whether version 3 ops `in` were built with `field` (appended after close). */
#define V3_HAS(in, field) ((in)->size >= offsetof(engram_transport_ops_v3_t, field) + sizeof((in)->field))

/* The current structs, in one allocation (ops first, so free(ops) frees it). */
typedef struct converted {
    engram_transport_ops_t ops;
    engram_gpu_launcher_ops_t launcher;
} converted_t;

engram_status_t engram_plugin_from_v3(const engram_transport_plugin_v3_t *record, uint32_t version, const char *file,
                                      engram_transport_ops_t **out)
{
    const char *symbol =
        version == ENGRAM_TRANSPORT_ABI_VERSION_V3 ? ENGRAM_TRANSPORT_PLUGIN_SYMBOL_V3 : ENGRAM_TRANSPORT_PLUGIN_SYMBOL_V2;
    if (record->abi_version != version)
        return ENGRAM_ERROR(ENGRAM_ERR_VERSION,
                            "plugin %s exports %s with transport ABI version %u; that symbol is version %u's", file,
                            symbol, record->abi_version, version);
    const engram_transport_ops_v3_t *in = record->ops;
    if (in == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "plugin %s: its %s record's ops is NULL", file, symbol);
    if (in->size < V3_OPS_MIN_SIZE)
        return ENGRAM_ERROR(ENGRAM_ERR_VERSION,
                            "plugin %s: ops->size is %zu bytes, a transport ABI version %u plugin needs at least %zu "
                            "(built against an older <engram/plugin/transport.h>)",
                            file, in->size, version, (size_t)V3_OPS_MIN_SIZE);
    const engram_gpu_launcher_ops_v3_t *l = V3_HAS(in, gpu_launcher) ? in->gpu_launcher : NULL;
    if (l != NULL && l->size < V3_LAUNCHER_MIN_SIZE)
        return ENGRAM_ERROR(ENGRAM_ERR_VERSION,
                            "plugin %s: gpu_launcher->size is %zu bytes, a transport ABI version %u plugin needs at "
                            "least %zu (built against an older <engram/plugin/gpu_launcher.h>)",
                            file, l->size, version, (size_t)V3_LAUNCHER_MIN_SIZE);
    converted_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "plugin %s: out of memory converting its version %u ops", file, version);
    c->ops = (engram_transport_ops_t){
        .name = in->name,
        .available = in->available,
        .open = in->open,
        .caps = in->caps,
        .reg_symmetric = in->reg_symmetric,
        .reg_local = in->reg_local,
        .dereg = in->dereg,
        .get = in->get,
        .flush = in->flush,
        .test = in->test,
        .request_free = in->request_free,
        .describe = in->describe,
        .close = in->close,
        .progress = V3_HAS(in, progress) ? in->progress : NULL,
        .alloc_symmetric = V3_HAS(in, alloc_symmetric) ? in->alloc_symmetric : NULL,
        .gpu_launcher = l != NULL ? &c->launcher : NULL,
        .config_keys = V3_HAS(in, num_config_keys) ? in->config_keys : NULL,
        .num_config_keys = V3_HAS(in, num_config_keys) ? in->num_config_keys : 0,
    };
    if (l != NULL)
        c->launcher = (engram_gpu_launcher_ops_t){
            .attach = l->attach,
            .issue = l->issue,
            .wait = l->wait,
            .detach = l->detach,
        };
    *out = &c->ops;
    return ENGRAM_OK;
}
