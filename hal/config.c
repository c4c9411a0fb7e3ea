/* Configuration: every behaviour below is driven by the X-macro table in
 * config_keys.h, so adding a key there is the whole job of adding a key.
 *
 * File syntax (ENGRAM_CONFIG_FILE): one `key = value` per line; blank lines
 * and lines whose first non-blank character is `#` are skipped. The value is
 * everything after `=` with surrounding blanks trimmed (no inline comments:
 * a value such as a path must be taken verbatim). */
#include "hal/config_keys.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hal/log.h"

extern char **environ;

/* ENGRAM_* variables read elsewhere (log.c, this file) that are not keys. */
static const char *const non_key_vars[] = {"ENGRAM_LOG_LEVEL", "ENGRAM_CONFIG_FILE"};

typedef enum key_type { KEY_INT, KEY_ENUM, KEY_STRING } key_type_t;

typedef struct key_desc {
    engram_config_key_info_t info;
    key_type_t type;
    size_t offset; /* of the typed field in struct engram_config */
    size_t size;   /* of that field */
} key_desc_t;

#define KEY_DESC(name, type, def, accepted, help)                                                   \
    {{#name, #type, def, accepted, help}, KEY_##type, offsetof(struct engram_config, name),          \
     sizeof(((struct engram_config *)0)->name)},

static const key_desc_t keys[ENGRAM_CONFIG_NUM_KEYS] = {ENGRAM_CONFIG_KEYS(KEY_DESC)};

static const char *const source_names[] = {"default", "file", "env", "api"};

/* Longest variable/key name we compare against; longer ones cannot match. */
enum { NAME_MAX_LEN = 64 };

const engram_config_key_info_t *engram_config_key(int i)
{
    if (i < 0 || i >= ENGRAM_CONFIG_NUM_KEYS)
        return NULL;
    return &keys[i].info;
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
        if (strlen(keys[i].info.name) == len && strncmp(keys[i].info.name, name, len) == 0)
            return i;
    return -1;
}

/* "transport, mode, ..." for error messages, built at compile time. */
#define KEY_NAME(name, type, def, accepted, help) ", " #name
static const char key_names[] = ENGRAM_CONFIG_KEYS(KEY_NAME);
#define KEY_LIST (key_names + 2)

/* Strict decimal: optional '-', digits only, no blanks, no overflow. */
static bool parse_decimal(const char *s, const char *end, int64_t *out)
{
    const char *p = s;
    if (p < end && *p == '-')
        p++;
    if (p == end)
        return false;
    for (const char *d = p; d < end; d++)
        if (!isdigit((unsigned char)*d))
            return false;
    char tmp[32];
    if ((size_t)(end - s) >= sizeof(tmp))
        return false;
    memcpy(tmp, s, (size_t)(end - s));
    tmp[end - s] = '\0';
    errno = 0;
    long long v = strtoll(tmp, NULL, 10);
    if (errno == ERANGE)
        return false;
    *out = (int64_t)v;
    return true;
}

/* "auto|min..max": the key also takes "auto" (ENGRAM_CONFIG_INT_AUTO). */
static const char int_auto_prefix[] = "auto|";

static bool int_takes_auto(const key_desc_t *k)
{
    return strncmp(k->info.accepted, int_auto_prefix, strlen(int_auto_prefix)) == 0;
}

static engram_status_t parse_int(const key_desc_t *k, const char *value, const char *where, int64_t *out)
{
    const char *acc = k->info.accepted;
    if (int_takes_auto(k)) {
        if (strcmp(value, "auto") == 0) {
            *out = ENGRAM_CONFIG_INT_AUTO;
            return ENGRAM_OK;
        }
        acc += strlen(int_auto_prefix);
    }
    const char *dots = strstr(acc, "..");
    int64_t lo, hi, v;
    if (dots == NULL || !parse_decimal(acc, dots, &lo) || !parse_decimal(dots + 2, dots + strlen(dots), &hi))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: table range '%s' is not min..max", k->info.name, acc);
    if (lo <= ENGRAM_CONFIG_INT_AUTO && int_takes_auto(k))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: table range '%s' takes auto's value %d", k->info.name, acc,
                            ENGRAM_CONFIG_INT_AUTO);
    if (!parse_decimal(value, value + strlen(value), &v))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s%s: '%s' is not a decimal integer in %s", where, k->info.name,
                            value, k->info.accepted);
    if (v < lo || v > hi)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s%s: '%s' is out of range %s", where, k->info.name, value,
                            k->info.accepted);
    *out = v;
    return ENGRAM_OK;
}

static engram_status_t parse_enum(const key_desc_t *k, const char *value, const char *where, int *out)
{
    size_t vlen = strlen(value);
    int index = 0;
    for (const char *p = k->info.accepted;; index++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == vlen && strncmp(p, value, len) == 0) {
            *out = index;
            return ENGRAM_OK;
        }
        if (bar == NULL)
            break;
        p = bar + 1;
    }
    return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s%s: '%s' is not one of %s", where, k->info.name, value,
                        k->info.accepted);
}

/* Parse `value` for key i and store it with its source; nothing is stored on
 * failure. `where` prefixes the error ("file:line: ", "ENGRAM_X: ", ""). */
static engram_status_t config_apply(engram_config_t *cfg, int i, const char *value, engram_config_source_t src,
                                    const char *where)
{
    const key_desc_t *k = &keys[i];
    char *field = (char *)cfg + k->offset;
    engram_status_t st = ENGRAM_OK;
    switch (k->type) {
    case KEY_INT: {
        int64_t v = 0;
        st = parse_int(k, value, where, &v);
        if (st == ENGRAM_OK)
            memcpy(field, &v, sizeof(v));
        break;
    }
    case KEY_ENUM: {
        int v = 0;
        st = parse_enum(k, value, where, &v);
        if (st == ENGRAM_OK)
            memcpy(field, &v, sizeof(v));
        break;
    }
    case KEY_STRING: {
        size_t len = strlen(value);
        if (len >= k->size)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s%s: value of %zu characters is longer than the %zu allowed",
                                where, k->info.name, len, k->size - 1);
        memcpy(field, value, len + 1);
        break;
    }
    }
    if (st == ENGRAM_OK)
        cfg->source[i] = src;
    return st;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        end--;
    *end = '\0';
    return s;
}

static engram_status_t config_apply_line(engram_config_t *cfg, const char *path, int lineno, char *line)
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
    int i = key_find(key, strlen(key));
    if (i < 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%sunknown key '%s'; keys are: %s", where, key, KEY_LIST);
    return config_apply(cfg, i, value, ENGRAM_CONFIG_SRC_FILE, where);
}

static engram_status_t config_read_stream(engram_config_t *cfg, FILE *f, const char *path)
{
    engram_status_t st = ENGRAM_OK;
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0;
    while (st == ENGRAM_OK && getline(&line, &cap, f) >= 0)
        st = config_apply_line(cfg, path, ++lineno, line);
    if (st == ENGRAM_OK && ferror(f))
        st = ENGRAM_ERROR(ENGRAM_ERR_IO, "%s: read failed after line %d", path, lineno);
    free(line);
    return st;
}

static engram_status_t config_read_file(engram_config_t *cfg, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "ENGRAM_CONFIG_FILE=%s cannot be read: %s", path, strerror(errno));
    engram_status_t st = config_read_stream(cfg, f, path);
    fclose(f);
    return st;
}

engram_status_t engram_config_read_text(engram_config_t *cfg, const char *name, const char *text, size_t len)
{
    if (cfg == NULL || name == NULL || (text == NULL && len > 0))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_config_read_text: NULL argument");
    if (len == 0)
        return ENGRAM_OK; /* an empty file sets nothing */
    FILE *f = fmemopen((void *)text, len, "r");
    if (f == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "engram_config_read_text: fmemopen failed: %s", strerror(errno));
    engram_status_t st = config_read_stream(cfg, f, name);
    fclose(f);
    return st;
}

/* ENGRAM_FLUSH_DEPTH -> the index of flush_depth, or -1. */
static int key_for_var(const char *var, size_t len)
{
    const size_t prefix = strlen("ENGRAM_");
    char lower[NAME_MAX_LEN];
    if (len - prefix >= sizeof(lower))
        return -1;
    for (size_t j = prefix; j < len; j++) {
        /* Only the upper-cased spelling is the key's variable. */
        if (islower((unsigned char)var[j]))
            return -1;
        lower[j - prefix] = (char)tolower((unsigned char)var[j]);
    }
    return key_find(lower, len - prefix);
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
        if (is_non_key_var(entry, len))
            continue;
        int i = key_for_var(entry, len);
        if (i < 0)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "unknown configuration variable %.*s; keys are: %s", (int)len,
                                entry, KEY_LIST);
        char where[NAME_MAX_LEN + 8];
        snprintf(where, sizeof(where), "%.*s: ", (int)len, entry);
        engram_status_t st = config_apply(cfg, i, eq ? eq + 1 : "", ENGRAM_CONFIG_SRC_ENV, where);
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
        st = config_apply(cfg, i, keys[i].info.def, ENGRAM_CONFIG_SRC_DEFAULT, "default of ");
    const char *file = getenv("ENGRAM_CONFIG_FILE");
    if (st == ENGRAM_OK && file != NULL && *file != '\0')
        st = config_read_file(cfg, file);
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

static int key_lookup(const engram_config_t *cfg, const char *key, const char *fn)
{
    if (cfg == NULL || key == NULL) {
        ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: NULL %s", fn, cfg == NULL ? "config" : "key");
        return -1;
    }
    int i = key_find(key, strlen(key));
    if (i < 0)
        ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: unknown key '%s'; keys are: %s", fn, key, KEY_LIST);
    return i;
}

engram_status_t engram_config_set(engram_config_t *cfg, const char *key, const char *value)
{
    int i = key_lookup(cfg, key, "engram_config_set");
    if (i < 0)
        return ENGRAM_ERR_INVALID;
    if (value == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_config_set: NULL value for %s", key);
    return config_apply(cfg, i, value, ENGRAM_CONFIG_SRC_API, "");
}

/* The enum name at `index` in "a|b|c". */
static void enum_name(const char *accepted, int index, char *buf, size_t len)
{
    const char *p = accepted;
    for (int n = 0; n < index && p != NULL; n++) {
        p = strchr(p, '|');
        if (p != NULL)
            p++;
    }
    if (p == NULL) {
        snprintf(buf, len, "#%d", index);
        return;
    }
    const char *bar = strchr(p, '|');
    snprintf(buf, len, "%.*s", (int)(bar ? (size_t)(bar - p) : strlen(p)), p);
}

/* Returns the length the full text needs, as snprintf does. */
static int format_value(const engram_config_t *cfg, int i, char *buf, size_t len)
{
    const key_desc_t *k = &keys[i];
    const char *field = (const char *)cfg + k->offset;
    switch (k->type) {
    case KEY_INT: {
        int64_t v;
        memcpy(&v, field, sizeof(v));
        if (v == ENGRAM_CONFIG_INT_AUTO && int_takes_auto(k))
            return snprintf(buf, len, "auto");
        return snprintf(buf, len, "%" PRId64, v);
    }
    case KEY_ENUM: {
        int v;
        memcpy(&v, field, sizeof(v));
        char name[NAME_MAX_LEN];
        enum_name(k->info.accepted, v, name, sizeof(name));
        return snprintf(buf, len, "%s", name);
    }
    case KEY_STRING:
        return snprintf(buf, len, "%s", field);
    }
    return snprintf(buf, len, "?");
}

engram_status_t engram_config_get(const engram_config_t *cfg, const char *key, char *buf, size_t len)
{
    int i = key_lookup(cfg, key, "engram_config_get");
    if (i < 0)
        return ENGRAM_ERR_INVALID;
    if (buf == NULL || len == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_config_get: no buffer for %s", key);
    int need = format_value(cfg, i, buf, len);
    if (need < 0 || (size_t)need >= len)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "engram_config_get: %s needs %d bytes, buffer has %zu", key,
                            need + 1, len);
    return ENGRAM_OK;
}

engram_status_t engram_config_source(const engram_config_t *cfg, const char *key, engram_config_source_t *src)
{
    int i = key_lookup(cfg, key, "engram_config_source");
    if (i < 0)
        return ENGRAM_ERR_INVALID;
    if (src == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_config_source: NULL out for %s", key);
    *src = cfg->source[i];
    return ENGRAM_OK;
}

void engram_config_print(const engram_config_t *cfg, FILE *out)
{
    if (cfg == NULL || out == NULL)
        return;
    for (int i = 0; i < ENGRAM_CONFIG_NUM_KEYS; i++) {
        char value[256]; /* longer than any INT, ENUM name or STRING field */
        format_value(cfg, i, value, sizeof(value));
        fprintf(out, "%-12s = %-12s [%s] accepted: %s; %s\n", keys[i].info.name,
                value[0] ? value : "\"\"", engram_config_source_str(cfg->source[i]), keys[i].info.accepted,
                keys[i].info.help);
    }
}
