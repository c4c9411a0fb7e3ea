/* Configuration: one table of core keys (config_keys.h) and the keys each
 * transport declares drive the defaults, the ENGRAM_<KEY> environment
 * variables, an optional `key = value` file named by ENGRAM_CONFIG_FILE, and
 * the printed help / effective values.
 * Precedence: API (engram_config_set) > env > file > default.
 * Public header (installed as <engram/config.h>). */
#ifndef ENGRAM_CONFIG_H
#define ENGRAM_CONFIG_H

#include <stdio.h>
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The timeout_ms key's default (ms): the bound on waits, barriers and
 * collective setup, and a group's bound before anyone sets it. */
#define ENGRAM_DEFAULT_TIMEOUT_MS 30000
#define ENGRAM_CONFIG_STR_(x) #x
#define ENGRAM_CONFIG_STR(x) ENGRAM_CONFIG_STR_(x)

typedef struct engram_config engram_config_t;

typedef enum engram_config_source {
    ENGRAM_CONFIG_SRC_DEFAULT = 0,
    ENGRAM_CONFIG_SRC_FILE,
    ENGRAM_CONFIG_SRC_ENV,
    ENGRAM_CONFIG_SRC_API,
} engram_config_source_t;

/* Defaults, then the file (if ENGRAM_CONFIG_FILE is set: a regular text
 * file), then ENGRAM_* env. A core key's value that does not parse is an
 * error naming the key and the accepted values. Any other key may be a
 * transport's (<transport>_<rest>, as ucx_window): its value is kept, and
 * checked at engram_context_create by the transport its name names, where
 * a key that transport does not declare is an error naming it and where it
 * was set. A name that cannot be a key at all
 * (ENGRAM_lower, "Bad-Name" in the file) is an error here. */
ENGRAM_API engram_status_t engram_config_create(engram_config_t **out);
ENGRAM_API void engram_config_destroy(engram_config_t *cfg);
/* API override: highest precedence. Core keys are checked here, the
 * transports' as for the file and env. */
ENGRAM_API engram_status_t engram_config_set(engram_config_t *cfg, const char *key, const char *value);
/* Effective value as text into buf (always NUL-terminated): a core key, or
 * a transport's key that was set (its default is listed by engram_info). */
ENGRAM_API engram_status_t engram_config_get(const engram_config_t *cfg, const char *key, char *buf, size_t len);
ENGRAM_API engram_status_t engram_config_source(const engram_config_t *cfg, const char *key,
                                                engram_config_source_t *src);
ENGRAM_API const char *engram_config_source_str(engram_config_source_t src);
/* One line per core key: name, effective value, source, accepted values,
 * help (engram_info adds the transports' keys). */
ENGRAM_API void engram_config_print(const engram_config_t *cfg, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
