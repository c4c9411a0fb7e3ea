#include "tests/recording_transport.h"

#include "hal/registry.h"
#include "transports/builtins.h"

#include <stdlib.h>
#include <string.h>

recording_log_t recording_log;

struct engram_transport {
    int unused;
};
struct engram_region {
    engram_segment_t *seg;
    engram_segment_t owned; /* alloc_symmetric's memory, freed by dereg */
};
struct engram_request {
    int unused;
};

static bool rec_available(engram_group_t *g, const char **why)
{
    (void)g;
    (void)why;
    return true;
}

static engram_status_t rec_open(engram_group_t *g, const engram_config_view_t *cfg, engram_transport_t **out)
{
    (void)g;
    (void)cfg;
    *out = calloc(1, sizeof(**out));
    return *out ? ENGRAM_OK : ENGRAM_ERR_NOMEM;
}

#define RECORDING_DEFAULT_CAPS                                                                           \
    {.flags = ENGRAM_CAP_HOST_INITIATED | ENGRAM_CAP_HYBRID, .read_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST), \
     .write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST), .max_queues = 8, .max_outstanding = 1 << 20}

engram_transport_caps_t recording_caps = RECORDING_DEFAULT_CAPS;

void recording_caps_reset(void)
{
    recording_caps = (engram_transport_caps_t)RECORDING_DEFAULT_CAPS;
}

static void rec_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    (void)t;
    *caps = recording_caps;
}

static engram_status_t rec_reg(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    (void)t;
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return ENGRAM_ERR_NOMEM;
    (*out)->seg = seg;
    recording_log.open_regions++;
    return ENGRAM_OK;
}

static engram_status_t rec_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                         engram_region_t **out)
{
    recording_log.last_span = span;
    return rec_reg(t, seg, out);
}

static void rec_dereg(engram_transport_t *t, engram_region_t *r)
{
    (void)t;
    recording_log.open_regions--;
    free(r->owned.addr);
    free(r);
}

engram_status_t recording_alloc_status = ENGRAM_ERR_UNSUPPORTED;
uint32_t recording_alloc_flags;
void *recording_alloc_addr;
int recording_alloc_calls;

static engram_status_t rec_alloc_symmetric(engram_transport_t *t, const engram_segment_params_t *params,
                                           engram_reg_span_t span, engram_region_t **out, void **addr,
                                           uint32_t *region_flags)
{
    recording_alloc_calls++;
    recording_log.last_span = span;
    if (recording_alloc_status != ENGRAM_OK)
        return recording_alloc_status;
    void *mem = calloc(1, params->bytes);
    if (mem == NULL)
        return ENGRAM_ERR_NOMEM;
    engram_region_t *r;
    engram_status_t st = rec_reg(t, NULL, &r);
    if (st != ENGRAM_OK) {
        free(mem);
        return st;
    }
    r->owned = (engram_segment_t){.kind = ENGRAM_MEM_HOST, .addr = mem, .size = params->bytes};
    r->seg = &r->owned;
    *out = r;
    *addr = recording_alloc_addr = mem;
    *region_flags = recording_alloc_flags;
    return ENGRAM_OK;
}

static void record(char kind, int queue, int peer, uint64_t roff, uint64_t loff, size_t len, unsigned flags)
{
    if (recording_log.num_ops < RECORDING_MAX_OPS)
        recording_log.ops[recording_log.num_ops++] =
            (recorded_op_t){kind, queue, peer, roff, loff, len, flags};
}

static engram_status_t rec_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                               uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                               unsigned flags)
{
    (void)t;
    (void)remote;
    record('g', queue, peer, remote_off, local_off, len, flags);
    uint64_t tag[2] = {(uint64_t)peer, remote_off};
    memcpy((char *)local->seg->addr + local_off, tag, len < sizeof(tag) ? len : sizeof(tag));
    return ENGRAM_OK;
}

static engram_status_t rec_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    (void)t;
    record('f', queue, peer, 0, 0, 0, 0);
    *req = calloc(1, sizeof(**req));
    if (*req == NULL)
        return ENGRAM_ERR_NOMEM;
    recording_log.open_requests++;
    return ENGRAM_OK;
}

engram_status_t recording_test_status = ENGRAM_OK;

static engram_status_t rec_test(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    (void)req;
    return recording_test_status;
}

static void rec_request_free(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    recording_log.open_requests--;
    free(req);
}

static void rec_close(engram_transport_t *t)
{
    free(t);
}

const engram_transport_ops_t recording_transport_ops = {
    .name = "recording",
    .available = rec_available,
    .open = rec_open,
    .caps = rec_caps,
    .reg_symmetric = rec_reg_symmetric,
    .reg_local = rec_reg,
    .dereg = rec_dereg,
    .get = rec_get,
    .flush = rec_flush,
    .test = rec_test,
    .request_free = rec_request_free,
    .close = rec_close,
    .alloc_symmetric = rec_alloc_symmetric,
};

/* This test binary's built-in table: only the recording transport. */
static const engram_builtin_t recording_builtins[] = {
    {.name = "recording", .ops = &recording_transport_ops, .absent_reason = NULL, .auto_priority = 1},
};

const engram_builtin_table_t *engram_transport_builtins(void)
{
    static const engram_builtin_table_t table = {recording_builtins, 1};
    return &table;
}
