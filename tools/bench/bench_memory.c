/* What a case needs in memory, refused up front when the host cannot hold
 * it: a case that does not fit would otherwise be OOM-killed mid-run with
 * nothing but "killed by signal 9" to go by. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/log.h"
#include "tools/bench/bench.h"
#include "tools/num_flag.h"

/* A forked rank's own pages beyond its buffers (stack, the library's
 * context, page tables of the peers' mapped shards): a round figure above
 * the RssAnon of a loopback rank of a 16-row table. */
#define BENCH_RANK_OVERHEAD (8ull << 20)

/* Sums and products that saturate a flag instead of wrapping. */
typedef struct acc {
    bool overflow;
} acc_t;

static uint64_t mul(acc_t *a, uint64_t x, uint64_t y)
{
    uint64_t r;
    if (__builtin_mul_overflow(x, y, &r))
        a->overflow = true;
    return r;
}

static uint64_t add(acc_t *a, uint64_t x, uint64_t y)
{
    uint64_t r;
    if (__builtin_add_overflow(x, y, &r))
        a->overflow = true;
    return r;
}

engram_status_t bench_memory_estimate(const bench_case_t *c, int fetch_slots, bench_memory_t *out)
{
    acc_t a = {false};
    uint64_t packs = bench_scale_packs(c);
    uint64_t ranks = (uint64_t)c->ranks;
    uint64_t total = mul(&a, c->entries_per_rank, ranks);
    if (a.overflow || total > INT64_MAX)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "bench: --entries %" PRIu64 " x --ranks %d rows exceed int64 indices",
                            c->entries_per_rank, c->ranks);
    uint64_t rows = (uint64_t)c->tokens * c->entries_per_token;
    engram_storage_hint_t hint;
    engram_status_t st = engram_storage_size_hint(c->entries_per_rank, c->row_bytes, rows, &hint);
    if (st != ENGRAM_OK)
        return st;
    uint64_t slots = (uint64_t)fetch_slots;
    bench_memory_t m = {0};
    m.shard = hint.cpu_table_bytes;
    /* receive slots: rows, and scales at the column-major stride */
    m.recv = add(&a, mul(&a, slots, mul(&a, rows, c->row_bytes)),
                 mul(&a, slots, mul(&a, mul(&a, ((uint64_t)c->tokens + 3) / 4 * 4, c->entries_per_token), packs * 4)));
    m.scales = mul(&a, total, packs * 4); /* the table replicates every rank's scales */
    /* the rank's own buffers: indices, the reference gather's output, one row, the timings */
    uint64_t mine = add(&a, mul(&a, rows, 8 + (uint64_t)c->row_bytes), (uint64_t)c->row_bytes);
    mine = add(&a, mine, mul(&a, (uint64_t)c->iters, 4 * sizeof(double)));
    m.own = add(&a, add(&a, add(&a, m.shard, m.recv), add(&a, m.scales, mine)), BENCH_RANK_OVERHEAD);
    /* one reference table and one copy of its scales, shared by the ranks */
    m.shared = add(&a, mul(&a, total, c->row_bytes), mul(&a, total, packs * 4));
    if (c->trace)
        m.shared = add(&a, m.shared, c->trace->map_len);
    m.total = add(&a, mul(&a, ranks, m.own), m.shared);
    if (a.overflow)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW,
                            "bench: the memory of %d ranks x %" PRIu64 " entries x %u-byte rows (%u tokens x %u "
                            "entries per fetch, %d slots) overflows 64 bits",
                            c->ranks, c->entries_per_rank, c->row_bytes, c->tokens, c->entries_per_token, fetch_slots);
    *out = m;
    return ENGRAM_OK;
}

/* MemAvailable plus the free huge pages (host segments take those first);
 * false when /proc/meminfo says neither. */
static bool host_available(uint64_t *bytes)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f == NULL)
        return false;
    char line[256];
    uint64_t avail = 0, huge_free = 0, huge_kb = 0;
    bool seen = false;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long v;
        if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
            avail = v * 1024;
            seen = true;
        } else if (sscanf(line, "HugePages_Free: %llu", &v) == 1) {
            huge_free = v;
        } else if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1) {
            huge_kb = v;
        }
    }
    fclose(f);
    *bytes = avail + huge_free * huge_kb * 1024;
    return seen;
}

static int fetch_slots(const bench_case_t *c)
{
    engram_config_t *cfg;
    char v[32] = "4";
    if (engram_config_create(&cfg) == ENGRAM_OK) {
        if (c->transport == NULL || engram_config_set(cfg, "transport", c->transport) == ENGRAM_OK)
            engram_config_get(cfg, "fetch_slots", v, sizeof(v));
        engram_config_destroy(cfg);
    }
    uint64_t n;
    return num_flag_parse(v, 1, INT32_MAX, &n) ? (int)n : 4;
}

static double mib(uint64_t b)
{
    return (double)b / (1 << 20);
}

engram_status_t bench_memory_check(const bench_case_t *c)
{
    bench_memory_t m;
    int slots = fetch_slots(c);
    engram_status_t st = bench_memory_estimate(c, slots, &m);
    if (st != ENGRAM_OK)
        return st;
    uint64_t avail;
    if (!host_available(&avail))
        return ENGRAM_OK; /* nothing to compare with: let the run find out */
    if (m.total <= avail)
        return ENGRAM_OK;
    return ENGRAM_ERROR(ENGRAM_ERR_NOMEM,
                        "bench: this case needs about %.0f MiB: %d ranks x %.1f MiB each (shard %.1f, receive slots "
                        "%.1f, replicated scales %.1f, buffers and process) + %.1f MiB shared (the memcpy reference "
                        "table); the host has %.0f MiB available (MemAvailable + free huge pages). Use fewer ranks, "
                        "entries, row bytes or tokens",
                        mib(m.total), c->ranks, mib(m.own), mib(m.shard), mib(m.recv), mib(m.scales), mib(m.shared),
                        mib(avail));
}
