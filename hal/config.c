/* Configuration: the core keys are driven by the X-macro table in
 * config_keys.h, so adding a core key there is the whole job of adding one.
 * A key that is not a core key belongs to some transport (it declares it,
 * config_view.c): its value is kept as text with where it was set, and
 * checked once the transports are known (engram_config_check_keys, called
 * when a context selects its transport and by engram_info).
 *
 * File syntax (ENGRAM_CONFIG_FILE): one `key = value` per line; blank lines
 * and lines whose first non-blank character is `#` are skipped, and so is a
 * UTF-8 byte order mark opening the file. The value is everything after `=`
 * (no inline comments: a value such as a path must be taken verbatim). A
 * key may be set once per file.
 *
 * Blanks around a value are not part of it, whatever the source (file,
 * environment, engram_config_set; ENGRAM_LOG_LEVEL too): hal/blanks.h. */
#include "hal/config_keys.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hal/blanks.h"
#include "hal/log.h"

extern char **environ;

/* ENGRAM_* variables read elsewhere (log.c, this file) that are not keys. */
static const char *const non_key_vars[] = {"ENGRAM_LOG_LEVEL", "ENGRAM_CONFIG_FILE"};

typedef struct key_desc {
    engram_config_key_decl_t decl;
    size_t offset; /* of the typed field in struct engram_config */
} key_desc_t;

#define KEY_DESC(name, type, def, accepted, help)                                                   \
    {{#name, ENGRAM_CONFIG_##type, def, accepted, help}, offsetof(struct engram_config, name)},

static const key_desc_t keys[ENGRAM_CONFIG_NUM_KEYS] = {ENGRAM_CONFIG_KEYS(KEY_DESC)};

static const char *const source_names[] = {"default", "file", "env", "api"};

const engram_config_key_decl_t *engram_config_key(int i)
{
    if (i < 0 || i >= ENGRAM_CONFIG_NUM_KEYS)
        return NULL;
    return &keys[i].decl;
}

int64_t engram_config_core_int(const engram_config_t *cfg, int i)
{
    const char *field = (const char *)cfg + keys[i].offset;
    if (keys[i].decl.type == ENGRAM_CONFIG_ENUM) {
        int v;
        memcpy(&v, field, sizeof(v));
        return v;
    }
    int64_t v;
    memcpy(&v, field, sizeof(v));
    return v;
}

const char *engram_config_core_string(const engram_config_t *cfg, int i)
{
    return (const char *)cfg + keys[i].offset;
}

const char *engram_config_source_str(engram_config_source_t src)
{
    if ((int)src < 0 || (size_t)src >= sizeof(source_names) / sizeof(source_names[0]))
        return "unknown";
    return source_names[src];
}

static int key_find(const char *name, size_t len)
{
    for (int i = 0; i < ENGRAM_CONFIG_NUM_KEYS; i++)
        if (strlen(keys[i].decl.name) == len && strncmp(keys[i].decl.name, name, len) == 0)
            return i;
    return -1;
}

static int extra_find(const engram_config_t *cfg, const char *name)
{
    for (int i = 0; i < cfg->num_extra; i++)
        if (strcmp(cfg->extra[i].name, name) == 0)
            return i;
    return -1;
}

/* A key name a transport may declare: 1..ENGRAM_CONFIG_NAME_MAX of [a-z0-9_]. */
static bool name_is_valid(const char *name, size_t len)
{
    if (len == 0 || len > ENGRAM_CONFIG_NAME_MAX)
        return false;
    for (size_t j = 0; j < len; j++)
        if (!((name[j] >= 'a' && name[j] <= 'z') || (name[j] >= '0' && name[j] <= '9') || name[j] == '_'))
            return false;
    return true;
}

/* "transport, mode, ..." for error messages, built at compile time. */
#define KEY_NAME(name, type, def, accepted, help) ", " #name
static const char key_names[] = ENGRAM_CONFIG_KEYS(KEY_NAME);
#define KEY_LIST (key_names + 2)

/* `value` without the blanks around it (hal/blanks.h: the rule of every
 * source), in *out (malloc'd). */
static engram_status_t unblanked(const char *value, const char *where, char **out)
{
    size_t len;
    const char *v = engram_unblank(value, &len);
    *out = strndup(v, len);
    return *out != NULL ? ENGRAM_OK
                        : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "%sno memory for a value of %zu bytes", where, len);
}

/* Parse `value` for core key i and store it with its source; nothing is
 * stored on failure. */
static engram_status_t config_apply(engram_config_t *cfg, int i, const char *raw, engram_config_source_t src,
                                    const char *where)
{
    const key_desc_t *k = &keys[i];
    char *field = (char *)cfg + k->offset;
    int64_t num = 0;
    char *value;
    engram_status_t st = unblanked(raw, where, &value);
    if (st == ENGRAM_OK)
        st = engram_config_parse_value(&k->decl, value, where, &num);
    if (st != ENGRAM_OK) {
        free(value);
        return st;
    }
    if (k->decl.type == ENGRAM_CONFIG_INT) {
        memcpy(field, &num, sizeof(num));
    } else if (k->decl.type == ENGRAM_CONFIG_ENUM) {
        int v = (int)num;
        memcpy(field, &v, sizeof(v));
    } else {
        memcpy(field, value, strlen(value) + 1); /* length checked by the parse */
    }
    free(value);
    cfg->source[i] = src;
    return ENGRAM_OK;
}

engram_status_t engram_config_set_extra(engram_config_t *cfg, const char *name, const char *raw,
                                        engram_config_source_t src, const char *where)
{
    if (!name_is_valid(name, strlen(name)))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                            "%s: unknown key '%s' (not a core key, and no transport key is named so: 1..%d of "
                            "[a-z0-9_]); core keys are: %s",
                            where, name, ENGRAM_CONFIG_NAME_MAX, KEY_LIST);
    size_t len;
    const char *value = engram_unblank(raw, &len);
    if (len >= sizeof(cfg->extra[0].value))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: %s: value of %zu characters is longer than the %zu allowed",
                            where, name, len, sizeof(cfg->extra[0].value) - 1);
    int i = extra_find(cfg, name);
    if (i < 0) {
        if (cfg->num_extra == ENGRAM_CONFIG_EXTRA_MAX)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: %s: more than %d transport keys set", where, name,
                                ENGRAM_CONFIG_EXTRA_MAX);
        i = cfg->num_extra++;
        snprintf(cfg->extra[i].name, sizeof(cfg->extra[i].name), "%s", name);
    }
    memcpy(cfg->extra[i].value, value, len);
    cfg->extra[i].value[len] = '\0';
    snprintf(cfg->extra[i].where, sizeof(cfg->extra[i].where), "%s", where);
    cfg->extra[i].source = src;
    return ENGRAM_OK;
}

static char *trim(char *s)
{
    size_t len;
    char *t = (char *)engram_unblank(s, &len);
    t[len] = '\0';
    return t;
}

/* A UTF-8 byte order mark (U+FEFF): what some editors write first. */
static const char utf8_bom[] = "\xEF\xBB\xBF";

/* The keys a file set so far, with their lines: a key set twice is refused
 * naming both (the later one would silently win). */
typedef struct file_keys {
    int count;
    struct {
        char name[ENGRAM_CONFIG_NAME_MAX + 1];
        int line;
    } seen[ENGRAM_CONFIG_NUM_KEYS + ENGRAM_CONFIG_EXTRA_MAX];
} file_keys_t;

/* Records `key` of line `lineno`; an error when an earlier line set it. */
static engram_status_t file_key_once(file_keys_t *fk, const char *path, int lineno, const char *key)
{
    size_t len = strlen(key);
    if (len > ENGRAM_CONFIG_NAME_MAX)
        return ENGRAM_OK; /* no key is named so: refused by its parse */
    for (int j = 0; j < fk->count; j++)
        if (strcmp(fk->seen[j].name, key) == 0)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s:%d: key '%s' is set twice, on lines %d and %d; set it once",
                                path, lineno, key, fk->seen[j].line, lineno);
    if (fk->count < (int)(sizeof(fk->seen) / sizeof(fk->seen[0]))) {
        memcpy(fk->seen[fk->count].name, key, len + 1);
        fk->seen[fk->count++].line = lineno;
    }
    return ENGRAM_OK;
}

static engram_status_t config_apply_line(engram_config_t *cfg, const char *path, int lineno, char *line,
                                         file_keys_t *fk)
{
    char where[PATH_MAX + 16];
    snprintf(where, sizeof(where), "%s:%d: ", path, lineno);
    char *text = trim(line);
    if (*text == '\0' || *text == '#')
        return ENGRAM_OK;
    char *eq = strchr(text, '=');
    if (eq == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%sexpected 'key = value', got '%s'", where, text);
    *eq = '\0';
    char *key = trim(text);
    char *value = trim(eq + 1);
    if (strncmp(key, utf8_bom, strlen(utf8_bom)) == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%sa UTF-8 byte order mark (U+FEFF) stands before key '%s'; only a "
                            "file's first bytes may be one", where, key + strlen(utf8_bom));
    engram_status_t st = file_key_once(fk, path, lineno, key);
    if (st != ENGRAM_OK)
        return st;
    int i = key_find(key, strlen(key));
    if (i >= 0)
        return config_apply(cfg, i, value, ENGRAM_CONFIG_SRC_FILE, where);
    snprintf(where, sizeof(where), "%s:%d", path, lineno);
    return engram_config_set_extra(cfg, key, value, ENGRAM_CONFIG_SRC_FILE, where);
}

engram_status_t engram_config_read_text(engram_config_t *cfg, const char *name, const char *text, size_t len)
{
    if (cfg == NULL || name == NULL || (text == NULL && len > 0))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_config_read_text: NULL argument");
    engram_status_t st = ENGRAM_OK;
    file_keys_t *fk = calloc(1, sizeof(*fk));
    if (fk == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "%s: no memory to read it", name);
    int lineno = 0;
    size_t at = 0;
    /* A byte order mark says the text is UTF-8, which it is anyway. */
    if (len >= strlen(utf8_bom) && memcmp(text, utf8_bom, strlen(utf8_bom)) == 0)
        at = strlen(utf8_bom);
    while (st == ENGRAM_OK && at < len) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t line_len = nl ? (size_t)(nl - (text + at)) : len - at;
        lineno++;
        /* A NUL would silently cut the line short where C strings end. */
        if (memchr(text + at, '\0', line_len) != NULL) {
            st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s:%d: line contains a NUL byte (not a text file?)", name,
                              lineno);
            break;
        }
        char *line = malloc(line_len + 1);
        if (line == NULL) {
            st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "%s:%d: no memory for a line of %zu bytes", name, lineno, line_len);
            break;
        }
        memcpy(line, text + at, line_len);
        line[line_len] = '\0';
        st = config_apply_line(cfg, name, lineno, line, fk);
        free(line);
        at += line_len + (nl != NULL);
    }
    free(fk);
    return st;
}

/* ENGRAM_FLUSH_DEPTH -> "flush_depth" in lower (NUL-terminated); false when
 * the name has lower-case letters (only the upper-cased spelling is a key's
 * variable) or is longer than any key. */
static bool key_for_var(const char *var, size_t len, char *lower, size_t cap)
{
    const size_t prefix = strlen("ENGRAM_");
    if (len - prefix >= cap)
        return false;
    for (size_t j = prefix; j < len; j++) {
        if (islower((unsigned char)var[j]))
            return false;
        lower[j - prefix] = (char)tolower((unsigned char)var[j]);
    }
    lower[len - prefix] = '\0';
    return true;
}

static bool is_non_key_var(const char *var, size_t len)
{
    for (size_t j = 0; j < sizeof(non_key_vars) / sizeof(non_key_vars[0]); j++)
        if (strlen(non_key_vars[j]) == len && strncmp(non_key_vars[j], var, len) == 0)
            return true;
    return false;
}

static engram_status_t config_read_env(engram_config_t *cfg)
{
    for (char **e = environ; *e != NULL; e++) {
        const char *entry = *e;
        if (strncmp(entry, "ENGRAM_", strlen("ENGRAM_")) != 0)
            continue;
        const char *eq = strchr(entry, '=');
        size_t len = eq ? (size_t)(eq - entry) : strlen(entry);
        /* not a key, but a value all the same: refused here like a key's */
        engram_log_level_t level;
        if (strncmp(entry, "ENGRAM_LOG_LEVEL=", strlen("ENGRAM_LOG_LEVEL=")) == 0 &&
            !engram_log_level_parse(eq + 1, &level))
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ENGRAM_LOG_LEVEL: '%s' is not one of " ENGRAM_LOG_LEVEL_NAMES,
                                eq + 1);
        if (is_non_key_var(entry, len))
            continue;
        char lower[ENGRAM_CONFIG_NAME_MAX + 2];
        if (!key_for_var(entry, len, lower, sizeof(lower)))
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                                "unknown configuration variable %.*s (a key's variable is ENGRAM_ and the key "
                                "upper-cased); core keys are: %s",
                                (int)len, entry, KEY_LIST);
        char where[ENGRAM_CONFIG_NAME_MAX + 16];
        snprintf(where, sizeof(where), "%.*s", (int)len, entry);
        const char *value = eq ? eq + 1 : "";
        int i = key_find(lower, strlen(lower));
        engram_status_t st;
        if (i >= 0) {
            strcat(where, ": ");
            st = config_apply(cfg, i, value, ENGRAM_CONFIG_SRC_ENV, where);
        } else {
            st = engram_config_set_extra(cfg, lower, value, ENGRAM_CONFIG_SRC_ENV, where);
        }
        if (st != ENGRAM_OK)
            return st;
    }
    return ENGRAM_OK;
}

engram_status_t engram_config_create(engram_config_t **out)
{
    if (out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_config_create: out is NULL");
    engram_config_t *cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "engram_config_create: out of memory");
    engram_status_t st = ENGRAM_OK;
    for (int i = 0; i < ENGRAM_CONFIG_NUM_KEYS && st == ENGRAM_OK; i++)
        st = config_apply(cfg, i, keys[i].decl.def, ENGRAM_CONFIG_SRC_DEFAULT, "default of ");
    const char *file = getenv("ENGRAM_CONFIG_FILE");
    if (st == ENGRAM_OK && file != NULL && *file != '\0')
        st = engram_config_read_file(cfg, file);
    if (st == ENGRAM_OK)
        st = config_read_env(cfg);
    if (st != ENGRAM_OK) {
        free(cfg);
        return st;
    }
    *out = cfg;
    return ENGRAM_OK;
}

void engram_config_destroy(engram_config_t *cfg)
{
    free(cfg);
}

static engram_status_t args_check(const engram_config_t *cfg, const char *key, const char *fn)
{
    if (cfg == NULL || key == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: NULL %s", fn, cfg == NULL ? "config" : "key");
    return ENGRAM_OK;
}

/* The extra holding `key`, or an error saying it is neither core nor set. */
static const engram_config_extra_t *extra_lookup(const engram_config_t *cfg, const char *key, const char *fn)
{
    int e = extra_find(cfg, key);
    if (e >= 0)
        return &cfg->extra[e];
    ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                 "%s: unknown key '%s': not a core key (%s) and not set; a transport's keys and defaults are "
                 "listed by engram_info",
                 fn, key, KEY_LIST);
    return NULL;
}

/* A key to read: *i >= 0 for a core key, else *x, the extra set under it;
 * an error (naming `fn`) when it is neither. */
static engram_status_t key_lookup(const engram_config_t *cfg, const char *key, const char *fn, int *i,
                                  const engram_config_extra_t **x)
{
    engram_status_t st = args_check(cfg, key, fn);
    if (st != ENGRAM_OK)
        return st;
    *i = key_find(key, strlen(key));
    *x = *i < 0 ? extra_lookup(cfg, key, fn) : NULL;
    return *i < 0 && *x == NULL ? ENGRAM_ERR_INVALID : ENGRAM_OK;
}

engram_status_t engram_config_set(engram_config_t *cfg, const char *key, const char *value)
{
    engram_status_t st = args_check(cfg, key, "engram_config_set");
    if (st != ENGRAM_OK)
        return st;
    if (value == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_config_set: NULL value for %s", key);
    int i = key_find(key, strlen(key));
    if (i >= 0)
        return config_apply(cfg, i, value, ENGRAM_CONFIG_SRC_API, "");
    return engram_config_set_extra(cfg, key, value, ENGRAM_CONFIG_SRC_API, "engram_config_set");
}

/* Returns the length the full text needs, as snprintf does. */
static int format_value(const engram_config_t *cfg, int i, char *buf, size_t len)
{
    const key_desc_t *k = &keys[i];
    const char *field = (const char *)cfg + k->offset;
    switch (k->decl.type) {
    case ENGRAM_CONFIG_INT: {
        int64_t v;
        memcpy(&v, field, sizeof(v));
        if (v == ENGRAM_CONFIG_INT_AUTO && engram_config_int_takes_auto(&k->decl))
            return snprintf(buf, len, "auto");
        return snprintf(buf, len, "%" PRId64, v);
    }
    case ENGRAM_CONFIG_ENUM: {
        int v;
        memcpy(&v, field, sizeof(v));
        char name[64];
        engram_config_enum_name(k->decl.accepted, v, name, sizeof(name));
        return snprintf(buf, len, "%s", name);
    }
    case ENGRAM_CONFIG_STRING:
    case ENGRAM_CONFIG_PATHS:
        return snprintf(buf, len, "%s", field);
    }
    return snprintf(buf, len, "?");
}

engram_status_t engram_config_get(const engram_config_t *cfg, const char *key, char *buf, size_t len)
{
    int i;
    const engram_config_extra_t *x;
    engram_status_t st = key_lookup(cfg, key, "engram_config_get", &i, &x);
    if (st != ENGRAM_OK)
        return st;
    if (buf == NULL || len == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_config_get: no buffer for %s", key);
    int need = i >= 0 ? format_value(cfg, i, buf, len) : snprintf(buf, len, "%s", x->value);
    if (need < 0 || (size_t)need >= len)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "engram_config_get: %s needs %d bytes, buffer has %zu", key,
                            need + 1, len);
    return ENGRAM_OK;
}

engram_status_t engram_config_source(const engram_config_t *cfg, const char *key, engram_config_source_t *src)
{
    int i;
    const engram_config_extra_t *x;
    engram_status_t st = key_lookup(cfg, key, "engram_config_source", &i, &x);
    if (st != ENGRAM_OK)
        return st;
    if (src == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_config_source: NULL out for %s", key);
    *src = i >= 0 ? cfg->source[i] : x->source;
    return ENGRAM_OK;
}

void engram_config_print(const engram_config_t *cfg, FILE *out)
{
    if (cfg == NULL || out == NULL)
        return;
    for (int i = 0; i < ENGRAM_CONFIG_NUM_KEYS; i++) {
        char value[256]; /* longer than any INT, ENUM name or STRING field */
        format_value(cfg, i, value, sizeof(value));
        fprintf(out, "%-12s = %-12s [%s] accepted: %s; %s\n", keys[i].decl.name, value[0] ? value : "\"\"",
                engram_config_source_str(cfg->source[i]), keys[i].decl.accepted, keys[i].decl.help);
    }
}
