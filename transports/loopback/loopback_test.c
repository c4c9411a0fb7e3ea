/* Loopback transport between forked ranks: every rank reads every peer's
 * patterned segment through gets and checks the bytes; bad arguments are
 * refused with nothing written; registration failures reach every rank. */
#include "transports/loopback/loopback.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "hal/config_keys.h"
#include "memory/host_segment.h"
#include "tests/check.h"
#include "tests/transport_testing.h"

static const engram_transport_ops_t *lb = &engram_loopback_ops;

#define SEG_BYTES (3 * 4096 + 100) /* rounds to 4 pages */
#define DST_BYTES (64 * 1024)
#define SENTINEL 0xee

static engram_segment_t *patterned_segment(engram_group_t *g, size_t bytes)
{
    engram_segment_t *seg = testing_host_segment(bytes, ENGRAM_HUGE_OFF);
    unsigned char *b = seg->addr;
    for (size_t i = 0; i < seg->size; i++)
        b[i] = testing_pattern(engram_group_rank(g), i);
    return seg;
}

/* The transport, a destination region over `dst` and the segment behind it. */
typedef struct fixture {
    engram_group_t *g;
    engram_transport_t *t;
    engram_segment_t *seg, *dst;
    engram_region_t *remote, *local;
} fixture_t;

static void fixture_open(fixture_t *f, engram_group_t *g, engram_reg_span_t span)
{
    const char *why = NULL;
    CHECK(lb->available(g, &why));
    f->g = g;
    CHECK_OK(lb->open(g, NULL, &f->t));
    f->seg = patterned_segment(g, SEG_BYTES);
    f->dst = testing_host_segment(DST_BYTES, ENGRAM_HUGE_OFF);
    CHECK_OK(lb->reg_symmetric(f->t, f->seg, span, &f->remote));
    CHECK_OK(lb->reg_local(f->t, f->dst, &f->local));
}

static int fixture_close(fixture_t *f)
{
    CHECK_OK(engram_group_barrier(f->g)); /* no rank unmaps while another still reads */
    lb->dereg(f->t, f->local);
    lb->close(f->t); /* releases the symmetric region too */
    engram_host_segment_ops.free(f->dst);
    engram_host_segment_ops.free(f->seg);
    return 0; /* the launcher runs LeakSanitizer in each rank (sanitizer builds) */
}

static void flush_and_wait(fixture_t *f, int queue, int peer)
{
    engram_request_t *req = NULL;
    CHECK_OK(lb->flush(f->t, queue, peer, &req));
    CHECK_OK(lb->test(f->t, req));
    lb->request_free(f->t, req);
}

static void dst_clear(fixture_t *f)
{
    memset(f->dst->addr, SENTINEL, f->dst->size);
}

static int dst_untouched(fixture_t *f)
{
    const unsigned char *b = f->dst->addr;
    for (size_t i = 0; i < f->dst->size; i++)
        if (b[i] != SENTINEL)
            return 0;
    return 1;
}

/* The byte at `off` of node `peer`'s span: the segments of its local ranks
 * back to back (for ENGRAM_REG_RANK local_size is 1 and peer is the rank). */
static unsigned char span_byte(int peer, int local_size, size_t seg_size, uint64_t off)
{
    return testing_pattern(peer * local_size + (int)(off / seg_size), off % seg_size);
}

static void get_and_check(fixture_t *f, int queue, int peer, int local_size, uint64_t roff, uint64_t loff,
                          size_t len, unsigned flags)
{
    dst_clear(f);
    CHECK_OK(lb->get(f->t, queue, peer, f->remote, roff, f->local, loff, len, flags));
    flush_and_wait(f, queue, peer);
    const unsigned char *b = f->dst->addr;
    for (size_t i = 0; i < len; i++)
        CHECK(b[loff + i] == span_byte(peer, local_size, f->seg->size, roff + i));
    CHECK(loff == 0 || b[loff - 1] == SENTINEL);
    CHECK(loff + len == f->dst->size || b[loff + len] == SENTINEL);
}

static int rank_main_rank_span(engram_group_t *g, void *arg)
{
    (void)arg;
    fixture_t f;
    fixture_open(&f, g, ENGRAM_REG_RANK);
    size_t s = f.seg->size;
    const struct {
        uint64_t roff, loff;
        size_t len;
    } cases[] = {{0, 0, 1}, {0, 0, 16384}, {1, 7, 255}, {4000, 100, 200}, {s - 256, 3000, 256}, {s - 1, 0, 1},
                 {12345, DST_BYTES - 4, 4}};
    for (int peer = 0; peer < engram_group_size(g); peer++)
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            get_and_check(&f, (int)i % 64, peer, 1, cases[i].roff, cases[i].loff, cases[i].len, 0);

    /* Many rows per flush, most held back as a NIC would, then one check. */
    const size_t row = 256, rows = s / row;
    dst_clear(&f);
    for (int peer = 0; peer < engram_group_size(g); peer++)
        for (size_t r = 0; r < rows; r++) {
            size_t src = (r * 5 % rows) * row; /* a permutation: rows out of order */
            unsigned flags = r % 3 == 2 ? 0 : ENGRAM_GET_AGGREGATE;
            CHECK_OK(lb->get(f.t, 63, peer, f.remote, src, f.local, (peer * rows + r) * row, row, flags));
        }
    for (int peer = 0; peer < engram_group_size(g); peer++)
        flush_and_wait(&f, 63, peer);
    for (int peer = 0; peer < engram_group_size(g); peer++)
        for (size_t r = 0; r < rows; r++)
            for (size_t i = 0; i < row; i++)
                CHECK(((unsigned char *)f.dst->addr)[(peer * rows + r) * row + i] ==
                      testing_pattern(peer, (r * 5 % rows) * row + i));

    /* More AGGREGATE gets than a queue holds, then one flush: all land. */
    dst_clear(&f);
    const size_t small = 16, nsmall = f.dst->size / small;
    int peer = engram_group_size(g) - 1;
    for (size_t i = 0; i < nsmall; i++)
        CHECK_OK(lb->get(f.t, 9, peer, f.remote, (i * 7 % (s / small)) * small, f.local, i * small, small,
                         ENGRAM_GET_AGGREGATE));
    flush_and_wait(&f, 9, peer);
    for (size_t i = 0; i < f.dst->size; i++)
        CHECK(((unsigned char *)f.dst->addr)[i] == testing_pattern(peer, (i / small * 7 % (s / small)) * small + i % small));

    /* Zero-length gets are valid anywhere up to the end, and write nothing;
     * a flush on a peer that got nothing completes too. */
    dst_clear(&f);
    CHECK_OK(lb->get(f.t, 0, 1, f.remote, s, f.local, f.dst->size, 0, 0));
    CHECK_OK(lb->get(f.t, 0, 1, f.remote, 0, f.local, 0, 0, ENGRAM_GET_AGGREGATE));
    CHECK(dst_untouched(&f));
    flush_and_wait(&f, 5, engram_group_size(g) - 1);
    flush_and_wait(&f, 0, 1);
    return fixture_close(&f);
}

static int rank_main_errors(engram_group_t *g, void *arg)
{
    (void)arg;
    fixture_t f;
    fixture_open(&f, g, ENGRAM_REG_RANK);
    uint64_t s = f.seg->size, d = f.dst->size;
    int n = engram_group_size(g);
    dst_clear(&f);
    if (ENGRAM_DEBUG_CHECKS) { /* the bounds checks are debug aids (engram/plugin/transport.h) */
        CHECK_STATUS(lb->get(f.t, 0, 1, f.remote, s, f.local, 0, 1, 0), ENGRAM_ERR_INVALID);
        CHECK(strstr(engram_last_error(), "remote offset") != NULL);
        CHECK_STATUS(lb->get(f.t, 0, 1, f.remote, s - 10, f.local, 0, 11, 0), ENGRAM_ERR_INVALID);
        CHECK_STATUS(lb->get(f.t, 0, 1, f.remote, UINT64_MAX - 1, f.local, 0, 4, 0), ENGRAM_ERR_INVALID);
        CHECK_STATUS(lb->get(f.t, 0, 1, f.remote, 8, f.local, 8, SIZE_MAX - 4, 0), ENGRAM_ERR_INVALID);
        CHECK_STATUS(lb->get(f.t, 0, 1, f.remote, 0, f.local, d, 1, 0), ENGRAM_ERR_INVALID);
        CHECK(strstr(engram_last_error(), "local offset") != NULL);
        CHECK_STATUS(lb->get(f.t, 0, 1, f.remote, 0, f.local, d - 100, 101, 0), ENGRAM_ERR_INVALID);
        CHECK_STATUS(lb->get(f.t, 0, 1, f.remote, 0, f.local, UINT64_MAX, 2, 0), ENGRAM_ERR_INVALID);
    }
    CHECK_STATUS(lb->get(f.t, 0, -1, f.remote, 0, f.local, 0, 1, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(lb->get(f.t, 0, n, f.remote, 0, f.local, 0, 1, 0), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "peer") != NULL);
    CHECK_STATUS(lb->get(f.t, -1, 0, f.remote, 0, f.local, 0, 1, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(lb->get(f.t, 64, 0, f.remote, 0, f.local, 0, 1, 0), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "queue") != NULL);
    CHECK_STATUS(lb->get(f.t, 0, 0, f.local, 0, f.local, 0, 1, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(lb->get(f.t, 0, 0, f.remote, 0, f.remote, 0, 1, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(lb->get(f.t, 0, 0, NULL, 0, f.local, 0, 1, 0), ENGRAM_ERR_INVALID);
    CHECK(dst_untouched(&f));

    engram_request_t *req = NULL;
    CHECK_STATUS(lb->flush(f.t, 64, 0, &req), ENGRAM_ERR_INVALID);
    CHECK_STATUS(lb->flush(f.t, 0, n, &req), ENGRAM_ERR_INVALID);
    CHECK_STATUS(lb->flush(f.t, 0, -1, &req), ENGRAM_ERR_INVALID);
    CHECK(req == NULL);
    CHECK_STATUS(lb->test(f.t, NULL), ENGRAM_ERR_INVALID);
    engram_region_t *r = NULL;
    CHECK_STATUS(lb->reg_local(f.t, NULL, &r), ENGRAM_ERR_INVALID);

    /* Request churn: one at a time, and many outstanding per queue (more
     * than a free-list block) so the list grows and every request returns. */
    for (int i = 0; i < 20000; i++)
        flush_and_wait(&f, i % 64, i % n);
    enum { MANY = 300 };
    engram_request_t *reqs[MANY];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < MANY; i++)
            CHECK_OK(lb->flush(f.t, 7, i % n, &reqs[i]));
        for (int i = 0; i < MANY; i++) {
            CHECK(i == 0 || reqs[i] != reqs[i - 1]);
            CHECK_OK(lb->test(f.t, reqs[i]));
        }
        for (int i = MANY - 1; i >= 0; i--)
            lb->request_free(f.t, reqs[i]);
    }
    /* Requests still out at close are released by close. */
    CHECK_OK(lb->flush(f.t, 1, 0, &req));

    char text[256] = "";
    lb->describe(f.t, text, sizeof(text));
    CHECK(strstr(text, "loopback") != NULL);
    engram_transport_caps_t caps;
    lb->caps(f.t, &caps);
    CHECK(caps.max_queues == 64 && (caps.flags & ENGRAM_CAP_HOST_INITIATED) && (caps.flags & ENGRAM_CAP_HYBRID));
    CHECK(!(caps.flags & ENGRAM_CAP_CROSS_HOST) && caps.read_kinds == ENGRAM_MEM_KIND_BIT(ENGRAM_MEM_HOST));
    return fixture_close(&f);
}

/* NODE_SPAN: peer p is node p, its local ranks' segments back to back. */
static int rank_main_node_span(engram_group_t *g, void *arg)
{
    (void)arg;
    fixture_t f;
    fixture_open(&f, g, ENGRAM_REG_NODE_SPAN);
    int local = engram_group_local_size(g), nodes = engram_group_size(g) / local;
    uint64_t s = f.seg->size, span = s * (uint64_t)local;
    for (int peer = 0; peer < nodes; peer++) {
        get_and_check(&f, 0, peer, local, 0, 0, span, 0); /* the whole span at once */
        for (int i = 1; i < local; i++) {
            /* Across the seam between local rank i-1 and i, in one get. */
            get_and_check(&f, 1, peer, local, i * s - 100, 10, 300, 0);
            get_and_check(&f, 2, peer, local, i * s - 1, 0, 2, ENGRAM_GET_AGGREGATE);
            get_and_check(&f, 3, peer, local, i * s, 0, 256, 0);
        }
        get_and_check(&f, 4, peer, local, span - 256, 0, 256, 0);
        CHECK_OK(lb->get(f.t, 0, peer, f.remote, span, f.local, 0, 0, 0));
    }
    dst_clear(&f);
    if (ENGRAM_DEBUG_CHECKS)
        CHECK_STATUS(lb->get(f.t, 0, 0, f.remote, span - 1, f.local, 0, 2, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(lb->get(f.t, 0, nodes, f.remote, 0, f.local, 0, 1, 0), ENGRAM_ERR_INVALID);
    CHECK(dst_untouched(&f));

    /* Gets held back when their region is deregistered are copied first. */
    CHECK_OK(lb->get(f.t, 6, 0, f.remote, 0, f.local, 0, 512, ENGRAM_GET_AGGREGATE));
    lb->dereg(f.t, f.remote);
    for (size_t i = 0; i < 512; i++)
        CHECK(((unsigned char *)f.dst->addr)[i] == span_byte(0, local, s, i));
    return fixture_close(&f);
}

/* One rank registers a bigger segment: every rank fails, none hangs. */
static int rank_main_size_mismatch(engram_group_t *g, void *arg)
{
    (void)arg;
    engram_transport_t *t;
    CHECK_OK(lb->open(g, NULL, &t));
    engram_segment_t *seg = testing_host_segment(engram_group_rank(g) == 2 ? 2 * SEG_BYTES : SEG_BYTES, ENGRAM_HUGE_OFF);
    for (int span = ENGRAM_REG_RANK; span <= ENGRAM_REG_NODE_SPAN; span++) {
        engram_region_t *r = NULL;
        CHECK_STATUS(lb->reg_symmetric(t, seg, (engram_reg_span_t)span, &r), ENGRAM_ERR_INVALID);
        CHECK(r == NULL);
        CHECK(strstr(engram_last_error(), "segment sizes differ") != NULL);
    }
    /* Bad arguments on one rank fail the others too. */
    engram_region_t *r = NULL;
    engram_status_t st = lb->reg_symmetric(t, engram_group_rank(g) == 1 ? NULL : seg, ENGRAM_REG_RANK, &r);
    CHECK(st == ENGRAM_ERR_INVALID); /* the peer's own status, everywhere */
    if (engram_group_rank(g) != 1)
        CHECK(strstr(engram_last_error(), "rank 1 failed to register its segment") != NULL);
    CHECK(r == NULL);
    lb->close(t);
    engram_host_segment_ops.free(seg);
    return 0;
}

static void run(int nranks, int local_size, engram_rank_main_fn fn, const char *name)
{
    int codes[8];
    engram_status_t st = engram_group_fork_run(nranks, local_size, fn, NULL, codes);
    for (int r = 0; r < nranks; r++)
        if (codes[r] != 0)
            fprintf(stderr, "%s: rank %d exited %d\n", name, r, codes[r]);
    CHECK_OK(st);
}

int main(void)
{
    run(4, 0, rank_main_rank_span, "rank span");
    run(4, 2, rank_main_rank_span, "rank span, 2 nodes");
    run(4, 0, rank_main_errors, "errors");
    run(4, 2, rank_main_node_span, "node span 2x2");
    run(4, 4, rank_main_node_span, "node span 1x4");
    run(4, 1, rank_main_node_span, "node span 4x1");
    run(4, 2, rank_main_size_mismatch, "size mismatch");
    printf("loopback_test: ok\n");
    return 0;
}
