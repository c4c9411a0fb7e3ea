/* Backend selection over the built-in table and plugins.
 *
 * The table is defined above hal (transports/builtins.c, target
 * //transports:builtins) so hal includes no transport; a program links that
 * target, a test may link its own table instead. */
#include "hal/registry.h"

#include <stdio.h>
#include <string.h>

#include "hal/log.h"

extern const engram_builtin_t engram_builtins[];
extern const int engram_builtin_count;

/* auto tries at most this many built-ins; the table is a handful long. */
enum { MAX_BUILTINS = 32 };

int engram_registry_builtin_count(void)
{
    return engram_builtin_count;
}

const engram_builtin_t *engram_registry_builtin(int i)
{
    if (i < 0 || i >= engram_builtin_count)
        return NULL;
    return &engram_builtins[i];
}

static const engram_builtin_t *builtin_find(const char *name)
{
    for (int i = 0; i < engram_builtin_count; i++)
        if (strcmp(engram_builtins[i].name, name) == 0)
            return &engram_builtins[i];
    return NULL;
}

/* Why `b` cannot run on this machine and group, or NULL when it can. */
static const char *builtin_unusable(const engram_builtin_t *b, engram_group_t *group)
{
    if (b->ops == NULL)
        return b->absent_reason ? b->absent_reason : "not in this build";
    const char *why = NULL;
    if (b->ops->available != NULL && !b->ops->available(group, &why))
        return why ? why : "not available (no reason given)";
    return NULL;
}

static engram_status_t select_auto(engram_group_t *group, const engram_transport_ops_t **out)
{
    if (engram_builtin_count > MAX_BUILTINS)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "transport=auto: %d built-ins exceed the %d it orders",
                            engram_builtin_count, MAX_BUILTINS);
    /* Insertion sort by priority, stable so equal priorities keep table order
     * (the same order on every rank: available() may be collective). */
    const engram_builtin_t *order[MAX_BUILTINS];
    for (int i = 0; i < engram_builtin_count; i++) {
        int j = i;
        for (; j > 0 && order[j - 1]->auto_priority < engram_builtins[i].auto_priority; j--)
            order[j] = order[j - 1];
        order[j] = &engram_builtins[i];
    }
    char passed[1024] = "";
    size_t used = 0;
    for (int i = 0; i < engram_builtin_count; i++) {
        const char *why = builtin_unusable(order[i], group);
        if (why == NULL) {
            ENGRAM_INFO("transport=auto chose %s%s%s", order[i]->name, used ? "; passed over " : "", passed);
            *out = order[i]->ops;
            return ENGRAM_OK;
        }
        if (used < sizeof(passed))
            used += (size_t)snprintf(passed + used, sizeof(passed) - used, "%s%s: %s", used ? ", " : "",
                                     order[i]->name, why);
    }
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "transport=auto found no usable backend: %s",
                        used ? passed : "no built-ins in this build");
}

static engram_status_t select_plugin(engram_group_t *group, const char *name, const char *plugin_path,
                                     const engram_transport_ops_t **out)
{
    const engram_transport_ops_t *ops = NULL;
    engram_status_t st = engram_registry_load_plugin(name, plugin_path, &ops);
    if (st != ENGRAM_OK)
        return st;
    const char *why = NULL;
    if (!ops->available(group, &why))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "transport '%s' (plugin) cannot run here: %s", name,
                            why ? why : "no reason given");
    *out = ops;
    return ENGRAM_OK;
}

engram_status_t engram_registry_select(engram_group_t *group, const struct engram_config *cfg,
                                       const engram_transport_ops_t **out)
{
    if (cfg == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_registry_select: NULL %s", cfg == NULL ? "config" : "out");
    const char *name = cfg->transport;
    if (strcmp(name, "auto") == 0)
        return select_auto(group, out);
    const engram_builtin_t *b = builtin_find(name);
    if (b == NULL)
        return select_plugin(group, name, cfg->plugin_path, out);
    if (b->ops == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "transport '%s' is not in this build: %s", name,
                            builtin_unusable(b, group));
    const char *why = builtin_unusable(b, group);
    if (why != NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "transport '%s' cannot run here: %s", name, why);
    *out = b->ops;
    return ENGRAM_OK;
}
