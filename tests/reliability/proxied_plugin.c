/* A plugin that opens and reports ENGRAM_CAP_HOST_PROXIED, as nccl_gin does
 * where NCCL runs GIN in proxy mode: transport=auto passes it over, and a
 * context named after it opens on it. It moves no data: registering a
 * table's memory is refused. Built as libengram_transport_proxied.so. */
#include <stdlib.h>
#include <string.h>

#include <engram/plugin/plugin.h>

struct engram_transport {
    int unused;
};

static bool proxied_available(engram_group_t *group, const char **why)
{
    (void)group, (void)why;
    return true;
}

static engram_status_t proxied_open(engram_group_t *group, const engram_config_view_t *cfg,
                                    engram_transport_t **out)
{
    (void)group, (void)cfg;
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? ENGRAM_OK : ENGRAM_ERR_NOMEM;
}

static void proxied_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    (void)t;
    *caps = (engram_transport_caps_t){.flags = ENGRAM_CAP_HOST_INITIATED | ENGRAM_CAP_HOST_PROXIED, .max_queues = 1};
}

static void proxied_describe(const engram_transport_t *t, char *buf, size_t len)
{
    (void)t;
    strncpy(buf, "test proxy thread", len - 1);
    buf[len - 1] = '\0';
}

static void proxied_close(engram_transport_t *t)
{
    free(t);
}

static engram_status_t proxied_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                             engram_region_t **out)
{
    (void)t, (void)seg, (void)span, (void)out;
    return ENGRAM_ERR_UNSUPPORTED;
}

/* Never reached: no region is registered on this plugin. */
static void proxied_unreachable(void)
{
    abort();
}

static const engram_transport_ops_t ops = {
    .name = "proxied",
    .available = proxied_available,
    .open = proxied_open,
    .caps = proxied_caps,
    .reg_symmetric = proxied_reg_symmetric,
    .reg_local = (void *)proxied_unreachable,
    .dereg = (void *)proxied_unreachable,
    .get = (void *)proxied_unreachable,
    .flush = (void *)proxied_unreachable,
    .test = (void *)proxied_unreachable,
    .request_free = (void *)proxied_unreachable,
    .describe = proxied_describe,
    .close = proxied_close,
};

ENGRAM_TRANSPORT_PLUGIN(ops);
