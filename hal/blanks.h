/* The one rule for blanks around a value, whatever its source (the
 * ENGRAM_CONFIG_FILE file, an ENGRAM_* variable, engram_config_set,
 * ENGRAM_LOG_LEVEL): they are not part of it (internal). */
#ifndef ENGRAM_HAL_BLANKS_H
#define ENGRAM_HAL_BLANKS_H

#include <ctype.h>
#include <string.h>

/* Where `text` starts without its leading blanks; *len: its length without
 * the trailing ones too. */
static inline const char *engram_unblank(const char *text, size_t *len)
{
    while (isspace((unsigned char)*text))
        text++;
    size_t n = strlen(text);
    while (n > 0 && isspace((unsigned char)text[n - 1]))
        n--;
    *len = n;
    return text;
}

#endif
