#include "transports/nccl_gin/nccl_gin_depth.h"

#include <errno.h>
#include <stdlib.h>

enum { PROXY_MAX = 256, GDAKI_DEFAULT = 128 };

/* A positive decimal integer of the whole text, else 0. */
static int64_t positive(const char *text)
{
    if (text == NULL || *text == '\0')
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    return errno == 0 && *end == '\0' && v > 0 ? (int64_t)v : 0;
}

uint32_t engram_nccl_gin_queue_depth(int gin_type, int configured, const char *proxy_env, const char *gdaki_env)
{
    if (gin_type == ENGRAM_NCCL_GIN_TYPE_PROXY) {
        int64_t q = positive(proxy_env);
        return q > 0 && q <= PROXY_MAX && (q & (q - 1)) == 0 ? (uint32_t)q : PROXY_MAX;
    }
    if (configured > 0)
        return (uint32_t)configured;
    int64_t d = positive(gdaki_env);
    return d > 0 && d <= UINT32_MAX ? (uint32_t)d : GDAKI_DEFAULT;
}
