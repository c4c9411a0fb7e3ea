/* Transport keys in the registry: which keys a transport declares, the view
 * its open reads them through, and the check that every transport key set
 * (file, env, API) is declared by some transport that was found. A key's
 * owner is known only once transports are found (plugins by loading them),
 * so this check runs at selection, not at engram_config_create. */
#include <stdio.h>
#include <string.h>

#include "hal/log.h"
#include "hal/registry.h"

/* Plugins consulted for their keys; more than a handful is not a setup. */
enum { MAX_PLUGINS = 32 };

engram_config_keyset_t engram_transport_keys(const engram_transport_ops_t *ops)
{
    engram_config_keyset_t set = {ops != NULL ? ops->name : "", NULL, 0};
    if (ops != NULL && ops->config_keys != NULL) {
        set.keys = ops->config_keys;
        set.count = ops->num_config_keys;
    }
    return set;
}

engram_status_t engram_transport_open(const engram_transport_ops_t *ops, engram_group_t *group,
                                      const engram_config_t *cfg, engram_transport_t **out)
{
    if (ops == NULL || cfg == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_transport_open: NULL %s", ops == NULL ? "ops" : "config");
    engram_config_keyset_t keys = engram_transport_keys(ops);
    engram_config_view_impl_t impl;
    engram_config_view_t view;
    engram_config_view_init(&view, &impl, cfg, &keys);
    return ops->open(group, &view, out);
}

engram_status_t engram_registry_check_keys(const engram_config_t *cfg, const engram_builtin_table_t *builtins)
{
    if (cfg->num_extra == 0)
        return ENGRAM_OK; /* nothing to check: no plugin needs loading */
    engram_config_keyset_t sets[2 * MAX_PLUGINS];
    int nsets = 0;
    char names[MAX_PLUGINS][ENGRAM_PLUGIN_NAME_MAX + 1];
    int n = engram_registry_plugin_names(cfg->plugin_path, names, MAX_PLUGINS);
    char note[2048] = "";
    size_t used = 0;
    /* A built-in compiled out or a module that did not load, like a plugin
     * that did not load, has keys no one can know here. */
    for (int i = 0; i < builtins->count && nsets < MAX_PLUGINS; i++) {
        const char *why = NULL;
        const engram_transport_ops_t *ops = engram_registry_builtin_ops(&builtins->entries[i], &why);
        if (ops != NULL)
            sets[nsets++] = engram_transport_keys(ops);
        else if (used < sizeof(note))
            used += (size_t)snprintf(note + used, sizeof(note) - used, "%s%s is not usable in this build (%s)",
                                     used ? "; " : "", builtins->entries[i].name, why ? why : "");
    }
    for (int i = 0; i < n; i++) {
        const engram_transport_ops_t *ops = NULL;
        if (engram_registry_load_plugin(names[i], cfg->plugin_path, &ops) == ENGRAM_OK)
            sets[nsets++] = engram_transport_keys(ops);
        else if (used < sizeof(note))
            used += (size_t)snprintf(note + used, sizeof(note) - used, "%splugin %s could not be loaded: %s",
                                     used ? "; " : "", names[i], engram_last_error());
    }
    return engram_config_check_keys(cfg, sets, nsets, note);
}
