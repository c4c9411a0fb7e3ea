/* Configuration: one table of keys (config_keys.h) drives the defaults, the
 * ENGRAM_<KEY> environment variables, an optional `key = value` file named by
 * ENGRAM_CONFIG_FILE, and the printed help / effective values.
 * Precedence: API (engram_config_set) > env > file > default.
 * Public header (installed as <engram/config.h>). */
#ifndef ENGRAM_CONFIG_H
#define ENGRAM_CONFIG_H

#include <stdio.h>
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct engram_config engram_config_t;

typedef enum engram_config_source {
    ENGRAM_CONFIG_SRC_DEFAULT = 0,
    ENGRAM_CONFIG_SRC_FILE,
    ENGRAM_CONFIG_SRC_ENV,
    ENGRAM_CONFIG_SRC_API,
} engram_config_source_t;

/* Defaults, then the file (if ENGRAM_CONFIG_FILE is set), then ENGRAM_* env.
 * An unknown key (in the file or an ENGRAM_ variable that is not a key and
 * not one of the non-key variables listed in config.c) or a value that does
 * not parse is an error naming the key and the accepted values. */
ENGRAM_API engram_status_t engram_config_create(engram_config_t **out);
ENGRAM_API void engram_config_destroy(engram_config_t *cfg);
/* API override: highest precedence. */
ENGRAM_API engram_status_t engram_config_set(engram_config_t *cfg, const char *key, const char *value);
/* Effective value as text into buf (always NUL-terminated). */
ENGRAM_API engram_status_t engram_config_get(const engram_config_t *cfg, const char *key, char *buf, size_t len);
ENGRAM_API engram_status_t engram_config_source(const engram_config_t *cfg, const char *key,
                                                engram_config_source_t *src);
ENGRAM_API const char *engram_config_source_str(engram_config_source_t src);
/* One line per key: name, effective value, source, accepted values, help. */
ENGRAM_API void engram_config_print(const engram_config_t *cfg, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
