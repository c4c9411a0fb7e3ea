/* engram_bench: fetch rate of an engram table against a memcpy gather of
 * the same rows, measured in the same run. Defaults are DeepEP
 * test_engram's: 4 ranks, 524288 entries per rank, 256-byte rows (128
 * bf16), 512 tokens x 24 entries. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/log.h"
#include "tools/bench/bench.h"
#include "tools/num_flag.h"

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
            "  --indices FILE         replay a trace instead: .npy int32/int64 [steps, tokens,\n"
            "                         entries_per_token] (shape from the file), or raw\n"
            "                         little-endian int64 shaped by --tokens/--entries-per-token;\n"
            "                         rank r's fetch s is step (r + s) mod steps\n"
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
    bool dist_set;
    index_trace_want_t want; /* what --tokens / --entries-per-token set */
    const char *indices;
    index_trace_t trace;
} bench_opts_t;

static uint64_t num(const char *opt, uint64_t min, uint64_t max)
{
    return num_flag("engram_bench", opt, optarg, min, max);
}

static void parse(int argc, char **argv, bench_opts_t *o)
{
    static const struct option longs[] = {
        {"ranks", 1, 0, 'r'},   {"local-size", 1, 0, 'l'}, {"entries", 1, 0, 'e'},     {"row-bytes", 1, 0, 'b'},
        {"tokens", 1, 0, 't'},  {"entries-per-token", 1, 0, 'k'}, {"transport", 1, 0, 'T'}, {"mode", 1, 0, 'm'},
        {"fp8", 0, 0, 'f'},     {"sf-col-major", 0, 0, 'c'}, {"dist", 1, 0, 'd'},      {"iters", 1, 0, 'i'},
        {"warmup", 1, 0, 'w'},  {"concurrent", 0, 0, 'C'}, {"sweep", 0, 0, 'S'},       {"seed", 1, 0, 's'},
        {"json", 0, 0, 'j'},    {"indices", 1, 0, 'I'},    {"help", 0, 0, 'h'},       {0, 0, 0, 0}};
    bench_case_t *c = &o->base;
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'r': c->ranks = (int)num("--ranks", 1, INT32_MAX); break;
        case 'l': c->local_size = (int)num("--local-size", 0, INT32_MAX); break;
        case 'e': c->entries_per_rank = num("--entries", 1, INT64_MAX); break;
        case 'b': c->row_bytes = (uint32_t)num("--row-bytes", 1, UINT32_MAX); break;
        case 't':
            c->tokens = (uint32_t)num("--tokens", 1, UINT32_MAX);
            o->want.tokens_set = true;
            break;
        case 'k':
            c->entries_per_token = (uint32_t)num("--entries-per-token", 1, UINT32_MAX);
            o->want.entries_per_token_set = true;
            break;
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
            c->dist = strcmp(optarg, "zipf") == 0 ? TABLE_GEN_ZIPF : TABLE_GEN_UNIFORM;
            o->dist_set = true;
            break;
        case 'I': o->indices = optarg; break;
        case 'i': c->iters = (int)num("--iters", 1, INT32_MAX); break;
        case 'w': c->warmup = (int)num("--warmup", 0, INT32_MAX); break;
        case 'C': c->concurrent = true; break;
        case 'S': o->sweep = true; break;
        case 's': c->seed = num("--seed", 0, UINT64_MAX); break;
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
    /* fetch numbers run from 0 to warmup + iters in an int */
    if ((uint64_t)c->iters + (uint64_t)c->warmup > INT32_MAX) {
        fprintf(stderr, "engram_bench: --iters %d + --warmup %d exceed %d\n", c->iters, c->warmup, INT32_MAX);
        exit(2);
    }
    if (c->local_size > 0 && c->ranks % c->local_size != 0) {
        fprintf(stderr, "engram_bench: --local-size %d must divide --ranks %d (nodes of equal size)\n",
                c->local_size, c->ranks);
        exit(2);
    }
    if (o->indices && o->dist_set) {
        fprintf(stderr, "engram_bench: --indices replays a trace; it does not take --dist\n");
        exit(2);
    }
}

/* Maps the trace and takes the fetch shape from it (every index checked
 * against the table's rows). */
static void open_trace(bench_opts_t *o)
{
    bench_case_t *c = &o->base;
    uint64_t total;
    if (__builtin_mul_overflow(c->entries_per_rank, (uint64_t)c->ranks, &total) || total > INT64_MAX) {
        fprintf(stderr, "engram_bench: --entries %llu x --ranks %d rows exceed int64 indices\n",
                (unsigned long long)c->entries_per_rank, c->ranks);
        exit(2);
    }
    o->want.tokens = c->tokens;
    o->want.entries_per_token = c->entries_per_token;
    o->want.total_rows = total;
    char err[512];
    if (index_trace_open(o->indices, &o->want, &o->trace, err, sizeof(err)) != 0) {
        fprintf(stderr, "engram_bench: %s\n", err);
        exit(2);
    }
    c->trace = &o->trace;
    c->tokens = o->trace.tokens;
    c->entries_per_token = o->trace.entries_per_token;
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
                st != ENGRAM_OK || r.error[0] == '\0' ? engram_last_error() : r.error);
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
    if (o.indices)
        open_trace(&o);
    bench_case_t cases[16];
    int n = 0;
    int modes = o.sweep || o.both_modes ? 2 : 1;
    int dtypes = o.sweep ? 3 : 1;
    int dists = o.sweep && !o.indices ? 2 : 1;
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
                    c.dist = s == 1 ? TABLE_GEN_ZIPF : TABLE_GEN_UNIFORM;
                cases[n++] = c;
            }
    int failed = 0;
    for (int i = 0; i < n; i++)
        failed += run_one(&o, cases[i], i, n);
    if (o.indices)
        index_trace_close(&o.trace);
    return failed ? 1 : 0;
}
