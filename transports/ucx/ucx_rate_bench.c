/* Transport-level get rate: rank 0 gets rows from rank 1 through
 * engram_ucx_ops in batches (one flush per batch, as a fetch does), rank 1
 * serves (owner progress) until rank 0 is done. Prints gets/s of the
 * median batch. Shows what the UCX path itself costs, without the engram
 * layer's routing or the fork group's barrier polls.
 *   ucx_rate_bench [--rows-per-batch N] [--batches N] [--row-bytes N]
 *                  [--seg-mb N] [--window N] [--flush-depth N] [--queues N]
 * UCX_TLS chooses the UCX transports (default here: posix). */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "engram/plugin/deadline.h"
#include "hal/config.h"
#include "hal/group.h"
#include "hal/registry.h"
#include "memory/host_segment.h"
#include "tests/check.h"
#include "transports/ucx/ucx.h"

static const engram_transport_ops_t *ops = &engram_ucx_ops;

typedef struct opts {
    uint32_t rows_per_batch, batches, row_bytes, seg_mb, window, flush_depth, queues;
} opts_t;

typedef struct shared {
    int done;    /* rank 0 finished its gets */
    double rate; /* gets/s of the median batch, from rank 0 */
} shared_t;

typedef struct bench_arg {
    opts_t o;
    shared_t *sh;
} bench_arg_t;

static double now_s(void)
{
    return (double)engram_now_ns() * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static engram_segment_t *segment(size_t bytes)
{
    engram_segment_params_t p = {.size = sizeof(p), .bytes = bytes, .numa_node = -1, .huge = ENGRAM_HUGE_AUTO};
    engram_segment_t *seg;
    CHECK_OK(engram_host_segment_ops.alloc(&p, &seg));
    memset(seg->addr, 0x5a, seg->size);
    return seg;
}

static void set_int(engram_config_t *cfg, const char *key, uint32_t v)
{
    char num[32];
    snprintf(num, sizeof(num), "%u", v);
    CHECK_OK(engram_config_set(cfg, key, num));
}

/* One batch: rows spread over the queues, the doorbell every
 * flush_depth-th get per queue, then one flush per queue, tested until done. */
static void batch(engram_transport_t *t, const opts_t *o, engram_region_t *remote, engram_region_t *local,
                  const uint64_t *src)
{
    engram_request_t *reqs[64];
    for (uint32_t i = 0; i < o->rows_per_batch; i++) {
        int q = (int)((uint64_t)i * o->queues / o->rows_per_batch);
        unsigned flags = (i + 1) % o->flush_depth == 0 ? 0 : ENGRAM_GET_AGGREGATE;
        CHECK_OK(ops->get(t, q, 1, remote, src[i], local, (uint64_t)i * o->row_bytes, o->row_bytes, flags));
    }
    for (uint32_t q = 0; q < o->queues; q++)
        CHECK_OK(ops->flush(t, (int)q, 1, &reqs[q]));
    double deadline = now_s() + 20;
    for (uint32_t q = 0; q < o->queues; q++) {
        engram_status_t st;
        while ((st = ops->test(t, reqs[q])) == ENGRAM_INPROGRESS)
            CHECK(now_s() < deadline);
        CHECK_OK(st);
        ops->request_free(t, reqs[q]);
    }
}

static void client(engram_transport_t *t, const opts_t *o, engram_region_t *remote, engram_region_t *local,
                   shared_t *sh)
{
    uint64_t rows = ((uint64_t)o->seg_mb << 20) / o->row_bytes;
    uint64_t *src = malloc(o->rows_per_batch * sizeof(*src));
    double *secs = malloc(o->batches * sizeof(*secs));
    CHECK(src != NULL && secs != NULL);
    uint64_t x = 88172645463325252ull;
    for (int b = -2; b < (int)o->batches; b++) { /* two warm-up batches */
        for (uint32_t i = 0; i < o->rows_per_batch; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            src[i] = (x % rows) * o->row_bytes;
        }
        double t0 = now_s();
        batch(t, o, remote, local, src);
        if (b >= 0)
            secs[b] = now_s() - t0;
    }
    qsort(secs, o->batches, sizeof(*secs), cmp_double);
    sh->rate = o->rows_per_batch / secs[o->batches / 2];
    free(secs);
    free(src);
}

static int rank_main(engram_group_t *group, void *varg)
{
    bench_arg_t *arg = varg;
    const opts_t *o = &arg->o;
    int rank = engram_group_rank(group);
    engram_config_t *cfg;
    CHECK_OK(engram_config_create(&cfg));
    set_int(cfg, "num_qps", o->queues);
    set_int(cfg, "ucx_window", o->window);
    engram_transport_t *t;
    CHECK_OK(engram_transport_open(ops, group, cfg, &t));
    engram_segment_t *table = segment((size_t)o->seg_mb << 20);
    engram_segment_t *dst = segment((size_t)o->rows_per_batch * o->row_bytes);
    engram_region_t *remote, *local;
    CHECK_OK(ops->reg_symmetric(t, table, ENGRAM_REG_RANK, &remote));
    CHECK_OK(ops->reg_local(t, dst, &local));
    CHECK_OK(engram_group_barrier(group));
    if (rank == 0) {
        client(t, o, remote, local, arg->sh);
        __atomic_store_n(&arg->sh->done, 1, __ATOMIC_SEQ_CST);
    } else {
        double deadline = now_s() + 300;
        while (!__atomic_load_n(&arg->sh->done, __ATOMIC_SEQ_CST)) {
            CHECK_OK(ops->progress(t));
            CHECK(now_s() < deadline);
        }
    }
    CHECK_OK(engram_group_barrier(group));
    ops->dereg(t, local);
    ops->dereg(t, remote);
    ops->close(t);
    engram_host_segment_ops.free(dst);
    engram_host_segment_ops.free(table);
    engram_config_destroy(cfg);
    return 0;
}

static uint32_t parse(const char *name, const char *s, uint32_t min, uint32_t max)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "ucx_rate_bench: %s wants %u..%u, got '%s'\n", name, min, max, s);
        exit(2);
    }
    return (uint32_t)v;
}

int main(int argc, char **argv)
{
    bench_arg_t arg = {.o = {.rows_per_batch = 12288, .batches = 50, .row_bytes = 256, .seg_mb = 128,
                             .window = 256, .flush_depth = 768, .queues = 4}};
    static const struct option longopts[] = {
        {"rows-per-batch", 1, 0, 'r'}, {"batches", 1, 0, 'b'}, {"row-bytes", 1, 0, 's'}, {"seg-mb", 1, 0, 'm'},
        {"window", 1, 0, 'w'},         {"flush-depth", 1, 0, 'f'}, {"queues", 1, 0, 'q'}, {0, 0, 0, 0}};
    opts_t *o = &arg.o;
    for (int c; (c = getopt_long(argc, argv, "", longopts, NULL)) != -1;) {
        switch (c) {
        case 'r': o->rows_per_batch = parse("--rows-per-batch", optarg, 1, 1u << 24); break;
        case 'b': o->batches = parse("--batches", optarg, 1, 1u << 20); break;
        case 's': o->row_bytes = parse("--row-bytes", optarg, 1, 1u << 20); break;
        case 'm': o->seg_mb = parse("--seg-mb", optarg, 1, 1u << 16); break;
        case 'w': o->window = parse("--window", optarg, 1, 65536); break;
        case 'f': o->flush_depth = parse("--flush-depth", optarg, 1, 1u << 20); break;
        case 'q': o->queues = parse("--queues", optarg, 1, 64); break;
        default: return 2;
        }
    }
    CHECK(((uint64_t)o->seg_mb << 20) >= o->row_bytes);
    setenv("UCX_TLS", "posix", 0);
    arg.sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(arg.sh != MAP_FAILED);
    int codes[2];
    CHECK_OK(engram_group_fork_run(2, 0, rank_main, &arg, codes));
    printf("UCX_TLS=%s rows/batch=%u row_bytes=%u seg=%uMB window=%u flush_depth=%u queues=%u: %.3f Mgets/s\n",
           getenv("UCX_TLS"), o->rows_per_batch, o->row_bytes, o->seg_mb, o->window, o->flush_depth, o->queues,
           arg.sh->rate / 1e6);
    munmap(arg.sh, sizeof(shared_t));
    return 0;
}
