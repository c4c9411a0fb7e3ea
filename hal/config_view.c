/* Transport keys: checking what a transport declares (each key named
 * <transport>_<rest>), checking every value set for a non-core key against
 * the declarations of the one transport its name names, and the view
 * through which a transport reads its keys at open. */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "hal/config_keys.h"
#include "hal/log.h"

static const engram_config_key_decl_t *decl_find(const engram_config_keyset_t *set, const char *name)
{
    for (int i = 0; set != NULL && i < set->count; i++)
        if (strcmp(set->keys[i].name, name) == 0)
            return &set->keys[i];
    return NULL;
}

static int core_find(const char *name)
{
    for (int i = 0; engram_config_key(i) != NULL; i++)
        if (strcmp(engram_config_key(i)->name, name) == 0)
            return i;
    return -1;
}

static const engram_config_extra_t *extra_find(const engram_config_t *cfg, const char *name)
{
    for (int i = 0; i < cfg->num_extra; i++)
        if (strcmp(cfg->extra[i].name, name) == 0)
            return &cfg->extra[i];
    return NULL;
}

engram_status_t engram_config_check_decls(const engram_config_keyset_t *set)
{
    if (set->count < 0 || (set->count > 0 && set->keys == NULL))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: config key table of %d keys at %p", set->owner, set->count,
                            (const void *)set->keys);
    const char *transport = set->transport != NULL ? set->transport : "";
    const size_t prefix = strlen(transport);
    if (set->count > 0 && prefix == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: declares config keys but has no transport name for them to "
                            "begin with", set->owner);
    for (size_t j = 0; set->count > 0 && j < prefix; j++)
        if (!((transport[j] >= 'a' && transport[j] <= 'z') || (transport[j] >= '0' && transport[j] <= '9') ||
              transport[j] == '_'))
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: declares config keys, but its name '%s' holds '%c': keys "
                                "are [a-z0-9_] and begin with their transport's name, so only a transport named in "
                                "[a-z0-9_] can declare any", set->owner, transport, transport[j]);
    for (int i = 0; i < set->count; i++) {
        const engram_config_key_decl_t *k = &set->keys[i];
        if (k->name == NULL || k->def == NULL || k->accepted == NULL || k->help == NULL)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: config key %d has a NULL name, default, accepted or help",
                                set->owner, i);
        size_t len = strlen(k->name);
        bool valid = len > 0 && len <= ENGRAM_CONFIG_NAME_MAX;
        for (size_t j = 0; j < len; j++)
            valid &= (k->name[j] >= 'a' && k->name[j] <= 'z') || (k->name[j] >= '0' && k->name[j] <= '9') ||
                     k->name[j] == '_';
        if (!valid)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: config key '%s' is not 1..%d of [a-z0-9_]", set->owner,
                                k->name, ENGRAM_CONFIG_NAME_MAX);
        if (len <= prefix + 1 || strncmp(k->name, transport, prefix) != 0 || k->name[prefix] != '_')
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: config key '%s' is not named after its transport: "
                                "transport %s declares only keys named %s_<rest>", set->owner, k->name, transport,
                                transport);
        if (core_find(k->name) >= 0)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: config key '%s' is a core key; a transport declares only "
                                "its own", set->owner, k->name);
        for (int j = 0; j < i; j++)
            if (strcmp(set->keys[j].name, k->name) == 0)
                return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: config key '%s' is declared twice", set->owner,
                                    k->name);
        char where[4096 + 32]; /* the owner names a plugin by its path */
        snprintf(where, sizeof(where), "%s: default of ", set->owner);
        int64_t num;
        engram_status_t st = engram_config_parse_value(k, k->def, where, &num);
        if (st != ENGRAM_OK)
            return st;
    }
    return ENGRAM_OK;
}

int engram_config_key_transport(const char *key, const char *const *names, int n)
{
    int best = -1;
    size_t best_len = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len > best_len && strncmp(key, names[i], len) == 0 && key[len] == '_') {
            best = i;
            best_len = len;
        }
    }
    return best;
}

/* Appends ", name" (the first without the comma) to buf[0..cap). */
static void list_add(char *buf, size_t cap, size_t *used, const char *name)
{
    if (*used < cap)
        *used += (size_t)snprintf(buf + *used, cap - *used, "%s%s", *used ? ", " : "", name);
}

engram_status_t engram_config_check_keys(const engram_config_t *cfg, const char *const *names, int n,
                                         engram_config_find_keys_t find, void *ctx)
{
    /* The transports looked up so far: each at most once per check. */
    struct {
        int index;
        engram_config_keyset_t set;
    } found[ENGRAM_CONFIG_EXTRA_MAX];
    int nfound = 0;
    for (int e = 0; e < cfg->num_extra; e++) {
        const engram_config_extra_t *x = &cfg->extra[e];
        int owner = engram_config_key_transport(x->name, names, n);
        if (owner < 0) {
            char known[1024] = "none";
            size_t used = 0;
            for (int i = 0; i < n; i++)
                list_add(known, sizeof(known), &used, names[i]);
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                                "%s: unknown key '%s': not a core key, and no transport's name followed by '_' "
                                "begins it (a transport's keys are <transport>_<rest>; transports: %s)",
                                x->where, x->name, known);
        }
        int f = 0;
        while (f < nfound && found[f].index != owner)
            f++;
        if (f == nfound) {
            char why[1024] = "";
            engram_config_keyset_t set = {names[owner], NULL, 0, names[owner]};
            if (!find(ctx, owner, &set, why, sizeof(why)))
                return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: key '%s' is transport %s's, which cannot be loaded: %s",
                                    x->where, x->name, names[owner], why[0] ? why : "no reason given");
            engram_status_t st = engram_config_check_decls(&set);
            if (st != ENGRAM_OK)
                return st;
            found[nfound].index = owner;
            found[nfound++].set = set;
        }
        const engram_config_keyset_t *set = &found[f].set;
        const engram_config_key_decl_t *k = decl_find(set, x->name);
        if (k == NULL) {
            char keys[1024] = "none";
            size_t used = 0;
            for (int i = 0; i < set->count; i++)
                list_add(keys, sizeof(keys), &used, set->keys[i].name);
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                                "%s: unknown key '%s': not a core key, and transport %s declares no such key "
                                "(its keys: %s)",
                                x->where, x->name, names[owner], keys);
        }
        char where[sizeof(x->where) + 64];
        snprintf(where, sizeof(where), "%s: %s's ", x->where, set->owner);
        int64_t num;
        engram_status_t st = engram_config_parse_value(k, x->value, where, &num);
        if (st != ENGRAM_OK)
            return st;
    }
    return ENGRAM_OK;
}

void engram_config_print_keyset(const engram_config_t *cfg, const engram_config_keyset_t *set, FILE *out)
{
    for (int i = 0; i < set->count; i++) {
        const engram_config_key_decl_t *k = &set->keys[i];
        const engram_config_extra_t *x = extra_find(cfg, k->name);
        const char *value = x ? x->value : k->def;
        fprintf(out, "%-12s = %-12s [%s] accepted: %s; %s: %s\n", k->name, value[0] ? value : "\"\"",
                engram_config_source_str(x ? x->source : ENGRAM_CONFIG_SRC_DEFAULT), k->accepted, set->owner,
                k->help);
    }
}

/* The text of `key` for the view's transport: a core key's field, or its
 * own key's value (set, else the default); NULL with the error set when
 * the key is neither. */
static const engram_config_key_decl_t *view_key(const engram_config_view_t *view, const char *key, const char **text,
                                                const char **where, int *core)
{
    const engram_config_view_impl_t *impl = view->impl;
    *core = key != NULL ? core_find(key) : -1;
    if (*core >= 0)
        return engram_config_key(*core);
    const engram_config_key_decl_t *k = key != NULL ? decl_find(&impl->keys, key) : NULL;
    if (k == NULL) {
        ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s reads config key '%s', which is neither a core key nor one it declares",
                     impl->keys.owner, key ? key : "(null)");
        return NULL;
    }
    const engram_config_extra_t *x = extra_find(impl->cfg, key);
    *text = x ? x->value : k->def;
    *where = x ? x->where : "default";
    return k;
}

static engram_status_t view_get_int(const engram_config_view_t *view, const char *key, int64_t *out)
{
    const char *text = NULL, *where = NULL;
    int core;
    const engram_config_key_decl_t *k = view_key(view, key, &text, &where, &core);
    if (k == NULL)
        return ENGRAM_ERR_INVALID;
    if (out == NULL || (k->type != ENGRAM_CONFIG_INT && k->type != ENGRAM_CONFIG_ENUM))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "config view get_int(%s): %s", key,
                            out == NULL ? "NULL out" : "not an INT or ENUM key");
    if (core >= 0) {
        *out = engram_config_core_int(((const engram_config_view_impl_t *)view->impl)->cfg, core);
        return ENGRAM_OK;
    }
    char prefix[sizeof(((engram_config_extra_t *)0)->where) + 4];
    snprintf(prefix, sizeof(prefix), "%s: ", where);
    return engram_config_parse_value(k, text, prefix, out);
}

static engram_status_t view_get_string(const engram_config_view_t *view, const char *key, const char **out)
{
    const char *text = NULL, *where = NULL;
    int core;
    const engram_config_key_decl_t *k = view_key(view, key, &text, &where, &core);
    if (k == NULL)
        return ENGRAM_ERR_INVALID;
    if (out == NULL || (k->type != ENGRAM_CONFIG_STRING && k->type != ENGRAM_CONFIG_PATHS))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "config view get_string(%s): %s", key,
                            out == NULL ? "NULL out" : "not a STRING or PATHS key");
    if (core >= 0) {
        *out = engram_config_core_string(((const engram_config_view_impl_t *)view->impl)->cfg, core);
        return ENGRAM_OK;
    }
    char prefix[sizeof(((engram_config_extra_t *)0)->where) + 4];
    snprintf(prefix, sizeof(prefix), "%s: ", where);
    int64_t unused;
    engram_status_t st = engram_config_parse_value(k, text, prefix, &unused);
    if (st == ENGRAM_OK)
        *out = text;
    return st;
}

void engram_config_view_init(engram_config_view_t *view, engram_config_view_impl_t *impl, const engram_config_t *cfg,
                             const engram_config_keyset_t *keys)
{
    impl->cfg = cfg;
    impl->keys = *keys;
    view->size = sizeof(*view);
    view->impl = impl;
    view->get_int = view_get_int;
    view->get_string = view_get_string;
}
