/* Routing decomposition at the boundaries, in both modes, with offsets past
 * 4 GiB; and the flush policy's AGGREGATE pattern. */
#include "engram/plugin/routing.h"
#include "tests/check.h"

static engram_route_shape_t shape(uint64_t epr, uint32_t ranks, uint32_t scaleup, uint64_t row_stride, int hybrid)
{
    engram_route_shape_t s = {
        .entries_per_rank = epr,
        .total_entries = epr * ranks,
        .rank_stride = epr * row_stride,
        .row_stride = row_stride,
        .scaleup = hybrid ? scaleup : 1,
        .hybrid = (uint32_t)hybrid,
        .epr_log2 = engram_route_log2(epr),
    };
    return s;
}

static void check_direct_boundaries(void)
{
    engram_route_shape_t s = shape(1000, 4, 1, 256, 0);
    engram_route_t r;
    for (uint32_t owner = 0; owner < 4; owner++) {
        CHECK(engram_route_index(&s, (int64_t)owner * 1000, &r));
        CHECK(r.peer == owner && r.src_off == 0);
        CHECK(engram_route_index(&s, (int64_t)owner * 1000 + 999, &r));
        CHECK(r.peer == owner && r.src_off == 999u * 256u);
    }
}

static void check_hybrid_boundaries(void)
{
    /* 4 ranks as 2 nodes x 2: owner 3 is node 1, intra 1 */
    engram_route_shape_t s = shape(1000, 4, 2, 256, 1);
    engram_route_t r;
    for (uint32_t owner = 0; owner < 4; owner++) {
        CHECK(engram_route_index(&s, (int64_t)owner * 1000, &r));
        CHECK(r.peer == owner / 2);
        CHECK(r.src_off == (owner % 2) * s.rank_stride);
        CHECK(engram_route_index(&s, (int64_t)owner * 1000 + 999, &r));
        CHECK(r.src_off == (owner % 2) * s.rank_stride + 999u * 256u);
    }
}

static void check_out_of_range(void)
{
    engram_route_shape_t s = shape(1000, 4, 2, 256, 1);
    engram_route_t r = {.peer = 77, .src_off = 77};
    CHECK(!engram_route_index(&s, -1, &r));
    CHECK(!engram_route_index(&s, 4000, &r));
    CHECK(!engram_route_index(&s, INT64_MIN, &r));
    CHECK(!engram_route_index(&s, INT64_MAX, &r));
    CHECK(r.peer == 77 && r.src_off == 77); /* untouched */
}

static void check_past_4gib(void)
{
    /* 32 M rows of 256 B = 8 GiB per rank */
    const uint64_t epr = 32ull << 20;
    engram_route_shape_t d = shape(epr, 8, 1, 256, 0);
    engram_route_t r;
    CHECK(engram_route_index(&d, (int64_t)(7 * epr + epr - 1), &r));
    CHECK(r.peer == 7 && r.src_off == (epr - 1) * 256);
    CHECK(r.src_off > (4ull << 30));
    engram_route_shape_t h = shape(epr, 8, 4, 256, 1);
    CHECK(engram_route_index(&h, (int64_t)(7 * epr + epr - 1), &r));
    CHECK(r.peer == 1 && r.src_off == 3 * h.rank_stride + (epr - 1) * 256);
    CHECK(r.src_off > (24ull << 30));
}

/* The shift path and the division path agree everywhere. */
static void check_power_of_two_shapes(void)
{
    CHECK(engram_route_log2(0) == -1 && engram_route_log2(1) == 0 && engram_route_log2(1024) == 10 &&
          engram_route_log2(1000) == -1 && engram_route_log2(1ull << 40) == 40);
    engram_route_shape_t pow2 = shape(1024, 6, 3, 32, 1);
    engram_route_shape_t slow = pow2;
    slow.epr_log2 = -1;
    for (int64_t idx = -3; idx < 6 * 1024 + 3; idx++) {
        engram_route_t a = {0, 0}, b = {0, 0};
        CHECK(engram_route_index(&pow2, idx, &a) == engram_route_index(&slow, idx, &b));
        CHECK(a.peer == b.peer && a.src_off == b.src_off);
    }
}

/* The owner's own shard: in hybrid mode the node span's offset less the
 * owner's place in it, the same rank and offset direct routing gives;
 * past 4 GiB and on both the shift and the division paths. */
static void check_owner(void)
{
    const uint64_t epr[] = {32ull << 20, 1000};
    for (int e = 0; e < 2; e++) {
        engram_route_shape_t h = shape(epr[e], 8, 4, 256, 1), d = shape(epr[e], 8, 1, 256, 0);
        const int64_t idx[] = {0, (int64_t)epr[e] - 1, (int64_t)epr[e], (int64_t)(5 * epr[e] + 7),
                               (int64_t)(8 * epr[e] - 1)};
        for (size_t i = 0; i < sizeof(idx) / sizeof(idx[0]); i++) {
            engram_route_t rh, rd;
            uint32_t owner = 99;
            uint64_t off = 99;
            CHECK(engram_route_index(&h, idx[i], &rh) && engram_route_index(&d, idx[i], &rd));
            engram_route_owner(&h, idx[i], &owner, &off);
            CHECK(owner == rd.peer && off == rd.src_off);
            CHECK(owner / 4 == rh.peer && off == rh.src_off - (owner % 4) * h.rank_stride);
        }
    }
}

static void check_flush_pattern(void)
{
    uint32_t counter = 0;
    for (uint32_t n = 1; n <= 3 * 768 + 5; n++) {
        unsigned flags = engram_flush_next_flags(&counter, 768);
        CHECK(engram_flush_needed(counter));
        CHECK(flags == (n % 768 == 0 ? 0u : ENGRAM_ROUTE_AGGREGATE));
    }
    counter = 0;
    CHECK(!engram_flush_needed(counter));
    CHECK(engram_flush_next_flags(&counter, 1) == 0); /* depth 1: every get rings */
    CHECK(engram_flush_needed(counter));
    CHECK(engram_scales_col_stride(0) == 0 && engram_scales_col_stride(1) == 4 && engram_scales_col_stride(4) == 4 &&
          engram_scales_col_stride(5) == 8);
    /* no 32-bit wrap: UINT32_MAX - 2 rounded to 0 before */
    CHECK(engram_scales_col_stride(UINT32_MAX - 2) == (uint64_t)UINT32_MAX + 1);
    CHECK(engram_scales_col_stride(UINT32_MAX) == (uint64_t)UINT32_MAX + 1);
}

int main(void)
{
    check_direct_boundaries();
    check_hybrid_boundaries();
    check_out_of_range();
    check_past_4gib();
    check_power_of_two_shapes();
    check_owner();
    check_flush_pattern();
    puts("routing_test: ok");
    return 0;
}
