/* engram_bench: fetch rate of an engram table against a memcpy gather of
 * the same rows, measured in the same run. Defaults are DeepEP
 * test_engram's: 4 ranks, 524288 entries per rank, 256-byte rows (128
 * bf16), 512 tokens x 24 entries. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/log.h"
#include "tools/bench/bench.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: engram_bench [options]\n"
            "  --ranks N              ranks (forked processes)            [4]\n"
            "  --local-size N         ranks per emulated node; 0 = all    [0; hybrid: ranks/2]\n"
            "  --entries N            entries per rank                    [524288]\n"
            "  --row-bytes N          bytes per row                       [256]\n"
            "  --tokens N             tokens per fetch                    [512]\n"
            "  --entries-per-token N  rows per token                      [24]\n"
            "  --transport NAME       auto|loopback|ucx|...               [config: transport]\n"
            "  --mode direct|hybrid|both                                  [direct]\n"
            "  --fp8                  fp8 rows with scales (row-major)\n"
            "  --sf-col-major         with --fp8: TMA-aligned column-major scales\n"
            "  --dist uniform|zipf    index distribution                  [uniform]\n"
            "  --iters N              timed iterations, new indices each  [200]\n"
            "  --warmup N             untimed iterations first            [20]\n"
            "  --concurrent           time all ranks at once (aggregate)\n"
            "  --sweep                every mode x dtype x dist combination\n"
            "  --seed N               index seed                          [1]\n"
            "  --json                 one JSON object per case\n");
}

typedef struct bench_opts {
    bench_case_t base;
    bool both_modes, sweep, json;
} bench_opts_t;

static long parse_num(const char *opt, const char *v, long min)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < min) {
        fprintf(stderr, "engram_bench: %s needs an integer >= %ld, got '%s'\n", opt, min, v);
        exit(2);
    }
    return x;
}

static void parse(int argc, char **argv, bench_opts_t *o)
{
    static const struct option longs[] = {
        {"ranks", 1, 0, 'r'},   {"local-size", 1, 0, 'l'}, {"entries", 1, 0, 'e'},     {"row-bytes", 1, 0, 'b'},
        {"tokens", 1, 0, 't'},  {"entries-per-token", 1, 0, 'k'}, {"transport", 1, 0, 'T'}, {"mode", 1, 0, 'm'},
        {"fp8", 0, 0, 'f'},     {"sf-col-major", 0, 0, 'c'}, {"dist", 1, 0, 'd'},      {"iters", 1, 0, 'i'},
        {"warmup", 1, 0, 'w'},  {"concurrent", 0, 0, 'C'}, {"sweep", 0, 0, 'S'},       {"seed", 1, 0, 's'},
        {"json", 0, 0, 'j'},    {"help", 0, 0, 'h'},       {0, 0, 0, 0}};
    bench_case_t *c = &o->base;
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'r': c->ranks = (int)parse_num("--ranks", optarg, 1); break;
        case 'l': c->local_size = (int)parse_num("--local-size", optarg, 0); break;
        case 'e': c->entries_per_rank = (uint64_t)parse_num("--entries", optarg, 1); break;
        case 'b': c->row_bytes = (uint32_t)parse_num("--row-bytes", optarg, 1); break;
        case 't': c->tokens = (uint32_t)parse_num("--tokens", optarg, 0); break;
        case 'k': c->entries_per_token = (uint32_t)parse_num("--entries-per-token", optarg, 1); break;
        case 'T': c->transport = optarg; break;
        case 'm':
            if (strcmp(optarg, "direct") && strcmp(optarg, "hybrid") && strcmp(optarg, "both")) {
                fprintf(stderr, "engram_bench: --mode is direct|hybrid|both, got '%s'\n", optarg);
                exit(2);
            }
            c->hybrid = strcmp(optarg, "hybrid") == 0;
            o->both_modes = strcmp(optarg, "both") == 0;
            break;
        case 'f': c->fp8 = true; break;
        case 'c': c->sf_col_major = true; break;
        case 'd':
            if (strcmp(optarg, "uniform") && strcmp(optarg, "zipf")) {
                fprintf(stderr, "engram_bench: --dist is uniform|zipf, got '%s'\n", optarg);
                exit(2);
            }
            c->dist = strcmp(optarg, "zipf") == 0 ? BENCH_DIST_ZIPF : BENCH_DIST_UNIFORM;
            break;
        case 'i': c->iters = (int)parse_num("--iters", optarg, 1); break;
        case 'w': c->warmup = (int)parse_num("--warmup", optarg, 0); break;
        case 'C': c->concurrent = true; break;
        case 'S': o->sweep = true; break;
        case 's': c->seed = (uint64_t)parse_num("--seed", optarg, 0); break;
        case 'j': o->json = true; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "engram_bench: unexpected argument '%s'\n", argv[optind]);
        exit(2);
    }
    if (c->sf_col_major && !c->fp8) {
        fprintf(stderr, "engram_bench: --sf-col-major needs --fp8\n");
        exit(2);
    }
}

/* The emulated node size a case runs with: hybrid needs at least 2 nodes. */
static int node_size(const bench_case_t *c, int requested)
{
    if (requested > 0)
        return requested;
    return c->hybrid && c->ranks % 2 == 0 ? c->ranks / 2 : c->ranks;
}

static int run_one(const bench_opts_t *o, bench_case_t c, int idx, int count)
{
    c.local_size = node_size(&c, o->base.local_size);
    if (count > 1)
        fprintf(stderr, "engram_bench: case %d/%d ...\n", idx + 1, count);
    bench_result_t r;
    memset(&r, 0, sizeof(r));
    engram_status_t st = bench_run_case(&c, &r);
    if (st != ENGRAM_OK || r.status != ENGRAM_OK) {
        fprintf(stderr, "engram_bench: case failed: %s %s\n", engram_status_str(st != ENGRAM_OK ? st : r.status),
                engram_last_error());
        return 1;
    }
    if (o->json)
        bench_print_json(&c, &r);
    else
        bench_print_human(&c, &r);
    return r.check_ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    bench_opts_t o = {.base = {.ranks = 4, .entries_per_rank = 524288, .row_bytes = 256, .tokens = 512,
                               .entries_per_token = 24, .iters = 200, .warmup = 20, .seed = 1}};
    parse(argc, argv, &o);
    bench_case_t cases[16];
    int n = 0;
    int modes = o.sweep || o.both_modes ? 2 : 1;
    int dtypes = o.sweep ? 3 : 1;
    int dists = o.sweep ? 2 : 1;
    for (int m = 0; m < modes; m++)
        for (int d = 0; d < dtypes; d++)
            for (int s = 0; s < dists; s++) {
                bench_case_t c = o.base;
                if (modes == 2)
                    c.hybrid = m == 1;
                if (dtypes == 3) {
                    c.fp8 = d > 0;
                    c.sf_col_major = d == 2;
                }
                if (dists == 2)
                    c.dist = s == 1 ? BENCH_DIST_ZIPF : BENCH_DIST_UNIFORM;
                cases[n++] = c;
            }
    int failed = 0;
    for (int i = 0; i < n; i++)
        failed += run_one(&o, cases[i], i, n);
    return failed ? 1 : 0;
}
