/* libFuzzer target: table parameters through the public API, on one rank
 * against a bounds-checking transport (below). Per input: a context with
 * fuzzed fetch_slots, queues and flush depth; engram_table_create with
 * fuzzed params (edge values near 2^32 and 2^64 included), then, when it
 * creates, engram_write, two fetches in flight at once of a few tokens with
 * fuzzed indices (valid, edge and out of range), wait, release, destroy.
 * Asserts:
 *   - creation is refused with ENGRAM_ERR_OVERFLOW exactly when a size,
 *     computed here in 128 bits, passes the library's limit (and with
 *     ENGRAM_ERR_INVALID for zero params); it succeeds otherwise (shapes
 *     too large to run in a fuzzer are skipped, not created);
 *   - every get lies inside the source region and inside the fetch's own
 *     rows of the receive region (no slot spills into another);
 *   - fetched rows and scales (row- and column-major) are the written ones,
 *     bad indices give zeros and the right count and first position;
 *   - everything registered and requested is released.
 * ASan/UBSan catch writes past the scale buffers (heap). */
#include <stdlib.h>
#include <string.h>

#include "engram/internal.h"
#include "hal/registry.h"
#include "transports/builtins.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/single_rank.h"

#define BUDGET (64u << 20) /* bytes a created table may take here */
#define MAX_FETCH_ROWS 4096u

/* --- the transport: one rank, so every get reads this rank's shard --- */

struct engram_transport {
    int unused;
};
struct engram_region {
    engram_segment_t *seg;
};
struct engram_request {
    int unused;
};

static struct {
    int regions, requests;
    uint64_t lo, hi; /* local byte range the gets wrote since the last reset */
} tp;

static bool fz_available(engram_group_t *g, const char **why)
{
    (void)g;
    (void)why;
    return true;
}

static engram_status_t fz_open(engram_group_t *g, const engram_config_view_t *cfg, engram_transport_t **out)
{
    (void)g;
    (void)cfg;
    *out = calloc(1, sizeof(**out));
    return *out ? ENGRAM_OK : ENGRAM_ERR_NOMEM;
}

static void fz_caps(const engram_transport_t *t, engram_transport_caps_t *caps)
{
    (void)t;
    memset(caps, 0, sizeof(*caps));
    caps->flags = ENGRAM_CAP_HOST_INITIATED | ENGRAM_CAP_HYBRID;
    caps->read_kinds = caps->write_kinds = ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST);
    caps->max_queues = 4;
    caps->max_outstanding = 1 << 20;
}

static engram_status_t fz_reg(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out)
{
    (void)t;
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return ENGRAM_ERR_NOMEM;
    (*out)->seg = seg;
    tp.regions++;
    return ENGRAM_OK;
}

static engram_status_t fz_reg_symmetric(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                        engram_region_t **out)
{
    (void)span;
    return fz_reg(t, seg, out);
}

static void fz_dereg(engram_transport_t *t, engram_region_t *r)
{
    (void)t;
    tp.regions--;
    free(r);
}

static engram_status_t fz_get(engram_transport_t *t, int queue, int peer, engram_region_t *remote,
                              uint64_t remote_off, engram_region_t *local, uint64_t local_off, size_t len,
                              unsigned flags)
{
    (void)t;
    (void)queue;
    (void)flags;
    if (peer != 0 || remote_off > remote->seg->size || len > remote->seg->size - remote_off ||
        local_off > local->seg->size || len > local->seg->size - local_off)
        abort();
    memcpy((char *)local->seg->addr + local_off, (const char *)remote->seg->addr + remote_off, len);
    if (local_off < tp.lo)
        tp.lo = local_off;
    if (local_off + len > tp.hi)
        tp.hi = local_off + len;
    return ENGRAM_OK;
}

static engram_status_t fz_flush(engram_transport_t *t, int queue, int peer, engram_request_t **req)
{
    (void)t;
    (void)queue;
    (void)peer;
    *req = calloc(1, sizeof(**req));
    if (*req == NULL)
        return ENGRAM_ERR_NOMEM;
    tp.requests++;
    return ENGRAM_OK;
}

static engram_status_t fz_test(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    (void)req;
    return ENGRAM_OK;
}

static void fz_request_free(engram_transport_t *t, engram_request_t *req)
{
    (void)t;
    tp.requests--;
    free(req);
}

static void fz_close(engram_transport_t *t)
{
    free(t);
}

static const engram_transport_ops_t fuzz_transport_ops = {
    .name = "fuzz",
    .available = fz_available,
    .open = fz_open,
    .caps = fz_caps,
    .reg_symmetric = fz_reg_symmetric,
    .reg_local = fz_reg,
    .dereg = fz_dereg,
    .get = fz_get,
    .flush = fz_flush,
    .test = fz_test,
    .request_free = fz_request_free,
    .close = fz_close,
};

static const engram_builtin_t fuzz_builtins[] = {
    {.name = "fuzz", .ops = &fuzz_transport_ops, .absent_reason = NULL, .auto_priority = 1},
};

const engram_builtin_table_t *engram_transport_builtins(void)
{
    static const engram_builtin_table_t table = {fuzz_builtins, 1};
    return &table;
}

/* --- parameters --- */

/* An edge value or fuzzed bits at a fuzzed scale. */
static uint64_t pick(fuzz_input_t *in, unsigned bytes)
{
    static const uint64_t edges[] = {0, 1, 2, 3, 4, 5, 7, 31, 32, 33, 64, 1000,
                                     1ull << 16, (1ull << 31) - 1, 1ull << 31, (1ull << 31) + 1,
                                     UINT32_MAX - 3, UINT32_MAX - 2, UINT32_MAX - 1, UINT32_MAX,
                                     1ull << 32, 1ull << 42, 1ull << 47, UINT64_MAX / 32, UINT64_MAX};
    uint8_t sel = (uint8_t)fuzz_take(in, 1);
    uint64_t mask = bytes >= 8 ? UINT64_MAX : (1ull << (8 * bytes)) - 1;
    if (sel & 0x80)
        return edges[(sel & 0x7f) % (sizeof(edges) / sizeof(edges[0]))] & mask;
    return fuzz_take(in, bytes) >> (sel % (8 * bytes));
}

typedef unsigned __int128 u128;

/* What engram_table_create must answer for p, from exact sizes; *bytes is
 * the table's memory when it creates. */
static engram_status_t expected(const engram_table_params_t *p, uint64_t slots, u128 *bytes)
{
    if (p->entries_per_rank == 0 || p->row_bytes == 0 || p->entries_per_token == 0 || p->max_tokens == 0)
        return ENGRAM_ERR_INVALID;
    const u128 limit = engram_host_memory_bytes();
    u128 stride = ((u128)p->row_bytes + 31) / 32 * 32;
    u128 shard = stride * p->entries_per_rank;
    u128 recv = (u128)p->max_tokens * p->entries_per_token * p->row_bytes * slots;
    u128 sf = p->scale_packs ? (((u128)p->max_tokens + 3) / 4 * 4) * p->entries_per_token * p->scale_packs * 4 * slots
                             : 0;
    u128 scales = (u128)p->entries_per_rank * p->scale_packs * 4;
    if (p->entries_per_rank > INT64_MAX || shard > limit || recv > limit || sf > limit || scales > limit ||
        shard + recv + sf + scales > limit)
        return ENGRAM_ERR_OVERFLOW;
    *bytes = shard + recv + sf + scales;
    return ENGRAM_OK;
}

/* --- the oracle's data --- */

static uint8_t row_byte(uint64_t row, uint64_t j)
{
    return (uint8_t)(row * 131 + j * 7 + 1);
}

static uint32_t scale_pack(uint64_t row, uint64_t k)
{
    return (uint32_t)(row * 1000003u + k + 1);
}

static void write_table(engram_table_t *t, const engram_table_params_t *p)
{
    uint8_t *rows = malloc(p->entries_per_rank * p->row_bytes);
    uint32_t *sc = p->scale_packs ? malloc(p->entries_per_rank * p->scale_packs * sizeof(uint32_t)) : NULL;
    if (rows == NULL || (p->scale_packs && sc == NULL))
        abort();
    for (uint64_t i = 0; i < p->entries_per_rank; i++) {
        for (uint64_t j = 0; j < p->row_bytes; j++)
            rows[i * p->row_bytes + j] = row_byte(i, j);
        for (uint64_t k = 0; k < p->scale_packs; k++)
            sc[i * p->scale_packs + k] = scale_pack(i, k);
    }
    if (engram_write(t, rows, p->row_bytes, sc) != ENGRAM_OK)
        abort();
    free(rows);
    free(sc);
}

typedef struct fetch_case {
    uint32_t tokens;
    unsigned flags;
    int64_t *idx;
    engram_fetch_t *f;
    uint64_t lo, hi; /* local bytes its gets wrote */
} fetch_case_t;

static void issue(engram_table_t *t, const engram_table_params_t *p, fuzz_input_t *in, fetch_case_t *c)
{
    uint64_t max = p->max_tokens < 4 ? p->max_tokens : 4;
    c->tokens = (uint32_t)(fuzz_take(in, 1) % (max + 1));
    if ((uint64_t)c->tokens * p->entries_per_token > MAX_FETCH_ROWS)
        c->tokens = 0;
    c->flags = fuzz_take(in, 1) & 1 ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0;
    uint64_t n = (uint64_t)c->tokens * p->entries_per_token, total = p->entries_per_rank;
    c->idx = malloc((n ? n : 1) * sizeof(int64_t));
    if (c->idx == NULL)
        abort();
    for (uint64_t i = 0; i < n; i++) {
        uint8_t kind = (uint8_t)fuzz_take(in, 1);
        static const int64_t edges[] = {-1, INT64_MIN, INT64_MAX, 0};
        if (kind < 192)
            c->idx[i] = (int64_t)(fuzz_take(in, 4) % total);
        else if (kind < 252)
            c->idx[i] = (int64_t)(total - 1 - (kind % 2)) + (kind & 4 ? 1 : 0); /* last, and one past */
        else
            c->idx[i] = edges[kind - 252];
    }
    tp.lo = UINT64_MAX;
    tp.hi = 0;
    if (engram_fetch(t, c->idx, c->tokens, c->flags, &c->f) != ENGRAM_OK)
        abort();
    c->lo = tp.lo;
    c->hi = tp.hi;
}

static void check(engram_table_t *t, const engram_table_params_t *p, fetch_case_t *c)
{
    const void *rows_v = NULL;
    const uint32_t *sf = NULL;
    engram_status_t st = engram_wait(c->f, &rows_v, &sf);
    const uint8_t *rows = rows_v, *base = t->recv->addr;
    const uint64_t ept = p->entries_per_token, n = (uint64_t)c->tokens * ept, total = p->entries_per_rank;
    /* the gets stayed inside this fetch's rows */
    if (c->hi > 0 && (base + c->lo < rows || base + c->hi > rows + n * p->row_bytes))
        abort();
    uint64_t bad = 0, first = 0;
    const uint64_t col_stride = ((uint64_t)c->tokens + 3) / 4 * 4;
    for (uint64_t r = 0; r < n; r++) {
        int64_t idx = c->idx[r];
        bool ok = idx >= 0 && (uint64_t)idx < total;
        if (!ok && bad++ == 0)
            first = r;
        for (uint64_t j = 0; j < p->row_bytes; j++)
            if (rows[r * p->row_bytes + j] != (ok ? row_byte((uint64_t)idx, j) : 0))
                abort();
        uint64_t tok = r / ept, e = r % ept;
        for (uint64_t k = 0; k < p->scale_packs; k++) {
            uint64_t at = c->flags ? (e * p->scale_packs + k) * col_stride + tok : r * p->scale_packs + k;
            if (sf[at] != (ok ? scale_pack((uint64_t)idx, k) : 0))
                abort();
        }
    }
    if (st != (bad ? ENGRAM_ERR_BAD_INDEX : ENGRAM_OK))
        abort();
    uint64_t count;
    uint32_t ft, fe;
    engram_fetch_bad_indices(c->f, &count, &ft, &fe);
    if (count != bad || (bad && (ft != first / ept || fe != first % ept)))
        abort();
    engram_fetch_release(c->f);
    free(c->idx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    char slots[8], qps[8], depth[8];
    snprintf(slots, sizeof(slots), "%u", 1 + (unsigned)(fuzz_take(&in, 1) % 4));
    snprintf(qps, sizeof(qps), "%u", 1 + (unsigned)(fuzz_take(&in, 1) % 4));
    snprintf(depth, sizeof(depth), "%u", 1 + (unsigned)(fuzz_take(&in, 1) % 8));
    const char *mode = fuzz_take(&in, 1) & 1 ? "hybrid" : "direct";
    engram_table_params_t p = {.size = sizeof(p), .recv = ENGRAM_RECV_HOST};
    p.entries_per_rank = pick(&in, 8);
    p.row_bytes = (uint32_t)pick(&in, 4);
    p.entries_per_token = (uint32_t)pick(&in, 4);
    p.max_tokens = (uint32_t)pick(&in, 4);
    p.scale_packs = (uint32_t)pick(&in, 4);
    u128 bytes = 0;
    engram_status_t want = expected(&p, strtoull(slots, NULL, 10), &bytes);
    /* valid but more than a fuzzer should allocate and write: not run */
    if (want == ENGRAM_OK && (bytes > BUDGET || (u128)p.entries_per_rank * p.row_bytes > BUDGET))
        return 0;

    const char *const settings[] = {"fetch_slots", slots, "num_qps", qps, "flush_depth", depth, "mode", mode, NULL};
    engram_group_t *g;
    engram_context_t *ctx;
    if (single_rank_open("fuzz", settings, &g, &ctx) != ENGRAM_OK)
        abort();
    engram_table_t *t = NULL;
    if (engram_table_create(ctx, &p, &t) != want)
        abort();
    if (want == ENGRAM_OK) {
        write_table(t, &p);
        fetch_case_t a, b;
        issue(t, &p, &in, &a);
        bool two = strcmp(slots, "1") != 0;
        if (two)
            issue(t, &p, &in, &b);
        check(t, &p, &a);
        if (two)
            check(t, &p, &b);
        if (engram_table_destroy(t) != ENGRAM_OK)
            abort();
    } else if (t != NULL) {
        abort();
    }
    if (single_rank_close(g, ctx) != ENGRAM_OK || tp.regions != 0 || tp.requests != 0)
        abort();
    return 0;
}
