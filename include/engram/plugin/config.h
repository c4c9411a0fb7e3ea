/* What a transport sees of the configuration: the keys it declares (its
 * own, e.g. ucx_window) and a read-only view handed to its open, through
 * which it reads those and the core keys (mode, timeout_ms, num_qps, ...).
 * A transport never sees struct engram_config, so adding a key to the core
 * or to another transport changes no transport's ABI. */
#ifndef ENGRAM_PLUGIN_CONFIG_H
#define ENGRAM_PLUGIN_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum engram_config_type {
    ENGRAM_CONFIG_INT = 0,    /* accepted = "min..max" */
    ENGRAM_CONFIG_ENUM = 1,   /* accepted = "a|b|c"; read as the index */
    ENGRAM_CONFIG_STRING = 2, /* accepted describes it */
    ENGRAM_CONFIG_PATHS = 3,  /* ':'-separated absolute directories */
} engram_config_type_t;

/* One key: name is [a-z0-9_], at most ENGRAM_CONFIG_NAME_MAX characters,
 * the transport's name, '_' and the rest (ucx_window); its variable is
 * ENGRAM_<NAME upper-cased>, its file key the name itself. */
#define ENGRAM_CONFIG_NAME_MAX 48
typedef struct engram_config_key_decl {
    const char *name;
    engram_config_type_t type;
    const char *def; /* default, as text; must parse */
    const char *accepted;
    const char *help;
} engram_config_key_decl_t;

/* Core enum values a transport reads, in the order of their accepted lists. */
enum { ENGRAM_MODE_DIRECT = 0, ENGRAM_MODE_HYBRID = 1 };
/* huge_pages, as engram_segment_params_t.huge carries it (segment.h). */
enum { ENGRAM_HUGE_AUTO = 0, ENGRAM_HUGE_ON = 1, ENGRAM_HUGE_OFF = 2 };

/* Valid during the open it is handed to (copy what you keep). A key the
 * transport did not declare and that is not a core key is an error naming
 * it; so is a value that does not parse for the key's declared type. */
typedef struct engram_config_view engram_config_view_t;
struct engram_config_view {
    size_t size; /* sizeof(engram_config_view_t) of the library */
    const void *impl;
    /* INT keys, and ENUM keys as the index in accepted. */
    engram_status_t (*get_int)(const engram_config_view_t *view, const char *key, int64_t *out);
    /* STRING and PATHS keys; *out stays valid until open returns. */
    engram_status_t (*get_string)(const engram_config_view_t *view, const char *key, const char **out);
};

#ifdef __cplusplus
}
#endif
#endif
