/* libFuzzer target: index validation and routing (engram/plugin/routing.h) over
 * random table shapes, modes and indices, with the shape built as
 * engram/table.c builds it. Asserts, for every index:
 *   - outside [0, ranks * entries_per_rank) it is rejected and no route is
 *     written;
 *   - inside, the route names the owner (peer and slot in the node span)
 *     and the row's bytes lie inside the owner's table within the peer's
 *     registered region: no offset outside it is ever formed.
 * Also the flush policy: every flush_depth-th get per (queue, peer) rings
 * the doorbell, the others aggregate. */
#include <stdint.h>
#include <stdlib.h>

#include "engram/plugin/routing.h"
#include "tests/fuzz/fuzz_input.h"

#define ROW_ALIGN 32u  /* ENGRAM_ROW_ALIGN */
#define PAGE 4096u     /* host segments are page multiples */

typedef struct table_case {
    engram_route_shape_t shape;
    uint32_t ranks, local, row_bytes, num_peers;
    uint64_t table_bytes;  /* entries_per_rank * row_stride: the owner's rows */
    uint64_t region_bytes; /* what the peer's region spans */
} table_case_t;

/* false for shapes engram_table_create refuses (or could not allocate). */
static bool make_case(fuzz_input_t *in, table_case_t *c)
{
    c->ranks = 1 + (uint32_t)(fuzz_take(in, 2) % 4096);
    c->local = 1 + (uint32_t)(fuzz_take(in, 2) % c->ranks);
    while (c->ranks % c->local != 0) /* the group's nodes are equal */
        c->local--;
    bool hybrid = fuzz_take(in, 1) & 1;
    c->row_bytes = 1 + (uint32_t)(fuzz_take(in, 3) % (1u << 20));
    uint64_t epr = fuzz_take(in, 8) >> (fuzz_take(in, 1) % 64);
    uint64_t row_stride = (c->row_bytes + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    /* engram_storage_size_hint and check_params refuse these */
    if (epr == 0 || epr > UINT64_MAX / row_stride || epr > (uint64_t)INT64_MAX / c->ranks)
        return false;
    c->table_bytes = epr * row_stride;
    if (c->table_bytes > UINT64_MAX - PAGE)
        return false;
    uint64_t shard = (c->table_bytes + PAGE - 1) / PAGE * PAGE;
    uint32_t scaleup = hybrid ? c->local : 1u;
    if (shard > UINT64_MAX / scaleup) /* a node span that large cannot be mapped */
        return false;
    c->shape = (engram_route_shape_t){.entries_per_rank = epr, .total_entries = epr * c->ranks,
                                      .rank_stride = shard, .row_stride = row_stride, .scaleup = scaleup,
                                      .hybrid = hybrid, .epr_log2 = engram_route_log2(epr)};
    c->num_peers = hybrid ? c->ranks / c->local : c->ranks;
    c->region_bytes = shard * scaleup;
    return true;
}

static void check_index(const table_case_t *c, int64_t idx)
{
    const engram_route_shape_t *s = &c->shape;
    engram_route_t r = {.peer = 0xdeadbeef, .src_off = 0xfeedface};
    bool ok = engram_route_index(s, idx, &r);
    if (idx < 0 || (uint64_t)idx >= s->total_entries) {
        if (ok || r.peer != 0xdeadbeef || r.src_off != 0xfeedface)
            abort(); /* an out-of-range index became a route */
        return;
    }
    if (!ok)
        abort(); /* a valid index was refused */
    uint64_t owner = (uint64_t)idx / s->entries_per_rank, local = (uint64_t)idx % s->entries_per_rank;
    if (r.peer >= c->num_peers || r.peer != owner / s->scaleup)
        abort();
    uint64_t intra = owner % s->scaleup;
    uint64_t base = intra * s->rank_stride; /* the owner's table in the region */
    if (r.src_off < base || r.src_off - base != local * s->row_stride)
        abort();
    if (r.src_off - base + c->row_bytes > c->table_bytes || r.src_off + c->row_bytes > c->region_bytes)
        abort(); /* the row would be read outside the owner's table */
}

static void check_flush_policy(fuzz_input_t *in)
{
    uint32_t depth = 1 + (uint32_t)(fuzz_take(in, 3) % (1u << 20));
    uint32_t gets = (uint32_t)(fuzz_take(in, 2) % 4096);
    uint32_t counter = 0;
    for (uint32_t i = 1; i <= gets; i++) {
        unsigned flags = engram_flush_next_flags(&counter, depth);
        bool doorbell = i % depth == 0;
        if (flags != (doorbell ? 0u : ENGRAM_ROUTE_AGGREGATE) || counter < 1 || counter > depth)
            abort();
    }
    if (engram_flush_needed(counter) != (gets > 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    check_flush_policy(&in);
    uint32_t tokens = (uint32_t)fuzz_take(&in, 4);
    uint64_t stride = engram_scales_col_stride(tokens); /* every uint32 count, UINT32_MAX too */
    if (stride < tokens || stride % 4 != 0 || stride - tokens > 3)
        abort();
    table_case_t c;
    if (!make_case(&in, &c))
        return 0;
    /* the edges, then the fuzzer's own indices */
    const int64_t total = (int64_t)c.shape.total_entries;
    const int64_t edges[] = {-1, 0, total - 1, total, INT64_MIN, INT64_MAX, total / 2};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        check_index(&c, edges[i]);
    while (in.size > 0) {
        int64_t idx = (int64_t)fuzz_take(&in, 8);
        check_index(&c, idx);
        check_index(&c, total > 0 ? idx % total : idx); /* mostly in range */
    }
    return 0;
}
