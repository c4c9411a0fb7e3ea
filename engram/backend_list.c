/* engram_backend_list_*: every backend this program can select (its
 * built-in table's rows, modules loaded on first use, then the plugins on
 * plugin_path), each asked whether it can run here and, when it can,
 * opened and closed to learn what it offers: the checks
 * engram_context_create makes, one backend at a time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/backend.h"
#include "hal/config_keys.h"
#include "hal/log.h"
#include "hal/registry.h"
#include "transports/builtins.h"

/* Plugins listed; far more than a plugin directory holds. */

typedef struct backend {
    engram_backend_info_t info;
    const engram_transport_ops_t *ops; /* NULL when ABSENT */
} backend_t;

struct engram_backend_list {
    int count;
    backend_t entries[];
};

static void set_text(char *dst, const char *text)
{
    snprintf(dst, ENGRAM_BACKEND_TEXT_BYTES, "%s", text);
}

/* available(), then an open and a close: the state, and what it offers. */
static void probe(backend_t *b, engram_group_t *group, const engram_config_t *cfg)
{
    engram_backend_info_t *in = &b->info;
    const char *why = NULL;
    if (!b->ops->available(group, &why)) {
        in->state = ENGRAM_BACKEND_UNAVAILABLE;
        set_text(in->reason, why ? why : "no reason given");
        return;
    }
    engram_transport_t *t = NULL;
    if (engram_transport_open(b->ops, group, cfg, &t) != ENGRAM_OK) {
        in->state = ENGRAM_BACKEND_UNAVAILABLE;
        snprintf(in->reason, sizeof(in->reason), "open failed: %s", engram_last_error());
        return;
    }
    in->state = ENGRAM_BACKEND_AVAILABLE;
    engram_transport_caps_t caps;
    memset(&caps, 0, sizeof(caps));
    b->ops->caps(t, &caps);
    in->caps = caps.flags;
    in->read_kinds = caps.read_kinds;
    in->write_kinds = caps.write_kinds;
    in->max_queues = caps.max_queues;
    in->max_outstanding = caps.max_outstanding;
    if (b->ops->describe != NULL)
        b->ops->describe(t, in->selected, sizeof(in->selected));
    b->ops->close(t);
}

static void named(backend_t *b, const char *name, engram_backend_origin_t origin)
{
    memset(b, 0, sizeof(*b));
    b->info.size = sizeof(b->info);
    snprintf(b->info.name, sizeof(b->info.name), "%s", name);
    b->info.origin = origin;
}

engram_status_t engram_backend_list_create(const engram_config_t *cfg, engram_group_t *group,
                                           engram_backend_list_t **out)
{
    if (cfg == NULL || group == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_backend_list_create: NULL %s",
                            cfg == NULL ? "config" : group == NULL ? "group" : "out");
    const engram_builtin_table_t *builtins = engram_transport_builtins();
    engram_plugin_name_t *names;
    const int nplugins = engram_registry_plugin_names(cfg->plugin_path, builtins, &names);
    if (nplugins < 0)
        return ENGRAM_ERR_NOMEM;
    engram_backend_list_t *list =
        malloc(sizeof(*list) + (size_t)(builtins->count + nplugins) * sizeof(list->entries[0]));
    if (list == NULL) {
        free(names);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "engram_backend_list_create: out of memory");
    }
    list->count = 0;
    for (int i = 0; i < builtins->count; i++) {
        const engram_builtin_t *row = &builtins->entries[i];
        backend_t *b = &list->entries[list->count++];
        named(b, row->name, row->module ? ENGRAM_BACKEND_MODULE : ENGRAM_BACKEND_BUILT_IN);
        const char *why = "";
        b->ops = engram_registry_builtin_ops(row, &why);
        if (b->ops == NULL)
            set_text(b->info.reason, why);
        else
            probe(b, group, cfg);
    }
    for (int i = 0; i < nplugins; i++) {
        backend_t *b = &list->entries[list->count++];
        named(b, names[i], ENGRAM_BACKEND_PLUGIN);
        if (engram_registry_load_plugin(names[i], cfg->plugin_path, &b->ops) != ENGRAM_OK) {
            b->ops = NULL;
            set_text(b->info.reason, engram_last_error());
        } else {
            probe(b, group, cfg);
        }
    }
    free(names);
    *out = list;
    return ENGRAM_OK;
}

void engram_backend_list_destroy(engram_backend_list_t *list)
{
    free(list);
}

int engram_backend_list_count(const engram_backend_list_t *list)
{
    return list != NULL ? list->count : 0;
}

engram_status_t engram_backend_list_get(const engram_backend_list_t *list, int i, engram_backend_info_t *out)
{
    if (list == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_backend_list_get: list and out must not be NULL");
    if (i < 0 || i >= list->count)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_backend_list_get: backend %d of a list of %d", i,
                            list->count);
    if (out->size < sizeof(out->size))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_backend_list_get: out->size is %zu; set it to "
                                                "sizeof(engram_backend_info_t)", out->size);
    /* the fields the caller's struct has room for; its size stays its own */
    const engram_backend_info_t *in = &list->entries[i].info;
    size_t n = out->size < sizeof(*in) ? out->size : sizeof(*in);
    memcpy((char *)out + sizeof(out->size), (const char *)in + sizeof(in->size), n - sizeof(in->size));
    return ENGRAM_OK;
}

void engram_backend_list_print_keys(const engram_backend_list_t *list, const engram_config_t *cfg, FILE *out)
{
    if (list == NULL || cfg == NULL || out == NULL)
        return;
    for (int i = 0; i < list->count; i++) {
        if (list->entries[i].ops == NULL)
            continue;
        engram_config_keyset_t keys = engram_transport_keys(list->entries[i].ops);
        engram_config_print_keyset(cfg, &keys, out);
    }
}

const char *engram_backend_module_dir(void)
{
    return engram_registry_module_dir();
}
