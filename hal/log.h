/* Internal name of the public <engram/log.h>. */
#ifndef ENGRAM_HAL_LOG_H
#define ENGRAM_HAL_LOG_H

#include <stdbool.h>
#include <strings.h>

#include "engram/log.h"
#include "hal/blanks.h"

/* Puts text back as this thread's engram_last_error() (not logged again):
 * for a call that reports an error found early after later steps, which
 * may fail in turn, overwrote it. */
void engram_last_error_restore(const char *text);

#define ENGRAM_LOG_LEVEL_NAMES "error|warn|info|debug|trace"

/* Inline: the configuration parses ENGRAM_LOG_LEVEL too, and it is linked
 * into modules, which reach only the library's ENGRAM_API functions. */
static inline const char *engram_log_level_name(engram_log_level_t level)
{
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    return names[level];
}

/* ENGRAM_LOG_LEVEL's text: a level's name in any case, blanks around it
 * ignored as in every configuration value (hal/blanks.h); empty means the
 * default, warn. false (and *out untouched) for anything else. */
static inline bool engram_log_level_parse(const char *text, engram_log_level_t *out)
{
    size_t len;
    const char *name = engram_unblank(text, &len);
    if (len == 0) {
        *out = ENGRAM_LOG_LEVEL_WARN;
        return true;
    }
    for (int i = ENGRAM_LOG_LEVEL_ERROR; i <= ENGRAM_LOG_LEVEL_TRACE; i++) {
        const char *level = engram_log_level_name((engram_log_level_t)i);
        if (strlen(level) == len && strncasecmp(name, level, len) == 0) {
            *out = (engram_log_level_t)i;
            return true;
        }
    }
    return false;
}

#endif
