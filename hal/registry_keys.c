/* Transport keys in the registry: which keys a transport declares, the view
 * its open reads them through, and the check that every transport key set
 * (file, env, API) is declared by the transport its name names. That
 * transport is known by name (a built-in row or a plugin file on
 * plugin_path), its declarations only once it is loaded, so this check runs
 * at selection, not at engram_config_create; it loads no other transport. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/log.h"
#include "hal/registry.h"

engram_config_keyset_t engram_transport_keys(const engram_transport_ops_t *ops)
{
    const char *name = ops != NULL && ops->name != NULL ? ops->name : "";
    engram_config_keyset_t set = {name, NULL, 0, name};
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

/* names[0..builtins->count) are the built-in rows, the rest plugins. */
typedef struct key_owners {
    const engram_builtin_table_t *builtins;
    const char *plugin_path;
    const char *const *names;
} key_owners_t;

static bool owner_keys(void *arg, int index, engram_config_keyset_t *set, char *why, size_t len)
{
    const key_owners_t *o = arg;
    const engram_transport_ops_t *ops = NULL;
    if (index < o->builtins->count) {
        const char *reason = NULL;
        ops = engram_registry_builtin_ops(&o->builtins->entries[index], &reason);
        if (ops == NULL) {
            snprintf(why, len, "%s", reason != NULL ? reason : "");
            return false;
        }
    } else if (engram_registry_load_plugin(o->names[index], o->plugin_path, &ops) != ENGRAM_OK) {
        snprintf(why, len, "%s", engram_last_error());
        return false;
    }
    *set = engram_transport_keys(ops);
    return true;
}

engram_status_t engram_registry_check_keys(const engram_config_t *cfg, const engram_builtin_table_t *builtins)
{
    if (cfg->num_extra == 0)
        return ENGRAM_OK; /* nothing to check: no plugin needs loading */
    engram_plugin_name_t *plugins;
    int np = engram_registry_plugin_names(cfg->plugin_path, builtins, &plugins);
    if (np < 0)
        return ENGRAM_ERR_NOMEM;
    const char **names = malloc(((size_t)builtins->count + (size_t)np + 1) * sizeof(*names));
    if (names == NULL) {
        free(plugins);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "transport keys: out of memory");
    }
    int n = 0;
    for (; n < builtins->count; n++)
        names[n] = builtins->entries[n].name;
    for (int i = 0; i < np; i++)
        names[n++] = plugins[i];
    key_owners_t owners = {builtins, cfg->plugin_path, names};
    engram_status_t st = engram_config_check_keys(cfg, names, n, owner_keys, &owners);
    free(names);
    free(plugins);
    return st;
}
