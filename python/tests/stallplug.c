/* stallplug: a transport plugin for the Python tests (hostile_plugin.py
 * builds it against the installed headers), whose fetches complete only
 * when the test says so: what a transport that times out, or never
 * completes, looks like from the Python layer, on one CPU.
 *
 * One rank; a get is a memcpy done at once. Its flush request answers
 * test() from a gate file named by the stallplug_gate key: no key, done;
 * the file absent, in progress (for ever: it never times out by itself);
 * "fail" in it, ENGRAM_ERR_TIMEOUT as a transport's own timeout reports
 * it; anything else, done. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <engram/log.h>
#include <engram/plugin/plugin.h>

enum { SP_QUEUES = 4 };

struct engram_transport {
    char gate[1024];
};

struct engram_region {
    engram_segment_t *seg;
};

struct engram_request {
    int unused;
};

static bool sp_available(engram_group_t *group, const char **why)
{
    if (engram_group_size(group) != 1) {
        *why = "stallplug serves one rank";
        return false;
    }
    return true;
}

static const engram_config_key_decl_t sp_keys[] = {
    {"stallplug_gate", ENGRAM_CONFIG_STRING, "", "a file path, or empty",
     "flushes complete when this file exists (\"fail\" in it: a transport timeout); empty: at once"},
};

static engram_status_t sp_open(engram_group_t *group, const engram_config_view_t *cfg, engram_transport_t **out)
{
    if (engram_group_size(group) != 1)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "stallplug: serves one rank");
    const char *gate = "";
    engram_status_t st = cfg->get_string(cfg, "stallplug_gate", &gate);
    if (st != ENGRAM_OK)
        return st;
    engram_transport_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "stallplug: out of memory");
    snprintf(t->gate, sizeof(t->gate), "%s", gate);
    *out = t;
    return ENGRAM_OK;
}

static void sp_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    (void)t;
    caps->flags = ENGRAM_CAP_HOST_INITIATED;
    caps->read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST);
    caps->write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST);
    caps->max_queues = SP_QUEUES;
    caps->max_outstanding = 0;
}

static engram_status_t sp_reg(engram_segment_t *seg, engram_region_t **out)
{
    engram_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "stallplug: out of memory");
    r->seg = seg;
    *out = r;
    return ENGRAM_OK;
}

static engram_status_t sp_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                        engram_region_t **out)
{
    (void)t;
    (void)span;
    return sp_reg(seg, out);
}

static engram_status_t sp_reg_local(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    (void)t;
    return sp_reg(seg, out);
}

static void sp_dereg(engram_transport_t *t, engram_region_t *region)
{
    (void)t;
    free(region);
}

static engram_status_t sp_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                              uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                              unsigned flags)
{
    (void)t, (void)queue, (void)peer, (void)flags;
    memcpy((char *)local->seg->addr + local_off, (const char *)remote->seg->addr + remote_off, len);
    return ENGRAM_OK;
}

static engram_status_t sp_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    (void)t, (void)queue, (void)peer;
    *req = calloc(1, sizeof(**req));
    return *req != NULL ? ENGRAM_OK : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "stallplug: out of memory");
}

static engram_status_t sp_test(engram_transport_t *t, engram_request_t *req)
{
    (void)req;
    if (t->gate[0] == '\0')
        return ENGRAM_OK;
    FILE *f = fopen(t->gate, "r");
    if (f == NULL)
        return ENGRAM_INPROGRESS;
    char word[8] = "";
    size_t n = fread(word, 1, sizeof(word) - 1, f);
    fclose(f);
    word[n] = '\0';
    if (strncmp(word, "fail", 4) == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT, "stallplug: flush not complete in time (the gate says fail)");
    return ENGRAM_OK;
}

static void sp_request_free(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    free(req);
}

static void sp_close(engram_transport_t *t)
{
    free(t);
}

static const engram_transport_ops_t sp_ops = {
    .name = "stallplug",
    .available = sp_available,
    .open = sp_open,
    .caps = sp_caps,
    .reg_symmetric = sp_reg_symmetric,
    .reg_local = sp_reg_local,
    .dereg = sp_dereg,
    .get = sp_get,
    .flush = sp_flush,
    .test = sp_test,
    .request_free = sp_request_free,
    .close = sp_close,
    .config_keys = sp_keys,
    .num_config_keys = sizeof(sp_keys) / sizeof(sp_keys[0]),
};

ENGRAM_TRANSPORT_PLUGIN(sp_ops);
