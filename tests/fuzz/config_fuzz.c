/* libFuzzer target: the configuration parser, file text and environment.
 * Input byte 0 picks the source: even = file text through
 * engram_config_read_text (the ENGRAM_CONFIG_FILE parser), odd = one
 * ENGRAM_<name>=<value> variable (name up to the first '\n') read by
 * engram_config_create. Whatever the input, parsing either fails with
 * ENGRAM_ERR_INVALID or yields a config whose every key prints and parses
 * back to the same value. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hal/config_keys.h"

static void check_round_trip(engram_config_t *cfg)
{
    engram_config_t *copy;
    if (engram_config_create(&copy) != ENGRAM_OK)
        abort();
    for (int i = 0; engram_config_key(i) != NULL; i++) {
        const char *key = engram_config_key(i)->name;
        char value[ENGRAM_CONFIG_STRING_MAX], again[ENGRAM_CONFIG_STRING_MAX];
        if (engram_config_get(cfg, key, value, sizeof(value)) != ENGRAM_OK)
            abort(); /* an accepted value must print */
        if (engram_config_set(copy, key, value) != ENGRAM_OK)
            abort(); /* and parse back */
        if (engram_config_get(copy, key, again, sizeof(again)) != ENGRAM_OK || strcmp(value, again) != 0)
            abort();
    }
    /* Transport keys (not core): kept verbatim, with their source. */
    for (int i = 0; i < cfg->num_extra; i++) {
        const char *key = cfg->extra[i].name;
        char value[ENGRAM_CONFIG_STRING_MAX], again[ENGRAM_CONFIG_STRING_MAX];
        engram_config_source_t src;
        if (engram_config_get(cfg, key, value, sizeof(value)) != ENGRAM_OK ||
            strcmp(value, cfg->extra[i].value) != 0 || engram_config_source(cfg, key, &src) != ENGRAM_OK ||
            src != cfg->extra[i].source)
            abort();
        if (engram_config_set(copy, key, value) != ENGRAM_OK ||
            engram_config_get(copy, key, again, sizeof(again)) != ENGRAM_OK || strcmp(value, again) != 0)
            abort();
    }
    engram_config_destroy(copy);
}

static void check_outcome(engram_status_t st, engram_config_t *cfg)
{
    if (st == ENGRAM_OK)
        check_round_trip(cfg);
    else if (st != ENGRAM_ERR_INVALID)
        abort(); /* malformed text is INVALID, never another failure */
}

static void fuzz_file(const uint8_t *data, size_t size)
{
    engram_config_t *cfg;
    if (engram_config_create(&cfg) != ENGRAM_OK)
        abort();
    check_outcome(engram_config_read_text(cfg, "fuzz.conf", (const char *)data, size), cfg);
    engram_config_destroy(cfg);
}

static void fuzz_env(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t name_len = nl ? (size_t)(nl - data) : size;
    char *name = malloc(strlen("ENGRAM_") + name_len + 1);
    memcpy(name, "ENGRAM_", strlen("ENGRAM_"));
    memcpy(name + strlen("ENGRAM_"), data, name_len);
    name[strlen("ENGRAM_") + name_len] = '\0';
    size_t value_len = nl ? size - name_len - 1 : 0;
    char *value = malloc(value_len + 1);
    if (value_len)
        memcpy(value, nl + 1, value_len);
    value[value_len] = '\0';
    /* setenv refuses names with '=' or NUL inside: nothing to parse then */
    bool set = strlen(name) == strlen("ENGRAM_") + name_len && strchr(name, '=') == NULL &&
               strcmp(name, "ENGRAM_CONFIG_FILE") != 0 && strcmp(name, "ENGRAM_LOG_LEVEL") != 0 &&
               setenv(name, value, 1) == 0;
    if (set) {
        engram_config_t *cfg = NULL;
        engram_status_t st = engram_config_create(&cfg);
        check_outcome(st, cfg);
        engram_config_destroy(cfg);
        unsetenv(name);
    }
    free(name);
    free(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1)
        fuzz_env(data + 1, size - 1);
    else
        fuzz_file(data + 1, size - 1);
    return 0;
}
