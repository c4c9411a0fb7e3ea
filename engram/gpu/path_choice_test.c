/* gpu_path's choice (path_choice.h) with made-up measurements: the
 * settings that decide without a probe, the refusal, the window a table's
 * size selects, the margin and its tie, past the largest window, missing
 * measurements, the reach derived from uva's rates, and the line that
 * explains a choice. */
#include <string.h>

#include "engram/gpu/fetch_path.h"
#include "engram/gpu/path_choice.h"
#include "hal/config_keys.h"
#include "tests/check.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* Windows of 64, 256, 512 MiB, 1 and 2 GiB: uva from the rates given,
 * host_gather and the copy flat. */
static engram_gpu_probe_t probe_of(const double *uva, const double *hg, int n)
{
    static const uint64_t bytes[] = {64 * MiB, 256 * MiB, 512 * MiB, 1 * GiB, 2 * GiB};
    engram_gpu_probe_t p = {.windows = n, .gather_threads = 15};
    for (int i = 0; i < n; i++)
        p.window[i] = (engram_gpu_path_window_t){
            .bytes = bytes[i], .uva_gbps = uva[i], .host_gather_gbps = hg[i], .h2d_gbps = 50};
    engram_gpu_probe_reach(&p);
    return p;
}

static engram_gpu_pick_t decide(int gpu_path, unsigned lacks, uint64_t node_bytes, const engram_gpu_probe_t *p,
                                engram_gpu_path_report_t *r)
{
    engram_gpu_path_ask_t ask = {.gpu_path = gpu_path, .lacks = lacks, .node_bytes = node_bytes};
    *r = (engram_gpu_path_report_t){.size = sizeof(*r)};
    return engram_gpu_path_decide(&ask, p, r);
}

static void expect(engram_gpu_pick_t got, engram_gpu_pick_t want, const engram_gpu_path_report_t *r,
                   const char *path, const char *reason)
{
    if (got != want || strcmp(r->path, path) != 0 || strstr(r->reason, reason) == NULL) {
        fprintf(stderr, "got %d %s (%s)\nwant %d %s (... %s ...)\n", (int)got, r->path, r->reason, (int)want, path,
                reason);
        exit(1);
    }
    CHECK(r->size == sizeof(*r));
}

/* gpu_path set, or host_gather unable to run: no probe, whatever the size. */
static void test_without_probe(void)
{
    engram_gpu_path_report_t r;
    const uint64_t big = 64 * GiB;
    engram_gpu_path_ask_t ask = {.gpu_path = ENGRAM_GPU_PATH_UVA, .node_bytes = big};
    CHECK(!engram_gpu_path_needs_probe(&ask));
    expect(decide(ENGRAM_GPU_PATH_UVA, 0, big, NULL, &r), ENGRAM_GPU_PICK_UVA, &r, "uva", "gpu_path=uva");
    expect(decide(ENGRAM_GPU_PATH_HOST_GATHER, 0, 1, NULL, &r), ENGRAM_GPU_PICK_HOST_GATHER, &r, "host_gather",
           "gpu_path=host_gather");
    CHECK(r.windows == 0 && r.window_bytes == 0 && r.reach_bytes == 0);
    /* where host_gather cannot serve the table: auto takes uva and says
     * why, host_gather asked is refused (the caller words it) */
    static const unsigned lacks[] = {ENGRAM_GPU_CAP_DEVICE_SHARDS, ENGRAM_GPU_CAP_BESIDE_LAUNCHER,
                                     ENGRAM_GPU_CAP_NODES};
    for (size_t i = 0; i < sizeof(lacks) / sizeof(lacks[0]); i++) {
        ask = (engram_gpu_path_ask_t){.gpu_path = ENGRAM_GPU_PATH_AUTO, .lacks = lacks[i], .node_bytes = big};
        CHECK(!engram_gpu_path_needs_probe(&ask));
        expect(decide(ENGRAM_GPU_PATH_AUTO, lacks[i], big, NULL, &r), ENGRAM_GPU_PICK_UVA, &r, "uva",
               engram_gpu_cap_reason(lacks[i]));
        CHECK(decide(ENGRAM_GPU_PATH_HOST_GATHER, lacks[i], big, NULL, &r) == ENGRAM_GPU_PICK_REFUSED);
        CHECK(decide(ENGRAM_GPU_PATH_UVA, lacks[i], big, NULL, &r) == ENGRAM_GPU_PICK_UVA);
    }
    /* rows within the first window: uva, no probe (a probe given is not read) */
    const double fast_hg[] = {40, 40, 40, 40, 40}, slow_uva[] = {10, 10, 10, 10, 10};
    engram_gpu_probe_t p = probe_of(slow_uva, fast_hg, 5);
    for (uint64_t b = 1; b <= ENGRAM_GPU_REACH_MIN_BYTES; b = b * 2 + 1) {
        ask = (engram_gpu_path_ask_t){.gpu_path = ENGRAM_GPU_PATH_AUTO, .node_bytes = b};
        CHECK(!engram_gpu_path_needs_probe(&ask));
        expect(decide(ENGRAM_GPU_PATH_AUTO, 0, b, &p, &r), ENGRAM_GPU_PICK_UVA, &r, "uva", "first probe window");
        CHECK(r.windows == 0 && r.uva_gbps == 0);
    }
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, ENGRAM_GPU_REACH_MIN_BYTES, &p, &r), ENGRAM_GPU_PICK_UVA, &r, "uva",
           "first probe window");
    ask = (engram_gpu_path_ask_t){.gpu_path = ENGRAM_GPU_PATH_AUTO, .node_bytes = ENGRAM_GPU_REACH_MIN_BYTES + 1};
    CHECK(engram_gpu_path_needs_probe(&ask));
}

/* The window a size selects: the smallest that holds it; its rates in
 * the report beside every window's. */
static void test_choice_by_size(void)
{
    /* uva fast within 512 MiB, then falls; host_gather flat between */
    const double u[] = {48, 47, 45, 20, 9}, h[] = {35, 35, 34, 34, 33};
    engram_gpu_probe_t p = probe_of(u, h, 5);
    CHECK(p.reach_bytes == 512 * MiB && p.probed_bytes == 2 * GiB && p.gbps_first == 48);
    CHECK(p.share_past > 20.0 / 48 - 1e-9 && p.share_past < 20.0 / 48 + 1e-9);
    engram_gpu_path_report_t r;
    static const struct {
        uint64_t bytes, window;
        const char *path;
    } cases[] = {
        {64 * MiB + 1, 256 * MiB, "uva"},       {256 * MiB, 256 * MiB, "uva"},
        {256 * MiB + 1, 512 * MiB, "uva"},      {512 * MiB, 512 * MiB, "uva"},
        {512 * MiB + 1, 1 * GiB, "host_gather"}, {2 * GiB, 2 * GiB, "host_gather"},
        {64 * GiB, 2 * GiB, "host_gather"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool uva = strcmp(cases[i].path, "uva") == 0;
        expect(decide(ENGRAM_GPU_PATH_AUTO, 0, cases[i].bytes, &p, &r),
               uva ? ENGRAM_GPU_PICK_UVA : ENGRAM_GPU_PICK_HOST_GATHER, &r, cases[i].path,
               uva ? "uva's measured rate is at least" : "host_gather's measured rate");
        CHECK(r.window_bytes == cases[i].window);
        int w = 0;
        while (p.window[w].bytes != cases[i].window)
            w++;
        CHECK(r.uva_gbps == u[w] && r.host_gather_gbps == h[w] && r.h2d_gbps == 50);
        CHECK(r.windows == 5 && r.gather_threads == 15 && r.reach_bytes == 512 * MiB && r.probed_bytes == 2 * GiB);
        CHECK(memcmp(r.window, p.window, 5 * sizeof(r.window[0])) == 0);
    }
    /* the H100 the rule is for: uva slower in every window */
    const double u2[] = {28, 28, 27, 26, 12}, h2[] = {36, 36, 36, 35, 35};
    p = probe_of(u2, h2, 5);
    for (uint64_t b = 65 * MiB; b <= 64 * GiB; b *= 2) {
        expect(decide(ENGRAM_GPU_PATH_AUTO, 0, b, &p, &r), ENGRAM_GPU_PICK_HOST_GATHER, &r, "host_gather",
               "host_gather's measured rate");
        CHECK(r.uva_gbps > 0 && r.host_gather_gbps > r.uva_gbps);
    }
    /* fewer windows (a probe up to the table's size): the last one is the table's */
    const double u3[] = {50, 50}, h3[] = {30, 30};
    p = probe_of(u3, h3, 2);
    p.window[1].bytes = 300 * MiB;
    engram_gpu_probe_reach(&p);
    CHECK(p.probed_bytes == 300 * MiB && p.reach_bytes == 300 * MiB && p.share_past == 0);
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 300 * MiB, &p, &r), ENGRAM_GPU_PICK_UVA, &r, "uva", "at least");
    CHECK(r.window_bytes == 300 * MiB);
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 100 * MiB, &p, &r), ENGRAM_GPU_PICK_UVA, &r, "uva", "at least");
    CHECK(r.window_bytes == 300 * MiB);
}

/* uva must beat host_gather by the margin; a tie is host_gather's. */
static void test_margin(void)
{
    engram_gpu_path_report_t r;
    const double hg = 40;
    struct {
        double uva;
        engram_gpu_pick_t want;
    } cases[] = {
        {hg, ENGRAM_GPU_PICK_HOST_GATHER},                                    /* a tie */
        {hg * (1 + ENGRAM_GPU_AUTO_MARGIN / 2), ENGRAM_GPU_PICK_HOST_GATHER}, /* ahead, within the margin */
        {hg * (1 + ENGRAM_GPU_AUTO_MARGIN), ENGRAM_GPU_PICK_UVA},             /* exactly the margin */
        {hg * (1 + 2 * ENGRAM_GPU_AUTO_MARGIN), ENGRAM_GPU_PICK_UVA},
        {hg * 0.5, ENGRAM_GPU_PICK_HOST_GATHER},
    };
    CHECK(ENGRAM_GPU_AUTO_MARGIN > 0 && ENGRAM_GPU_AUTO_MARGIN < 0.05);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const double u[] = {cases[i].uva, cases[i].uva}, h[] = {hg, hg};
        engram_gpu_probe_t p = probe_of(u, h, 2);
        expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 256 * MiB, &p, &r), cases[i].want, &r,
               cases[i].want == ENGRAM_GPU_PICK_UVA ? "uva" : "host_gather", "measured rate");
        CHECK(r.uva_gbps == cases[i].uva && r.host_gather_gbps == hg);
    }
}

/* Past the largest window probed: its rates where uva had fallen there,
 * host_gather where uva still held (its rate beyond is unknown). */
static void test_beyond(void)
{
    engram_gpu_path_report_t r;
    /* uva held in every window up to 2 GiB, and beats host_gather there */
    const double held[] = {50, 50, 49, 48, 47}, h[] = {30, 30, 30, 30, 30};
    engram_gpu_probe_t p = probe_of(held, h, 5);
    CHECK(p.reach_bytes == 2 * GiB && p.share_past == 0);
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 2 * GiB, &p, &r), ENGRAM_GPU_PICK_UVA, &r, "uva", "at least");
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 2 * GiB + 1, &p, &r), ENGRAM_GPU_PICK_HOST_GATHER, &r, "host_gather",
           "where uva still held its rate");
    CHECK(r.window_bytes == 2 * GiB && r.uva_gbps == 0 && r.host_gather_gbps == 30);
    /* a probe that stopped early (up to 512 MiB, uva already fallen):
     * that window's rates decide, either way */
    const double fell[] = {50, 50, 36}, hs[] = {30, 30, 30}, hf[] = {40, 40, 40};
    p = probe_of(fell, hs, 3);
    CHECK(p.reach_bytes == 256 * MiB && p.probed_bytes == 512 * MiB);
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 16 * GiB, &p, &r), ENGRAM_GPU_PICK_UVA, &r, "uva", "at least");
    CHECK(r.window_bytes == 512 * MiB && r.uva_gbps == 36);
    p = probe_of(fell, hf, 3);
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 16 * GiB, &p, &r), ENGRAM_GPU_PICK_HOST_GATHER, &r, "host_gather",
           "host_gather's measured rate");
}

/* A rate missing: without host_gather's the reach decides; without uva's
 * host_gather; without any window, uva. */
static void test_missing(void)
{
    engram_gpu_path_report_t r;
    const double u[] = {50, 49, 20, 10, 5}, none[] = {0, 0, 0, 0, 0};
    engram_gpu_probe_t p = probe_of(u, none, 5);
    CHECK(p.reach_bytes == 256 * MiB);
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 256 * MiB, &p, &r), ENGRAM_GPU_PICK_UVA, &r, "uva",
           "host_gather's rate was not measured (its probe failed, logged), and the node's rows are within");
    CHECK(r.host_gather_gbps == 0 && r.uva_gbps == 49);
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 256 * MiB + 1, &p, &r), ENGRAM_GPU_PICK_HOST_GATHER, &r, "host_gather",
           "host_gather's rate was not measured (its probe failed, logged), and the node's rows pass");
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 64 * GiB, &p, &r), ENGRAM_GPU_PICK_HOST_GATHER, &r, "host_gather",
           "pass the GPU's measured reach");
    /* uva's rate missing in a window (made up: the probe errs instead) */
    const double u0[] = {50, 0}, h[] = {30, 30};
    p = probe_of(u0, h, 2);
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 256 * MiB, &p, &r), ENGRAM_GPU_PICK_HOST_GATHER, &r, "host_gather",
           "uva's rate was not measured");
    /* nothing measured */
    p = (engram_gpu_probe_t){0};
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 256 * MiB, &p, &r), ENGRAM_GPU_PICK_UVA, &r, "uva",
           "nothing was measured");
    expect(decide(ENGRAM_GPU_PATH_AUTO, 0, 256 * MiB, NULL, &r), ENGRAM_GPU_PICK_UVA, &r, "uva",
           "nothing was measured");
    engram_gpu_probe_reach(&p);
    CHECK(p.reach_bytes == 0 && p.probed_bytes == 0 && p.gbps_first == 0);
}

/* The log's and tools' line: the size, both rates and the reason. */
static void test_explain(void)
{
    engram_gpu_path_report_t r;
    char line[512];
    const double u[] = {28.6, 28.1}, h[] = {36.2, 35.9};
    engram_gpu_probe_t p = probe_of(u, h, 2);
    decide(ENGRAM_GPU_PATH_AUTO, 0, GiB / 4, &p, &r);
    engram_gpu_path_explain(&r, GiB / 4, line, sizeof(line));
    CHECK(strstr(line, "host_gather for 0.25 GiB of rows per node (gpu_path=auto: host_gather's measured rate") ==
          line);
    CHECK(strstr(line, "rates from the 256 MiB window: uva 28.1 GB/s, host_gather 35.9 GB/s, host-to-device copy "
                       "50.0 GB/s; uva's reach into host memory 256 MiB)") != NULL);
    const double none[] = {0, 0};
    p = probe_of(u, none, 2);
    decide(ENGRAM_GPU_PATH_AUTO, 0, GiB / 4, &p, &r);
    engram_gpu_path_explain(&r, GiB / 4, line, sizeof(line));
    CHECK(strstr(line, "uva 28.1 GB/s, host_gather not measured") != NULL);
    decide(ENGRAM_GPU_PATH_UVA, 0, GiB, NULL, &r);
    engram_gpu_path_explain(&r, GiB, line, sizeof(line));
    CHECK(strcmp(line, "uva for 1.00 GiB of rows per node (gpu_path=uva)") == 0);
    /* a short buffer is cut, not overrun */
    char small[8];
    memset(small, 'x', sizeof(small));
    engram_gpu_path_explain(&r, GiB, small, 4);
    CHECK(strcmp(small, "uva") == 0 && small[4] == 'x');
}

int main(void)
{
    test_without_probe();
    test_choice_by_size();
    test_margin();
    test_beyond();
    test_missing();
    test_explain();
    printf("path_choice_test: ok\n");
    return 0;
}
