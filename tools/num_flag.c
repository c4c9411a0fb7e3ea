#include "tools/num_flag.h"

#include <stdio.h>
#include <stdlib.h>

bool num_flag_parse(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
    if (v == NULL || *v == '\0')
        return false;
    uint64_t x = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        unsigned d = (unsigned)(*p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    if (x < min || x > max)
        return false;
    *out = x;
    return true;
}

uint64_t num_flag(const char *prog, const char *opt, const char *v, uint64_t min, uint64_t max)
{
    uint64_t x;
    if (!num_flag_parse(v, min, max, &x)) {
        fprintf(stderr, "%s: %s needs an integer in [%llu, %llu], got '%s'\n", prog, opt, (unsigned long long)min,
                (unsigned long long)max, v ? v : "");
        exit(2);
    }
    return x;
}
