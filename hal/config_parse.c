/* Typed values: the parsing every key shares, core or a transport's, so a
 * value means the same wherever it was set and whoever declared the key. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hal/config_keys.h"
#include "hal/log.h"

const char *engram_config_type_str(engram_config_type_t type)
{
    switch (type) {
    case ENGRAM_CONFIG_INT:
        return "INT";
    case ENGRAM_CONFIG_ENUM:
        return "ENUM";
    case ENGRAM_CONFIG_STRING:
        return "STRING";
    case ENGRAM_CONFIG_PATHS:
        return "PATHS";
    }
    return "unknown";
}

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

bool engram_config_int_takes_auto(const engram_config_key_decl_t *k)
{
    return k->accepted != NULL && strncmp(k->accepted, int_auto_prefix, strlen(int_auto_prefix)) == 0;
}

engram_status_t engram_config_parse_int(const engram_config_key_decl_t *k, const char *value, const char *where,
                                        int64_t *out)
{
    const char *acc = k->accepted != NULL ? k->accepted : "";
    const bool takes_auto = engram_config_int_takes_auto(k);
    if (takes_auto) {
        if (strcmp(value, "auto") == 0) {
            *out = ENGRAM_CONFIG_INT_AUTO;
            return ENGRAM_OK;
        }
        acc += strlen(int_auto_prefix);
    }
    const char *dots = strstr(acc, "..");
    int64_t lo, hi, v;
    if (dots == NULL || !parse_decimal(acc, dots, &lo) || !parse_decimal(dots + 2, dots + strlen(dots), &hi))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: table range '%s' is not min..max", k->name, acc);
    if (takes_auto && lo <= ENGRAM_CONFIG_INT_AUTO)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: table range '%s' takes auto's value %d", k->name, acc,
                            ENGRAM_CONFIG_INT_AUTO);
    if (!parse_decimal(value, value + strlen(value), &v))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s%s: '%s' is not a decimal integer in %s", where, k->name, value,
                            k->accepted);
    if (v < lo || v > hi)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s%s: '%s' is out of range %s", where, k->name, value,
                            k->accepted);
    *out = v;
    return ENGRAM_OK;
}

engram_status_t engram_config_parse_enum(const engram_config_key_decl_t *k, const char *value, const char *where,
                                         int *out)
{
    size_t vlen = strlen(value);
    int index = 0;
    const char *acc = k->accepted != NULL ? k->accepted : "";
    for (const char *p = acc;; index++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == vlen && len > 0 && strncmp(p, value, len) == 0) {
            *out = index;
            return ENGRAM_OK;
        }
        if (bar == NULL)
            break;
        p = bar + 1;
    }
    return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s%s: '%s' is not one of %s", where, k->name, value, acc);
}

engram_status_t engram_config_check_paths(const char *where, const char *key, const char *value)
{
    if (value[0] == '\0')
        return ENGRAM_OK; /* no directories */
    for (const char *entry = value;;) {
        const char *colon = strchr(entry, ':');
        size_t len = colon ? (size_t)(colon - entry) : strlen(entry);
        if (len == 0)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                                "%s%s: '%s' has an empty entry; entries must be absolute directories (an empty "
                                "one would mean the working directory)",
                                where, key, value);
        if (entry[0] != '/')
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                                "%s%s: entry '%.*s' is relative; entries must be absolute directories (the "
                                "working directory is never searched)",
                                where, key, (int)len, entry);
        if (colon == NULL)
            return ENGRAM_OK;
        entry = colon + 1;
    }
}

engram_status_t engram_config_parse_value(const engram_config_key_decl_t *k, const char *value, const char *where,
                                          int64_t *num)
{
    size_t len = strlen(value);
    switch (k->type) {
    case ENGRAM_CONFIG_INT:
        return engram_config_parse_int(k, value, where, num);
    case ENGRAM_CONFIG_ENUM: {
        int index = 0;
        engram_status_t st = engram_config_parse_enum(k, value, where, &index);
        if (st == ENGRAM_OK)
            *num = index;
        return st;
    }
    case ENGRAM_CONFIG_STRING:
    case ENGRAM_CONFIG_PATHS:
        if (len >= ENGRAM_CONFIG_STRING_MAX)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s%s: value of %zu characters is longer than the %d allowed",
                                where, k->name, len, ENGRAM_CONFIG_STRING_MAX - 1);
        return k->type == ENGRAM_CONFIG_PATHS ? engram_config_check_paths(where, k->name, value) : ENGRAM_OK;
    }
    return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: declared with unknown type %d", k->name, (int)k->type);
}

void engram_config_enum_name(const char *accepted, int index, char *buf, size_t len)
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
