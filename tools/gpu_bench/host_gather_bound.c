/* host_gather_bound: what this host's CPUs can feed gpu_path=host_gather.
 * Threads gather random rows from a table of --table-gib GiB in this
 * process's memory (2 MiB hugetlb pages with --huge, else 4 KiB pages)
 * into pinned staging, the work of the path's pool: alone, then beside a
 * contiguous pinned host-to-device copy looping on another buffer (the copy
 * engine reading host memory, as the path's copies do). Every rate is
 * printed over the same run's copy alone, as engram_gpu_bench prints
 * host_gather's: the gather beside the copy is the most host_gather can
 * deliver from a table of that size on this host, whatever its pipeline.
 * Medians of 7 rounds of 786432 rows (4 fetches of 8192 x 24). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tools/num_flag.h"

enum { ROUNDS = 7, ROWS = 4 * 8192 * 24, PREFETCH = 8, MAX_THREADS = 256, COPY_MIB = 64 };

typedef struct gather {
    const char *table;
    uint64_t table_rows;
    uint32_t row_bytes;
    const uint64_t *idx; /* [ROWS] */
    char *stage;         /* pinned [ROWS][row_bytes] */
    int threads;
    pthread_barrier_t start, end;
    atomic_bool quit;
} gather_t;

typedef struct worker {
    gather_t *g;
    int id;
} worker_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die_cuda(const char *what, cudaError_t ce)
{
    fprintf(stderr, "host_gather_bound: %s: %s\n", what, cudaGetErrorString(ce));
    exit(1);
}

/* A thread's share of the rows, gathered as the pool does: sources
 * prefetched PREFETCH rows ahead (random rows are DRAM misses). */
static void *gather_main(void *arg)
{
    const worker_t *w = arg;
    gather_t *g = w->g;
    const uint64_t lo = (uint64_t)ROWS * (uint64_t)w->id / (uint64_t)g->threads;
    const uint64_t hi = (uint64_t)ROWS * (uint64_t)(w->id + 1) / (uint64_t)g->threads;
    for (;;) {
        pthread_barrier_wait(&g->start);
        if (atomic_load(&g->quit))
            return NULL;
        for (uint64_t i = lo; i < hi; i++) {
            if (i + PREFETCH < hi)
                for (uint32_t o = 0; o < g->row_bytes; o += 64)
                    __builtin_prefetch(g->table + g->idx[i + PREFETCH] * g->row_bytes + o, 0, 3);
            memcpy(g->stage + i * g->row_bytes, g->table + g->idx[i] * g->row_bytes, g->row_bytes);
        }
        pthread_barrier_wait(&g->end);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* GB/s of one gather of every row by every thread; median of ROUNDS. */
static double time_gather(gather_t *g)
{
    double r[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        double t0 = now_s();
        pthread_barrier_wait(&g->start);
        pthread_barrier_wait(&g->end);
        r[k] = (double)ROWS * g->row_bytes / (now_s() - t0) / 1e9;
    }
    qsort(r, ROUNDS, sizeof(r[0]), cmp_double);
    return r[ROUNDS / 2];
}

typedef struct copier {
    cudaStream_t s;
    char *host, *dev;
    atomic_bool stop;
    double gbs;
} copier_t;

static void *copy_main(void *arg)
{
    copier_t *c = arg;
    const size_t bytes = (size_t)COPY_MIB << 20;
    uint64_t n = 0;
    double t0 = now_s();
    while (!atomic_load(&c->stop)) {
        cudaError_t ce = cudaMemcpyAsync(c->dev, c->host, bytes, cudaMemcpyHostToDevice, c->s);
        if (ce == cudaSuccess)
            ce = cudaStreamSynchronize(c->s);
        if (ce != cudaSuccess)
            die_cuda("the host-to-device copy", ce);
        n++;
    }
    c->gbs = (double)n * (double)bytes / (now_s() - t0) / 1e9;
    return NULL;
}

static void copy_start(copier_t *c, pthread_t *t)
{
    atomic_store(&c->stop, false);
    if (pthread_create(t, NULL, copy_main, c) != 0) {
        fprintf(stderr, "host_gather_bound: cannot start the copy thread\n");
        exit(1);
    }
}

static double copy_stop(copier_t *c, pthread_t t)
{
    atomic_store(&c->stop, true);
    pthread_join(t, NULL);
    return c->gbs;
}

static void usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: host_gather_bound [--table-gib G] [--threads N,..] [--row-bytes B] [--huge] [json_path]\n"
            "  --table-gib G   table size in GiB (1..1024, default 1)\n"
            "  --threads N,..  gathering threads (1..%d, default: the CPUs less one)\n"
            "  --row-bytes B   row size (16..4096, a multiple of 16, default 256)\n"
            "  --huge          the table on 2 MiB hugetlb pages (needs vm.nr_hugepages), else 4 KiB pages\n",
            MAX_THREADS);
    exit(rc);
}

int main(int argc, char **argv)
{
    uint64_t gib = 1, row_bytes = 256;
    bool huge = false;
    int threads[8], nthreads = 0;
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0)
            usage(0);
        else if (strcmp(a, "--table-gib") == 0 && v)
            gib = num_flag(argv[0], a, argv[++i], 1, 1024);
        else if (strcmp(a, "--row-bytes") == 0 && v)
            row_bytes = num_flag(argv[0], a, argv[++i], 16, 4096);
        else if (strcmp(a, "--huge") == 0)
            huge = true;
        else if (strcmp(a, "--threads") == 0 && v) {
            char *list = strdup(argv[++i]);
            for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
                if (nthreads == 8)
                    usage(2);
                threads[nthreads++] = (int)num_flag(argv[0], a, tok, 1, MAX_THREADS);
            }
            free(list);
        } else if (a[0] != '-' && json == NULL)
            json = a;
        else
            usage(2);
    }
    if (row_bytes % 16 != 0)
        usage(2);
    if (nthreads == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads[nthreads++] = cpus > 1 ? (int)(cpus - 1 < MAX_THREADS ? cpus - 1 : MAX_THREADS) : 1;
    }
    /* the copy thread sleeps in its synchronize: every core is the gather's */
    cudaError_t ce = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
    if (ce != cudaSuccess)
        die_cuda("cudaSetDeviceFlags", ce);
    const uint64_t bytes = gib << 30, rows = bytes / row_bytes;
    char *table = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (huge ? MAP_HUGETLB : 0),
                       -1, 0);
    if (table == MAP_FAILED) {
        fprintf(stderr, "host_gather_bound: cannot map %llu GiB%s\n", (unsigned long long)gib,
                huge ? " of 2 MiB pages (vm.nr_hugepages too low?)" : "");
        return 1;
    }
    if (!huge)
        (void)madvise(table, bytes, MADV_NOHUGEPAGE); /* 4 KiB pages, as engram's shards without hugetlb */
    memset(table, 0x5a, bytes);
    uint64_t *idx = malloc(ROWS * sizeof(*idx)), x = 88172645463325252ull;
    gather_t g = {.table = table, .table_rows = rows, .row_bytes = (uint32_t)row_bytes, .idx = idx};
    copier_t c = {0};
    if (idx == NULL) {
        fprintf(stderr, "host_gather_bound: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < ROWS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        idx[i] = x % rows;
    }
    if ((ce = cudaHostAlloc((void **)&g.stage, (size_t)ROWS * row_bytes, cudaHostAllocDefault)) != cudaSuccess ||
        (ce = cudaHostAlloc((void **)&c.host, (size_t)COPY_MIB << 20, cudaHostAllocDefault)) != cudaSuccess ||
        (ce = cudaMalloc((void **)&c.dev, (size_t)COPY_MIB << 20)) != cudaSuccess ||
        (ce = cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking)) != cudaSuccess)
        die_cuda("allocating the staging and the copy's buffers", ce);
    memset(g.stage, 0, (size_t)ROWS * row_bytes);
    memset(c.host, 1, (size_t)COPY_MIB << 20);
    pthread_t ct;
    copy_start(&c, &ct);
    sleep(1);
    const double h2d = copy_stop(&c, ct);
    FILE *out = json ? fopen(json, "a") : NULL;
    if (json && out == NULL) {
        fprintf(stderr, "host_gather_bound: cannot append to %s\n", json);
        return 1;
    }
    printf("host_gather_bound: %llu GiB table of %llu-B rows on %s pages; contiguous H2D alone %.1f GB/s\n",
           (unsigned long long)gib, (unsigned long long)row_bytes, huge ? "2 MiB" : "4 KiB", h2d);
    for (int n = 0; n < nthreads; n++) {
        g.threads = threads[n];
        atomic_store(&g.quit, false);
        pthread_barrier_init(&g.start, NULL, (unsigned)g.threads + 1);
        pthread_barrier_init(&g.end, NULL, (unsigned)g.threads + 1);
        pthread_t *tids = calloc((size_t)g.threads, sizeof(*tids));
        worker_t *ws = calloc((size_t)g.threads, sizeof(*ws));
        if (tids == NULL || ws == NULL) {
            fprintf(stderr, "host_gather_bound: out of memory\n");
            return 1;
        }
        for (int t = 0; t < g.threads; t++) {
            ws[t] = (worker_t){&g, t};
            if (pthread_create(&tids[t], NULL, gather_main, &ws[t]) != 0) {
                fprintf(stderr, "host_gather_bound: cannot start thread %d\n", t + 1);
                return 1;
            }
        }
        const double alone = time_gather(&g);
        copy_start(&c, &ct);
        const double beside = time_gather(&g);
        const double h2d_beside = copy_stop(&c, ct);
        atomic_store(&g.quit, true);
        pthread_barrier_wait(&g.start);
        for (int t = 0; t < g.threads; t++)
            pthread_join(tids[t], NULL);
        pthread_barrier_destroy(&g.start);
        pthread_barrier_destroy(&g.end);
        free(tids);
        free(ws);
        printf("  %3d threads: gather alone %6.1f GB/s (%.3f of H2D), beside the copy %6.1f GB/s (%.3f), "
               "the copy beside it %.1f GB/s\n",
               g.threads, alone, alone / h2d, beside, beside / h2d, h2d_beside);
        if (out)
            fprintf(out,
                    "{\"bench\": \"host_gather_bound\", \"table_gib\": %llu, \"row_bytes\": %llu, \"pages\": \"%s\", "
                    "\"threads\": %d, \"h2d_gbs\": %.3f, \"gather_gbs\": %.3f, \"gather_beside_copy_gbs\": %.3f, "
                    "\"copy_beside_gather_gbs\": %.3f, \"ratio_alone\": %.4f, \"ratio_beside\": %.4f}\n",
                    (unsigned long long)gib, (unsigned long long)row_bytes, huge ? "2M" : "4K", g.threads, h2d,
                    alone, beside, h2d_beside, alone / h2d, beside / h2d);
    }
    if (out)
        fclose(out);
    cudaFreeHost(g.stage);
    cudaFreeHost(c.host);
    cudaFree(c.dev);
    cudaStreamDestroy(c.s);
    free(idx);
    munmap(table, bytes);
    return 0;
}
