/* Backend registry: the built-ins its caller hands it plus plugins from
 * plugin_path. */
#ifndef ENGRAM_HAL_REGISTRY_H
#define ENGRAM_HAL_REGISTRY_H

#include "hal/config_keys.h"
#include "engram/plugin/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Plugins: <engram/plugin/plugin.h> (their entry points and ABI versions),
 * found in the module directory or plugin_path (absolute paths only;
 * relative entries are refused). */

/* A built-in that is compiled out records why ("UCX not found ..."). One
 * that is a module (ops NULL, module true) is loaded on first use from
 * libengram_transport_<name>.so in the module directory; a module that
 * cannot load is unavailable with the loader's message. */
typedef struct engram_builtin {
    const char *name;
    const engram_transport_ops_t *ops; /* NULL when absent from this build or a module */
    const char *absent_reason;
    int auto_priority; /* higher is tried first by transport=auto */
    bool module;       /* ops come from the module directory */
} engram_builtin_t;

/* The built-ins a program links (transports/builtins.h gives the real
 * one; a test passes its own). */
typedef struct engram_builtin_table {
    const engram_builtin_t *entries;
    int count;
} engram_builtin_table_t;

/* Resolve cfg->transport to ops: a built-in name, a plugin name, or auto
 * (collective: availability checks may talk to the group). Logs at INFO what
 * auto chose and why each higher-priority backend was passed over. First
 * checks every transport key set in cfg (engram_registry_check_keys). */
engram_status_t engram_registry_select(engram_group_t *group, const engram_config_t *cfg,
                                       const engram_builtin_table_t *builtins, const engram_transport_ops_t **out);

/* As engram_registry_select, but transport=auto passes over the ops in
 * skip[0..nskip) (backends that already failed to open), so the caller can
 * fall through to the next one. auto tries the plugins found on plugin_path
 * first (a user installed them on purpose), by name, then the built-ins by
 * priority. */
engram_status_t engram_registry_select_excluding(engram_group_t *group, const engram_config_t *cfg,
                                                 const engram_builtin_table_t *builtins,
                                                 const engram_transport_ops_t *const *skip, int nskip,
                                                 const engram_transport_ops_t **out);

/* Every value set for a non-core key must be declared by the transport
 * its name names (<transport>_<rest>: the longest built-in row or plugin
 * on plugin_path whose name and '_' begin it; only that one is loaded) and
 * parse there: else an error naming the key, where it was set, and why
 * (engram_config_check_keys). */
engram_status_t engram_registry_check_keys(const engram_config_t *cfg, const engram_builtin_table_t *builtins);

/* The keys `ops` declares. */
engram_config_keyset_t engram_transport_keys(const engram_transport_ops_t *ops);

/* ops->open with the view of cfg that holds ops' own keys. */
engram_status_t engram_transport_open(const engram_transport_ops_t *ops, engram_group_t *group,
                                      const engram_config_t *cfg, engram_transport_t **out);

/* Every plugin name found on plugin_path (files libengram_transport_<name>.so
 * in any of its directories), sorted, each once, less the names of
 * `builtins`' rows (NULL: none): a file of a row's name is that row's
 * module, which selection, key checks and the backend list read as the row.
 * *out is malloc'd (the caller frees it; NULL when there is none). Returns
 * how many, or -1 with the error set when out of memory. Unreadable
 * directories and malformed names are skipped. */
#define ENGRAM_PLUGIN_NAME_MAX 64
typedef char engram_plugin_name_t[ENGRAM_PLUGIN_NAME_MAX + 1];
int engram_registry_plugin_names(const char *plugin_path, const engram_builtin_table_t *builtins,
                                 engram_plugin_name_t **out);

/* The directory of the modules that ship with libengram: <dir>/engram
 * beside the shared library holding this code, or <dir>/../lib/engram for a
 * program in bin/ that links the library statically. "" when unknown. */
const char *engram_registry_module_dir(void);

/* Ops of built-in row b, loading its module when it is one (once per
 * process: the outcome is kept); NULL with the reason in *why (static,
 * valid for the process) otherwise. */
const engram_transport_ops_t *engram_registry_builtin_ops(const engram_builtin_t *b, const char **why);
/* The row of `builtins` named `name` (builtins NULL: none), or NULL. */
const engram_builtin_t *engram_registry_builtin_find(const engram_builtin_table_t *builtins, const char *name);

/* Load module <name> (libengram_transport_<name>.so) from the module
 * directory; when that fails, the reason into why (not logged as an
 * error: a module whose libraries the host lacks is expected). */
engram_status_t engram_registry_load_module(const char *name, const engram_transport_ops_t **out, char *why,
                                            size_t len);

/* Load libengram_transport_<name>.so from the module directory, else from
 * plugin_path (the first directory holding the file decides).
 * ENGRAM_ERR_NOT_FOUND when none has it. */
engram_status_t engram_registry_load_plugin(const char *name, const char *plugin_path,
                                            const engram_transport_ops_t **out);

#ifdef __cplusplus
}
#endif
#endif
