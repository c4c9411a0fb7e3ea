/* Backend selection over the built-in table its caller hands it and the
 * plugins on plugin_path. hal includes no transport: the program's table
 * comes from the layer that links the transports (transports/builtins.h),
 * a test passes its own. */
#include "hal/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/log.h"

/* auto tries at most this many built-ins; the table is a handful long. */
enum { MAX_BUILTINS = 32 };

const engram_builtin_t *engram_registry_builtin_find(const engram_builtin_table_t *builtins, const char *name)
{
    for (int i = 0; builtins != NULL && i < builtins->count; i++)
        if (strcmp(builtins->entries[i].name, name) == 0)
            return &builtins->entries[i];
    return NULL;
}

/* Module rows, loaded once per process and name: the ops, or why not. */
static struct {
    char name[ENGRAM_PLUGIN_NAME_MAX + 1];
    const engram_transport_ops_t *ops;
    char why[640];
} modules[MAX_BUILTINS];
static int modules_tried;
static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;

const engram_transport_ops_t *engram_registry_builtin_ops(const engram_builtin_t *b, const char **why)
{
    if (b->ops != NULL)
        return b->ops;
    if (!b->module || strlen(b->name) > ENGRAM_PLUGIN_NAME_MAX) {
        *why = b->absent_reason ? b->absent_reason : "not in this build";
        return NULL;
    }
    pthread_mutex_lock(&modules_lock);
    int row = 0;
    while (row < modules_tried && strcmp(modules[row].name, b->name) != 0)
        row++;
    if (row == modules_tried) {
        if (row == MAX_BUILTINS) {
            pthread_mutex_unlock(&modules_lock);
            *why = "too many module rows";
            return NULL;
        }
        char reason[512];
        snprintf(modules[row].name, sizeof(modules[row].name), "%s", b->name);
        if (engram_registry_load_module(b->name, &modules[row].ops, reason, sizeof(reason)) != ENGRAM_OK) {
            modules[row].ops = NULL;
            snprintf(modules[row].why, sizeof(modules[row].why), "module not loaded: %s", reason);
        }
        modules_tried++;
    }
    const engram_transport_ops_t *ops = modules[row].ops;
    *why = modules[row].why;
    pthread_mutex_unlock(&modules_lock);
    return ops;
}

/* Why `b` cannot run on this machine and group, or NULL when it can; its
 * ops into *ops (NULL when it has none). */
static const char *builtin_unusable(const engram_builtin_t *b, engram_group_t *group,
                                    const engram_transport_ops_t **ops)
{
    const char *why = NULL;
    *ops = engram_registry_builtin_ops(b, &why);
    if (*ops == NULL)
        return why;
    if ((*ops)->available != NULL && !(*ops)->available(group, &why))
        return why ? why : "not available (no reason given)";
    return NULL;
}

static bool skipped(const engram_transport_ops_t *ops, const engram_transport_ops_t *const *skip, int nskip)
{
    for (int i = 0; i < nskip; i++)
        if (skip[i] == ops)
            return true;
    return false;
}

/* Appends "name: why" to the passed-over list. */
static void passed_over(char *passed, size_t cap, size_t *used, const char *name, const char *why)
{
    if (*used < cap)
        *used += (size_t)snprintf(passed + *used, cap - *used, "%s%s: %s", *used ? ", " : "", name, why);
}

/* Plugins on plugin_path, by name: the first that loads, is available and
 * is not skipped; refusals are passed over with their reason. */
static const engram_transport_ops_t *auto_plugin(engram_group_t *group, const char *plugin_path,
                                                 const engram_builtin_table_t *builtins,
                                                 const engram_transport_ops_t *const *skip, int nskip, char *passed,
                                                 size_t cap, size_t *used)
{
    engram_plugin_name_t *names;
    int n = engram_registry_plugin_names(plugin_path, builtins, &names);
    if (n < 0)
        passed_over(passed, cap, used, "plugin_path", engram_last_error());
    const engram_transport_ops_t *chosen = NULL;
    for (int i = 0; i < n && chosen == NULL; i++) {
        const engram_transport_ops_t *ops = NULL;
        const char *why = NULL;
        if (engram_registry_load_plugin(names[i], plugin_path, &ops) != ENGRAM_OK)
            why = engram_last_error();
        else if (skipped(ops, skip, nskip))
            why = "tried first (logged above)";
        else if (!ops->available(group, &why))
            why = why ? why : "not available (no reason given)";
        else
            chosen = ops;
        if (chosen == NULL)
            passed_over(passed, cap, used, names[i], why);
    }
    free(names);
    return chosen;
}

static engram_status_t select_auto(engram_group_t *group, const engram_config_t *cfg,
                                   const engram_builtin_table_t *builtins, const engram_transport_ops_t *const *skip,
                                   int nskip, const engram_transport_ops_t **out)
{
    const int count = builtins->count;
    if (count > MAX_BUILTINS)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "transport=auto: %d built-ins exceed the %d it orders", count,
                            MAX_BUILTINS);
    char passed[2048] = "";
    size_t used = 0;
    const engram_transport_ops_t *plugin =
        auto_plugin(group, cfg->plugin_path, builtins, skip, nskip, passed, sizeof(passed), &used);
    if (plugin != NULL) {
        ENGRAM_INFO("transport=auto chose plugin %s%s%s", plugin->name, used ? "; passed over " : "", passed);
        *out = plugin;
        return ENGRAM_OK;
    }
    /* Insertion sort by priority, stable so equal priorities keep table order
     * (the same order on every rank: available() may be collective). */
    const engram_builtin_t *order[MAX_BUILTINS];
    for (int i = 0; i < count; i++) {
        int j = i;
        for (; j > 0 && order[j - 1]->auto_priority < builtins->entries[i].auto_priority; j--)
            order[j] = order[j - 1];
        order[j] = &builtins->entries[i];
    }
    for (int i = 0; i < count; i++) {
        const engram_transport_ops_t *ops = NULL;
        const char *why = builtin_unusable(order[i], group, &ops);
        if (ops != NULL && skipped(ops, skip, nskip))
            why = "tried first (logged above)";
        if (why == NULL) {
            ENGRAM_INFO("transport=auto chose %s%s%s", order[i]->name, used ? "; passed over " : "", passed);
            *out = ops;
            return ENGRAM_OK;
        }
        passed_over(passed, sizeof(passed), &used, order[i]->name, why);
    }
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "transport=auto found no usable backend: %s",
                        used ? passed : "no built-ins in this build");
}

static void known_backends(const engram_builtin_table_t *builtins, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "auto");
    for (int i = 0; i < builtins->count && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, ", %s", builtins->entries[i].name);
}

static engram_status_t select_plugin(engram_group_t *group, const char *name, const char *plugin_path,
                                     const engram_builtin_table_t *builtins, const engram_transport_ops_t **out)
{
    const engram_transport_ops_t *ops = NULL;
    engram_status_t st = engram_registry_load_plugin(name, plugin_path, &ops);
    if (st == ENGRAM_ERR_NOT_FOUND) {
        char known[256], why[1024];
        known_backends(builtins, known, sizeof(known));
        snprintf(why, sizeof(why), "%s", engram_last_error()); /* the next error overwrites it */
        return ENGRAM_ERROR(st, "transport '%s' is not a built-in (known backends: %s) nor a plugin: %s", name,
                            known, why);
    }
    if (st != ENGRAM_OK)
        return st;
    const char *why = NULL;
    if (!ops->available(group, &why))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "transport '%s' (plugin) cannot run here: %s", name,
                            why ? why : "no reason given");
    *out = ops;
    return ENGRAM_OK;
}

engram_status_t engram_registry_select(engram_group_t *group, const engram_config_t *cfg,
                                       const engram_builtin_table_t *builtins, const engram_transport_ops_t **out)
{
    return engram_registry_select_excluding(group, cfg, builtins, NULL, 0, out);
}

engram_status_t engram_registry_select_excluding(engram_group_t *group, const engram_config_t *cfg,
                                                 const engram_builtin_table_t *builtins,
                                                 const engram_transport_ops_t *const *skip, int nskip,
                                                 const engram_transport_ops_t **out)
{
    if (cfg == NULL || builtins == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_registry_select: NULL %s",
                            cfg == NULL ? "config" : builtins == NULL ? "built-in table" : "out");
    engram_status_t st = engram_registry_check_keys(cfg, builtins);
    if (st != ENGRAM_OK)
        return st;
    const char *name = cfg->transport;
    if (strcmp(name, "auto") == 0)
        return select_auto(group, cfg, builtins, skip, nskip, out);
    const engram_builtin_t *b = engram_registry_builtin_find(builtins, name);
    if (b == NULL)
        return select_plugin(group, name, cfg->plugin_path, builtins, out);
    const engram_transport_ops_t *ops = NULL;
    const char *why = builtin_unusable(b, group, &ops);
    if (ops == NULL && !b->module)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "transport '%s' is not in this build: %s", name, why);
    if (why != NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "transport '%s' cannot run here: %s", name, why);
    *out = ops;
    return ENGRAM_OK;
}
