/* Plugin loading: libengram_transport_<name>.so from the module directory
 * that ships with the library (<libdir>/engram), then from absolute
 * plugin_path directories, checked before any of its functions is trusted.
 *
 * Lifetime: an accepted plugin is never dlclose()d. Its ops (and the
 * transports, regions and requests they created) may be in use anywhere in
 * the process, and nothing counts those users, so it stays mapped until the
 * process exits; so do the current-version ops an older plugin's were
 * converted into. Only a refused plugin, whose ops were never handed out, is
 * closed again. */
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal/log.h"
#include "hal/plugin_v3.h"
#include "hal/registry.h"

/* What every transport provides. */
#define MANDATORY_OPS(X) X(available) X(open) X(caps) X(close)
/* The host-initiated data path: all of it, or (a GPU-initiated backend
 * with a fetch launcher) none of it. */
#define HOST_OPS(X) X(reg_symmetric) X(reg_local) X(dereg) X(get) X(flush) X(test) X(request_free)
#define LAUNCHER_OPS(X) X(attach) X(issue) X(wait) X(detach)

static engram_status_t check_functions(const engram_transport_ops_t *ops, const char *file)
{
#define CHECK_MANDATORY(fn)                                                                                    \
    if (ops->fn == NULL)                                                                                       \
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "plugin %s: ops->" #fn " is NULL but every transport must "   \
                            "provide it", file);
    MANDATORY_OPS(CHECK_MANDATORY)
#undef CHECK_MANDATORY
    const engram_gpu_launcher_ops_t *l = ops->gpu_launcher;
    int host = 0, host_total = 0;
#define COUNT_HOST(fn) host += ops->fn != NULL, host_total++;
    HOST_OPS(COUNT_HOST)
#undef COUNT_HOST
    if (l == NULL || host != 0) {
#define CHECK_HOST(fn)                                                                                         \
    if (ops->fn == NULL)                                                                                       \
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "plugin %s: ops->" #fn " is NULL but every transport must "   \
                            "provide it (a GPU-initiated one with a gpu_launcher may leave all %d host ops NULL)", \
                            file, host_total);
        HOST_OPS(CHECK_HOST)
#undef CHECK_HOST
    }
    if (l == NULL)
        return ENGRAM_OK;
#define CHECK_LAUNCHER(fn)                                                                                     \
    if (l->fn == NULL)                                                                                         \
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "plugin %s: gpu_launcher->" #fn " is NULL but a fetch launcher " \
                            "must provide it", file);
    LAUNCHER_OPS(CHECK_LAUNCHER)
#undef CHECK_LAUNCHER
    return ENGRAM_OK;
}

/* Plugin names become file names: no '/', no "..", nothing a shell quotes. */
static bool name_is_valid(const char *name)
{
    if (name[0] == '\0' || strlen(name) > ENGRAM_PLUGIN_NAME_MAX)
        return false;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-'))
            return false;
    return true;
}

/* Entries of a ':'-separated path: iterate with rest = path_begin(path) and
 * path_next(&rest, ...). An empty path has no entries; "a:" has two, "a" and
 * "". */
static const char *path_begin(const char *path)
{
    return path[0] != '\0' ? path : NULL;
}

static bool path_next(const char **rest, const char **entry, size_t *len)
{
    const char *path = *rest;
    if (path == NULL)
        return false;
    const char *colon = strchr(path, ':');
    *entry = path;
    *len = colon ? (size_t)(colon - path) : strlen(path);
    *rest = colon ? colon + 1 : NULL;
    return true;
}

/* The accepted plugins of an older transport ABI version and their
 * converted ops: loading one again (dlopen hands back the same handle)
 * yields the same ops, as for a current one. Kept for the process, as the
 * plugins are. */
typedef struct converted_plugin {
    void *handle;
    const engram_transport_ops_t *ops;
    struct converted_plugin *next;
} converted_plugin_t;

static converted_plugin_t *converted_plugins;
static pthread_mutex_t converted_lock = PTHREAD_MUTEX_INITIALIZER;

static const engram_transport_ops_t *converted_find(void *handle)
{
    pthread_mutex_lock(&converted_lock);
    const converted_plugin_t *c = converted_plugins;
    while (c != NULL && c->handle != handle)
        c = c->next;
    pthread_mutex_unlock(&converted_lock);
    return c != NULL ? c->ops : NULL;
}

static engram_status_t converted_keep(void *handle, const engram_transport_ops_t *ops, const char *file)
{
    converted_plugin_t *c = malloc(sizeof(*c));
    if (c == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "plugin %s: out of memory keeping its converted ops", file);
    pthread_mutex_lock(&converted_lock);
    *c = (converted_plugin_t){handle, ops, converted_plugins};
    converted_plugins = c;
    pthread_mutex_unlock(&converted_lock);
    return ENGRAM_OK;
}

/* The ops `handle` exports under the newest transport ABI version's symbol
 * this library knows (<engram/plugin/plugin.h>): version 4's as they are,
 * version 3's or 2's converted (*converted then owns them, unless an
 * earlier load converted them already), else an error naming the symbols
 * it looked for. */
static engram_status_t plugin_ops(void *handle, const char *file, const engram_transport_ops_t **out,
                                  engram_transport_ops_t **converted)
{
    const engram_transport_ops_t *const *current = dlsym(handle, ENGRAM_TRANSPORT_PLUGIN_SYMBOL);
    if (current != NULL) {
        if (*current == NULL)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "plugin %s: %s points to no ops", file,
                                ENGRAM_TRANSPORT_PLUGIN_SYMBOL);
        *out = *current;
        return ENGRAM_OK;
    }
    static const struct {
        const char *symbol;
        uint32_t version;
    } older[] = {
        {ENGRAM_TRANSPORT_PLUGIN_SYMBOL_V3, ENGRAM_TRANSPORT_ABI_VERSION_V3},
        {ENGRAM_TRANSPORT_PLUGIN_SYMBOL_V2, ENGRAM_TRANSPORT_ABI_VERSION_V2},
    };
    for (size_t i = 0; i < sizeof(older) / sizeof(older[0]); i++) {
        const engram_transport_plugin_v3_t *record = dlsym(handle, older[i].symbol);
        if (record == NULL)
            continue;
        if ((*out = converted_find(handle)) != NULL)
            return ENGRAM_OK;
        engram_status_t st = engram_plugin_from_v3(record, older[i].version, file, converted);
        if (st != ENGRAM_OK)
            return st;
        ENGRAM_INFO("plugin %s is of transport ABI version %u (%s); converted to version %u", file,
                    older[i].version, older[i].symbol, ENGRAM_TRANSPORT_ABI_VERSION);
        *out = *converted;
        return ENGRAM_OK;
    }
    return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                        "plugin %s exports none of %s (transport ABI version %u), %s (version %u) and %s (version "
                        "%u), so it is not an engram transport this library can load",
                        file, ENGRAM_TRANSPORT_PLUGIN_SYMBOL, ENGRAM_TRANSPORT_ABI_VERSION,
                        ENGRAM_TRANSPORT_PLUGIN_SYMBOL_V3, ENGRAM_TRANSPORT_ABI_VERSION_V3,
                        ENGRAM_TRANSPORT_PLUGIN_SYMBOL_V2, ENGRAM_TRANSPORT_ABI_VERSION_V2);
}

/* Checks what `handle` exports; *out only when every check passes. */
static engram_status_t plugin_check(void *handle, const char *file, const char *name,
                                    const engram_transport_ops_t **out)
{
    const engram_transport_ops_t *ops = NULL;
    engram_transport_ops_t *converted = NULL;
    engram_status_t st = plugin_ops(handle, file, &ops, &converted);
    if (st == ENGRAM_OK && (ops->name == NULL || strcmp(ops->name, name) != 0))
        st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "plugin %s: ops->name is '%s', expected '%s' (from the file name)",
                          file, ops->name ? ops->name : "(null)", name);
    if (st == ENGRAM_OK)
        st = check_functions(ops, file);
    if (st == ENGRAM_OK) {
        char owner[PATH_MAX + 16];
        snprintf(owner, sizeof(owner), "plugin %s", file);
        engram_config_keyset_t keys = engram_transport_keys(ops);
        keys.owner = owner;
        st = engram_config_check_decls(&keys);
    }
    if (st == ENGRAM_OK && converted != NULL)
        st = converted_keep(handle, converted, file);
    if (st != ENGRAM_OK) {
        free(converted);
        return st;
    }
    *out = ops; /* a converted one is kept while the plugin is: for good */
    return ENGRAM_OK;
}

/* dlopen maps a shared object's loadable segments and zero-fills past
 * their file contents; a file shorter than its segments (truncated, or
 * still being copied) makes that fill fault with SIGBUS inside dlopen. So
 * an ELF64 object is checked to hold every PT_LOAD segment first; anything
 * that is not ELF64 is left to dlopen to refuse. */
static engram_status_t plugin_file_complete(const char *file)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ENGRAM_OK; /* dlopen reports why it cannot be opened */
    engram_status_t st = ENGRAM_OK;
    struct stat sb;
    Elf64_Ehdr eh;
    if (fstat(fd, &sb) != 0 || pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr))
        goto out;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) != (ssize_t)sizeof(ph))
            break; /* a short program header table: dlopen refuses it */
        if (ph.p_type == PT_LOAD &&
            (ph.p_offset > (uint64_t)sb.st_size || ph.p_filesz > (uint64_t)sb.st_size - ph.p_offset)) {
            st = ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                              "plugin %s is truncated: a loadable segment needs bytes up to %llu, the file has %lld",
                              file, (unsigned long long)(ph.p_offset + ph.p_filesz), (long long)sb.st_size);
            break;
        }
    }
out:
    close(fd);
    return st;
}

/* The file (shared library or program) holding this code. */
static bool self_object(char *buf, size_t len, bool *shared)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (dladdr1((void *)&engram_registry_module_dir, &info, (void **)&map, RTLD_DL_LINKMAP) == 0 || map == NULL)
        return false;
    /* The main program's link map has the empty name (dli_fname may then
     * be argv[0], relative to a working directory long gone). */
    *shared = map->l_name != NULL && map->l_name[0] != '\0';
    if (!*shared) {
        ssize_t n = readlink("/proc/self/exe", buf, len - 1);
        if (n <= 0)
            return false;
        buf[n] = '\0';
        return true;
    }
    return strlen(map->l_name) < len && realpath(map->l_name, buf) != NULL;
}

static char module_dir[PATH_MAX];

static void module_dir_init(void)
{
    char self[PATH_MAX];
    bool shared = false;
    if (!self_object(self, sizeof(self), &shared))
        return;
    char *slash = strrchr(self, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    int n = snprintf(module_dir, sizeof(module_dir), "%s/%s", self, shared ? "engram" : "../lib/engram");
    if (n < 0 || (size_t)n >= sizeof(module_dir))
        module_dir[0] = '\0';
}

const char *engram_registry_module_dir(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, module_dir_init);
    return module_dir;
}

/* dlopen's reason, with what to do when the plugin calls functions it
 * cannot find: the library's (a plugin of transport ABI version 2 is not
 * linked against libengram.so.0 and finds them only in the global scope,
 * which a libengram loaded RTLD_LOCAL is not in), or a dependency's (the
 * dynamic linker took another version of it: one loaded already under the
 * same soname, as a PyTorch process holds its own libnccl.so.2, or one
 * found first on the library path). */
static void describe_dlopen_failure(char *buf, size_t len, const char *file, const char *error)
{
    const char *hint = "";
    if (error != NULL && strstr(error, "undefined symbol: engram_") != NULL)
        hint = " (a plugin of transport ABI version 2 resolves the library's functions from the global scope, "
               "which this libengram is not in: rebuild it against <engram/plugin/plugin.h> and link it with "
               "-lengram)";
    else if (error != NULL && strstr(error, "undefined symbol: ") != NULL)
        hint = " (a library it needs is another version than it was built against: one this process already "
               "holds under its soname, as PyTorch holds its libnccl.so.2, or one first on the library path; "
               "LD_PRELOAD the right one)";
    /* dlerror names the file first: once is enough (engram_last_error has
     * ENGRAM_LAST_ERROR_BYTES) */
    size_t n = strlen(file);
    if (error != NULL && strncmp(error, file, n) == 0 && strncmp(error + n, ": ", 2) == 0)
        error += n + 2;
    snprintf(buf, len, "%s could not be loaded: %s%s", file, error ? error : "unknown error", hint);
}

/* A module whose libraries this host lacks is normal (auto passes over
 * it), so that one failure goes to `unloadable` instead of being logged as
 * an error; any other refusal is an error. */
static engram_status_t plugin_open(const char *file, const char *name, const engram_transport_ops_t **out,
                                   char *unloadable, size_t len)
{
    engram_status_t complete = plugin_file_complete(file);
    if (complete != ENGRAM_OK)
        return complete;
    void *handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        char why[PATH_MAX + 1024];
        describe_dlopen_failure(why, sizeof(why), file, dlerror());
        if (unloadable == NULL)
            return ENGRAM_ERROR(ENGRAM_ERR_IO, "plugin %s", why);
        snprintf(unloadable, len, "%s", why);
        ENGRAM_INFO("module %s", unloadable);
        return ENGRAM_ERR_IO;
    }
    engram_status_t st = plugin_check(handle, file, name, out);
    if (st != ENGRAM_OK)
        dlclose(handle); /* refused: none of its code or data was handed out */
    else
        ENGRAM_INFO("transport plugin '%s' loaded from %s", name, file);
    return st;
}

engram_status_t engram_registry_load_module(const char *name, const engram_transport_ops_t **out, char *why,
                                            size_t len)
{
    const char *modules = engram_registry_module_dir();
    char file[PATH_MAX];
    int n = snprintf(file, sizeof(file), "%s/libengram_transport_%s.so", modules, name);
    if (modules[0] == '\0' || n < 0 || (size_t)n >= sizeof(file)) {
        snprintf(why, len, "the module directory is unknown (dladdr found no file for libengram)");
        return ENGRAM_ERR_NOT_FOUND;
    }
    if (access(file, F_OK) != 0) {
        snprintf(why, len, "%s is not installed", file);
        return ENGRAM_ERR_NOT_FOUND;
    }
    why[0] = '\0';
    engram_status_t st = plugin_open(file, name, out, why, len);
    if (st != ENGRAM_OK && why[0] == '\0')
        snprintf(why, len, "%s", engram_last_error());
    return st;
}

engram_status_t engram_registry_load_plugin(const char *name, const char *plugin_path,
                                            const engram_transport_ops_t **out)
{
    if (name == NULL || plugin_path == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_registry_load_plugin: NULL argument");
    if (!name_is_valid(name))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                            "transport name '%s' is not a valid plugin name (1..64 of [A-Za-z0-9_-])", name);
    engram_status_t st = engram_config_check_paths("", "plugin_path", plugin_path);
    if (st != ENGRAM_OK)
        return st;
    const char *modules = engram_registry_module_dir();
    if (modules[0] != '\0') {
        char file[PATH_MAX];
        int n = snprintf(file, sizeof(file), "%s/libengram_transport_%s.so", modules, name);
        if (n >= 0 && (size_t)n < sizeof(file) && access(file, F_OK) == 0)
            return plugin_open(file, name, out, NULL, 0);
    }
    const char *rest = path_begin(plugin_path), *entry;
    size_t len;
    while (path_next(&rest, &entry, &len)) {
        char file[PATH_MAX];
        int n = snprintf(file, sizeof(file), "%.*s/libengram_transport_%s.so", (int)len, entry, name);
        if (n < 0 || (size_t)n >= sizeof(file))
            return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "plugin_path entry '%.*s' is too long", (int)len, entry);
        /* The first directory that has the file decides: a broken plugin is
         * an error, not a reason to try one further down the path. */
        if (access(file, F_OK) == 0)
            return plugin_open(file, name, out, NULL, 0);
    }
    if (plugin_path[0] == '\0')
        return ENGRAM_ERROR(ENGRAM_ERR_NOT_FOUND,
                            "no libengram_transport_%s.so in the module directory '%s', and plugin_path is "
                            "empty (set ENGRAM_PLUGIN_PATH)",
                            name, modules);
    return ENGRAM_ERROR(ENGRAM_ERR_NOT_FOUND,
                        "no libengram_transport_%s.so in the module directory '%s' or plugin_path directories %s",
                        name, modules, plugin_path);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(a, b);
}

int engram_registry_plugin_names(const char *plugin_path, const engram_builtin_table_t *builtins,
                                 engram_plugin_name_t **out)
{
    static const char prefix[] = "libengram_transport_", suffix[] = ".so";
    *out = NULL;
    if (plugin_path == NULL || engram_config_check_paths("", "plugin_path", plugin_path) != ENGRAM_OK)
        return 0;
    engram_plugin_name_t *names = NULL;
    size_t n = 0, cap = 0;
    const char *rest = path_begin(plugin_path), *entry;
    size_t len;
    while (path_next(&rest, &entry, &len)) {
        char dir[PATH_MAX];
        if (len >= sizeof(dir))
            continue;
        memcpy(dir, entry, len);
        dir[len] = '\0';
        DIR *d = opendir(dir);
        if (d == NULL)
            continue;
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            size_t l = strlen(e->d_name);
            if (l <= sizeof(prefix) - 1 + sizeof(suffix) - 1 || strncmp(e->d_name, prefix, sizeof(prefix) - 1) != 0 ||
                strcmp(e->d_name + l - (sizeof(suffix) - 1), suffix) != 0)
                continue;
            size_t name_len = l - (sizeof(prefix) - 1) - (sizeof(suffix) - 1);
            if (name_len > ENGRAM_PLUGIN_NAME_MAX)
                continue;
            if (n == cap) {
                size_t grown = cap ? 2 * cap : 16;
                engram_plugin_name_t *more = realloc(names, grown * sizeof(*names));
                if (more == NULL) {
                    closedir(d);
                    free(names);
                    ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "plugin_path: out of memory listing plugins");
                    return -1;
                }
                names = more;
                cap = grown;
            }
            memcpy(names[n], e->d_name + sizeof(prefix) - 1, name_len);
            names[n][name_len] = '\0';
            if (name_is_valid(names[n]) && engram_registry_builtin_find(builtins, names[n]) == NULL)
                n++;
        }
        closedir(d);
    }
    if (n == 0) {
        free(names);
        return 0;
    }
    /* Sorted, each name once: the first directory that holds a name is the
     * one that loads it, so a repeat further down the path is no plugin. */
    qsort(names, n, sizeof(names[0]), compare_names);
    size_t kept = 1;
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i], names[kept - 1]) != 0)
            memmove(names[kept++], names[i], sizeof(names[0]));
    *out = names;
    return (int)kept;
}
