/* failplug: a transport plugin whose open always fails, for
 * plugin_log_test. It logs a warning and reports its error the way every
 * transport does (<engram/log.h>); it links no log code of its own, so
 * both must reach the host: its engram_last_error() and its log handler.
 * Nothing past open is ever called. */
#include <stdlib.h>

#include <engram/log.h>
#include <engram/plugin/plugin.h>

static bool fp_available(engram_group_t *group, const char **why)
{
    (void)group;
    (void)why;
    return true;
}

static engram_status_t fp_open(engram_group_t *group, const engram_config_view_t *cfg, engram_transport_t **out)
{
    (void)group;
    (void)cfg;
    (void)out;
    ENGRAM_WARN("failplug: refusing to open");
    return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "failplug: open refused on purpose");
}

static void fp_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    (void)t;
    (void)caps;
    abort();
}

static void fp_close(engram_transport_t *t)
{
    (void)t;
    abort();
}

static engram_status_t fp_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                        engram_region_t **out)
{
    (void)t, (void)seg, (void)span, (void)out;
    abort();
}

static engram_status_t fp_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    (void)t, (void)seg, (void)out;
    abort();
}

static void fp_dereg(engram_transport_t *t, engram_region_t *region)
{
    (void)t, (void)region;
    abort();
}

static engram_status_t fp_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                              uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                              unsigned flags)
{
    (void)t, (void)queue, (void)peer, (void)remote, (void)remote_off, (void)local, (void)local_off, (void)len,
        (void)flags;
    abort();
}

static engram_status_t fp_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    (void)t, (void)queue, (void)peer, (void)req;
    abort();
}

static engram_status_t fp_test(engram_transport_t *t, engram_request_t *req)
{
    (void)t, (void)req;
    abort();
}

static void fp_request_free(engram_transport_t *t, engram_request_t *req)
{
    (void)t, (void)req;
    abort();
}

static const engram_transport_ops_t fp_ops = {
    .name = "failplug",
    .available = fp_available,
    .open = fp_open,
    .caps = fp_caps,
    .reg_symmetric = fp_reg_symmetric,
    .reg_local = fp_reg_local,
    .dereg = fp_dereg,
    .get = fp_get,
    .flush = fp_flush,
    .test = fp_test,
    .request_free = fp_request_free,
    .close = fp_close,
};

ENGRAM_TRANSPORT_PLUGIN(fp_ops);
