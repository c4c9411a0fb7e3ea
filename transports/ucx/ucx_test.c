/* UCX transport, CPU tier: 4 forked ranks on this host over the UCX_TLS
 * the test target sets. Transport-level gets from every peer with pattern
 * checks (direct and hybrid), a peer that exits with gets outstanding,
 * then alloc_symmetric: gets from UCX-provided memory, its failures
 * (agreed on every rank), and its owner exiting. With argument
 * "cma_unusable": open must fail cleanly. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "hal/config.h"
#include "hal/config_keys.h"
#include "hal/registry.h"
#include "hal/group.h"
#include "memory/host_segment.h"
#include "tests/check.h"
#include "transports/ucx/ucx.h"

#define NRANKS 4
#define NQUEUES 2
#define ROW 256
#define ROWS_PER_PEER 96 /* per queue */
#define SEG_BYTES ((size_t)64 << 10)
#define EXIT_TIMEOUT_MS 3000
#define EXIT_ROWS 8 /* below the window: all outstanding when the victim exits */

static const engram_transport_ops_t *ops = &engram_ucx_ops;

/* Counters shared by the forked ranks (mapped before the fork): ranks that
 * finished their gets, so owners keep serving until everyone is done. */
typedef struct shared {
    int done;
    int warm;
    int issued;
    int freed;  /* peer exit: rank 0 deregistered and freed its table */
    int late;   /* peer exit: ranks that posted gets to rank 0 after that */
    int served; /* peer exit: rank 0 progressed past those gets */
    int victim_pid; /* alloc peer death: the rank that exits */
} shared_t;

typedef struct scenario {
    shared_t *shared;
    int mode; /* ENGRAM_MODE_* */
    int local_size;
} scenario_t;

static uint64_t now_ms(void)
{
    return (uint64_t)engram_now_ms();
}

/* Word w of rank r's segment: distinct in every rank and position. */
static uint32_t pattern(int rank, size_t word)
{
    return ((uint32_t)rank << 24) ^ (uint32_t)(word * 2654435761u);
}

static engram_config_t *config_for(int mode, int timeout_ms)
{
    engram_config_t *cfg;
    CHECK_OK(engram_config_create(&cfg));
    char num[32];
    snprintf(num, sizeof(num), "%d", NQUEUES);
    CHECK_OK(engram_config_set(cfg, "num_qps", num));
    CHECK_OK(engram_config_set(cfg, "mode", mode == ENGRAM_MODE_HYBRID ? "hybrid" : "direct"));
    snprintf(num, sizeof(num), "%d", timeout_ms);
    CHECK_OK(engram_config_set(cfg, "timeout_ms", num));
    /* Small window: the drain path runs too. */
    CHECK_OK(engram_config_set(cfg, "ucx_window", "16"));
    return cfg;
}

static engram_segment_t *table_segment(int rank)
{
    engram_segment_params_t params = {.size = sizeof(params), .bytes = SEG_BYTES, .numa_node = -1,
                                      .huge = ENGRAM_HUGE_OFF};
    engram_segment_t *seg;
    CHECK_OK(engram_host_segment_ops.alloc(&params, &seg));
    CHECK(seg->size == SEG_BYTES);
    uint32_t *w = seg->addr;
    for (size_t i = 0; i < seg->size / sizeof(*w); i++)
        w[i] = pattern(rank, i);
    return seg;
}

/* Owners serve gets (active-message gets) until every rank finished its own. */
static void serve_until_all(engram_transport_t *t, int *counter, int nranks)
{
    __atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
    uint64_t deadline = now_ms() + 20000;
    while (__atomic_load_n(counter, __ATOMIC_SEQ_CST) < nranks) {
        CHECK_OK(ops->progress(t));
        CHECK(now_ms() < deadline);
    }
}

static void wait_all(engram_transport_t *t, engram_request_t **reqs, int n)
{
    uint64_t deadline = now_ms() + 20000;
    for (int i = 0; i < n; i++) {
        engram_status_t st;
        while ((st = ops->test(t, reqs[i])) == ENGRAM_INPROGRESS) {
            CHECK_OK(ops->progress(t));
            CHECK(now_ms() < deadline);
        }
        CHECK_OK(st);
        ops->request_free(t, reqs[i]);
    }
}

/* Gets ROWS_PER_PEER rows from every peer on every queue of `remote`
 * (hybrid: node spans of local_size segments) into a fresh destination,
 * then checks each row against the owner's pattern. */
static void gets_checked(engram_transport_t *t, int rank, engram_region_t *remote, bool hybrid, int local_size)
{
    int npeers = hybrid ? NRANKS / local_size : NRANKS;
    size_t span_bytes = hybrid ? (size_t)local_size * SEG_BYTES : SEG_BYTES;
    size_t nrows = (size_t)NQUEUES * (size_t)npeers * ROWS_PER_PEER;
    engram_segment_params_t params = {.size = sizeof(params), .bytes = nrows * ROW, .numa_node = -1,
                                      .huge = ENGRAM_HUGE_OFF};
    engram_segment_t *dst;
    CHECK_OK(engram_host_segment_ops.alloc(&params, &dst));
    memset(dst->addr, 0xee, dst->size);
    engram_region_t *local;
    CHECK_OK(ops->reg_local(t, dst, &local));

    /* Bad offsets are refused, not turned into addresses. */
    CHECK_STATUS(ops->get(t, 0, 0, remote, span_bytes - ROW + 1, local, 0, ROW, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->get(t, 0, 0, remote, 0, local, dst->size - ROW + 8, ROW, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->get(t, 0, npeers, remote, 0, local, 0, ROW, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->get(t, NQUEUES, 0, remote, 0, local, 0, ROW, 0), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->get(t, 0, -1, remote, 0, local, 0, ROW, 0), ENGRAM_ERR_INVALID);

    size_t *src = malloc(nrows * sizeof(*src));
    CHECK(src != NULL);
    size_t span_rows = span_bytes / ROW;
    size_t row = 0;
    for (int q = 0; q < NQUEUES; q++) {
        for (int p = 0; p < npeers; p++) {
            for (int i = 0; i < ROWS_PER_PEER; i++, row++) {
                src[row] = (row * 7919 + (size_t)rank * 104729) % span_rows;
                /* Every 8th get rings the doorbell, as the engram layer's flush_depth does. */
                CHECK_OK(ops->get(t, q, p, remote, src[row] * ROW, local, row * ROW, ROW,
                                  i % 8 == 7 ? 0 : ENGRAM_GET_AGGREGATE));
            }
        }
    }
    engram_request_t **reqs = calloc((size_t)NQUEUES * (size_t)npeers, sizeof(*reqs));
    CHECK(reqs != NULL);
    for (int q = 0; q < NQUEUES; q++) {
        for (int p = 0; p < npeers; p++)
            CHECK_OK(ops->flush(t, q, p, &reqs[q * npeers + p]));
    }
    wait_all(t, reqs, NQUEUES * npeers);

    row = 0;
    for (int q = 0; q < NQUEUES; q++) {
        for (int p = 0; p < npeers; p++) {
            for (int i = 0; i < ROWS_PER_PEER; i++, row++) {
                /* Hybrid: node p's span holds its ranks' segments back to back. */
                size_t off = src[row] * ROW;
                int owner = hybrid ? p * local_size + (int)(off / SEG_BYTES) : p;
                size_t word0 = (off % SEG_BYTES) / sizeof(uint32_t);
                const uint32_t *got = (const uint32_t *)((const char *)dst->addr + row * ROW);
                for (size_t w = 0; w < ROW / sizeof(uint32_t); w++) {
                    if (got[w] != pattern(owner, word0 + w)) {
                        fprintf(stderr, "rank %d: queue %d peer %d row %d word %zu: got %08x want %08x (owner %d)\n",
                                rank, q, p, i, w, got[w], pattern(owner, word0 + w), owner);
                        exit(1);
                    }
                }
            }
        }
    }
    free(reqs);
    free(src);
    ops->dereg(t, local);
    engram_host_segment_ops.free(dst);
}

/* Gets from every peer's registered host segment, checked. */
static int fetch_main(engram_group_t *group, void *arg)
{
    scenario_t *sc = arg;
    int rank = engram_group_rank(group);
    int local_size = engram_group_local_size(group);
    engram_config_t *cfg = config_for(sc->mode, 20000);
    engram_transport_t *t;
    CHECK_OK(engram_transport_open(ops, group, cfg, &t));
    engram_transport_caps_t caps;
    ops->caps(t, &caps);
    CHECK(caps.max_queues == NQUEUES && (caps.flags & ENGRAM_CAP_HOST_INITIATED));
    char info[1024];
    ops->describe(t, info, sizeof(info));
    CHECK(strstr(info, getenv("UCX_TLS")) != NULL);
    if (rank == 0)
        printf("UCX_TLS=%s mode=%s: %s\n", getenv("UCX_TLS"), sc->mode ? "hybrid" : "direct", info);

    bool hybrid = sc->mode == ENGRAM_MODE_HYBRID;
    engram_segment_t *table = table_segment(rank);
    engram_region_t *remote;
    CHECK_OK(ops->reg_symmetric(t, table, hybrid ? ENGRAM_REG_NODE_SPAN : ENGRAM_REG_RANK, &remote));
    gets_checked(t, rank, remote, hybrid, local_size);
    serve_until_all(t, &sc->shared->done, NRANKS);
    ops->dereg(t, remote);
    ops->close(t);
    engram_host_segment_ops.free(table);
    engram_config_destroy(cfg);
    return 0;
}

/* After a peer failed, the collective before a dereg is no barrier: rank
 * 0 deregisters and frees its table while ranks 1 and 2 still get from
 * it. Rank 0 must keep progressing without serving those gets from freed
 * memory, and fail flushes of its own; the late gets never succeed. */
static void late_gets_after_free(shared_t *sh, engram_transport_t *t, int rank, engram_region_t *remote,
                                 engram_region_t *local, engram_segment_t **table)
{
    uint64_t deadline = now_ms() + 20000;
    if (rank == 0) {
        ops->dereg(t, remote);
        engram_host_segment_ops.free(*table);
        *table = NULL;
        __atomic_store_n(&sh->freed, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&sh->late, __ATOMIC_SEQ_CST) < NRANKS - 2) {
            CHECK_OK(ops->progress(t));
            CHECK(now_ms() < deadline);
        }
        for (uint64_t until = now_ms() + 200; now_ms() < until;)
            CHECK_OK(ops->progress(t));
        engram_request_t *req;
        CHECK_OK(ops->flush(t, 0, 1, &req));
        CHECK_STATUS(ops->test(t, req), ENGRAM_ERR_PEER);
        ops->request_free(t, req);
        __atomic_store_n(&sh->served, 1, __ATOMIC_SEQ_CST);
        return;
    }
    while (!__atomic_load_n(&sh->freed, __ATOMIC_SEQ_CST)) { /* rank 0 closes its endpoints to us */
        CHECK_OK(ops->progress(t));
        CHECK(now_ms() < deadline);
    }
    /* With failure reports (tcp) rank 0's workers going looks like a failure. */
    engram_status_t st = ENGRAM_OK;
    for (int i = 0; i < EXIT_ROWS && st == ENGRAM_OK; i++)
        st = ops->get(t, 0, 0, remote, (size_t)i * ROW, local, (size_t)i * ROW, ROW, 0);
    CHECK(st == ENGRAM_OK || st == ENGRAM_ERR_PEER);
    engram_request_t *req = NULL;
    if (st == ENGRAM_OK)
        CHECK_OK(ops->flush(t, 0, 0, &req));
    __atomic_add_fetch(&sh->late, 1, __ATOMIC_SEQ_CST);
    st = ENGRAM_INPROGRESS;
    while (req != NULL && !__atomic_load_n(&sh->served, __ATOMIC_SEQ_CST) && st == ENGRAM_INPROGRESS) {
        st = ops->test(t, req);
        CHECK(now_ms() < deadline);
    }
    CHECK(st == ENGRAM_INPROGRESS || st == ENGRAM_ERR_PEER);
    ops->request_free(t, req);
}

/* Rank 3 exits (as if it crashed) once the others have gets outstanding
 * to it; they must see a peer error or a timeout within the bound. */
static int peer_exit_main(engram_group_t *group, void *arg)
{
    scenario_t *sc = arg;
    int rank = engram_group_rank(group);
    int victim = NRANKS - 1;
    engram_config_t *cfg = config_for(ENGRAM_MODE_DIRECT, EXIT_TIMEOUT_MS);
    engram_transport_t *t;
    CHECK_OK(engram_transport_open(ops, group, cfg, &t));
    engram_segment_t *table = table_segment(rank);
    engram_region_t *remote;
    CHECK_OK(ops->reg_symmetric(t, table, ENGRAM_REG_RANK, &remote));
    engram_segment_params_t params = {.size = sizeof(params), .bytes = EXIT_ROWS * ROW, .numa_node = -1,
                                      .huge = ENGRAM_HUGE_OFF};
    engram_segment_t *dst;
    CHECK_OK(engram_host_segment_ops.alloc(&params, &dst));
    engram_region_t *local;
    CHECK_OK(ops->reg_local(t, dst, &local));

    /* Connections to the victim are made first: UCX 1.13.1 aborts
     * (wireup_ep.c assertion, from ucp_worker_discard_uct_ep) when a TCP
     * peer dies while an endpoint's wireup is still pending. */
    engram_request_t *req = NULL;
    CHECK_OK(ops->get(t, 0, victim, remote, 0, local, 0, ROW, 0));
    CHECK_OK(ops->flush(t, 0, victim, &req));
    wait_all(t, &req, 1);
    serve_until_all(t, &sc->shared->warm, NRANKS);

    if (rank == victim) {
        uint64_t deadline = now_ms() + 20000;
        while (__atomic_load_n(&sc->shared->issued, __ATOMIC_SEQ_CST) < NRANKS - 1 && now_ms() < deadline)
            usleep(1000);
        _exit(0); /* no cleanup, no goodbye: the others must notice by themselves */
    }
    engram_status_t st = ENGRAM_OK;
    for (int i = 0; i < EXIT_ROWS && st == ENGRAM_OK; i++)
        st = ops->get(t, 0, victim, remote, (size_t)i * ROW, local, (size_t)i * ROW, ROW, ENGRAM_GET_AGGREGATE);
    CHECK(st == ENGRAM_OK || st == ENGRAM_ERR_PEER);
    req = NULL;
    if (st == ENGRAM_OK)
        CHECK_OK(ops->flush(t, 0, victim, &req));
    __atomic_add_fetch(&sc->shared->issued, 1, __ATOMIC_SEQ_CST);
    uint64_t start = now_ms();
    while (req != NULL && (st = ops->test(t, req)) == ENGRAM_INPROGRESS)
        CHECK(now_ms() - start < EXIT_TIMEOUT_MS + 5000);
    uint64_t waited = now_ms() - start;
    if (rank == 0)
        printf("UCX_TLS=%s: peer exit -> %s after %llu ms (%s)\n", getenv("UCX_TLS"), engram_status_str(st),
               (unsigned long long)waited, engram_last_error());
    CHECK(st == ENGRAM_ERR_PEER || st == ENGRAM_ERR_TIMEOUT);
    CHECK(waited <= EXIT_TIMEOUT_MS + 2000);
    ops->request_free(t, req);
    late_gets_after_free(sc->shared, t, rank, remote, local, &table);
    serve_until_all(t, &sc->shared->done, NRANKS - 1);
    ops->dereg(t, local);
    if (table != NULL) {
        ops->dereg(t, remote);
        engram_host_segment_ops.free(table);
    }
    ops->close(t);
    engram_host_segment_ops.free(dst);
    engram_config_destroy(cfg);
    return 0;
}

/* Whether UCX maps every peer's memory here on this UCX_TLS (rkey_ptr). */
static bool tls_maps_peers(void)
{
    const char *tls = getenv("UCX_TLS");
    return strncmp(tls, "posix", 5) == 0 || strncmp(tls, "sysv", 4) == 0;
}

static engram_segment_params_t alloc_params(size_t bytes)
{
    return (engram_segment_params_t){.size = sizeof(engram_segment_params_t), .bytes = bytes, .numa_node = -1,
                                     .huge = ENGRAM_HUGE_AUTO};
}

/* Transport-provided memory starts zeroed; its owner writes its pattern. */
static void fill_checked(void *addr, int rank)
{
    uint32_t *w = addr;
    for (size_t i = 0; i < SEG_BYTES / sizeof(*w); i++) {
        CHECK(w[i] == 0);
        w[i] = pattern(rank, i);
    }
}

/* The end of every alloc_symmetric case: the owner writes its pattern into
 * the memory UCX provided, every peer's gets check it, then dereg and
 * close once all ranks are done. */
static void serve_alloc_and_close(engram_group_t *group, scenario_t *sc, engram_transport_t *t,
                                  engram_config_t *cfg, engram_region_t *remote, void *addr)
{
    int rank = engram_group_rank(group);
    fill_checked(addr, rank);
    CHECK_OK(engram_group_barrier(group));
    gets_checked(t, rank, remote, false, 0);
    serve_until_all(t, &sc->shared->done, NRANKS);
    ops->dereg(t, remote);
    ops->close(t);
    engram_config_destroy(cfg);
}

/* alloc_symmetric: node spans and huge_pages=on refused on every rank;
 * then memory UCX provides, written by its owner and read by every peer,
 * with no owner progress where UCX maps the peers' memory here. */
static int alloc_fetch_main(engram_group_t *group, void *arg)
{
    scenario_t *sc = arg;
    engram_config_t *cfg = config_for(ENGRAM_MODE_DIRECT, 20000);
    engram_transport_t *t;
    CHECK_OK(engram_transport_open(ops, group, cfg, &t));
    engram_segment_params_t params = alloc_params(SEG_BYTES - 100); /* rounded up to the page size */
    engram_region_t *remote = NULL;
    void *addr = NULL;
    uint32_t flags = ~0u;
    CHECK_STATUS(ops->alloc_symmetric(t, &params, ENGRAM_REG_NODE_SPAN, &remote, &addr, &flags),
                 ENGRAM_ERR_UNSUPPORTED);
    params.huge = ENGRAM_HUGE_ON;
    CHECK_STATUS(ops->alloc_symmetric(t, &params, ENGRAM_REG_RANK, &remote, &addr, &flags), ENGRAM_ERR_UNSUPPORTED);
    CHECK(remote == NULL && addr == NULL);
    params.huge = ENGRAM_HUGE_AUTO;
    CHECK_OK(ops->alloc_symmetric(t, &params, ENGRAM_REG_RANK, &remote, &addr, &flags));
    CHECK(flags == (tls_maps_peers() ? 0u : ENGRAM_REGION_OWNER_PROGRESS));
    serve_alloc_and_close(group, sc, t, cfg, remote, addr);
    return 0;
}

#if !defined(__SANITIZE_ADDRESS__)
#define ALLOC_FAIL_BYTES ((size_t)256 << 20)

/* Leaves this process 64 MiB of address space beyond what it maps now. */
static void limit_address_space(struct rlimit *old)
{
    CHECK(getrlimit(RLIMIT_AS, old) == 0);
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f != NULL);
    unsigned long pages = 0;
    CHECK(fscanf(f, "%lu", &pages) == 1);
    fclose(f);
    struct rlimit lim = {.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)64 << 20),
                         .rlim_max = old->rlim_max};
    CHECK(setrlimit(RLIMIT_AS, &lim) == 0);
}
#endif

/* alloc_symmetric fails alike on every rank, none left waiting: sizes
 * that differ, a rank asking for nothing, a rank that cannot allocate
 * (address space limited; not under ASan, whose shadow needs it); the
 * transport then still allocates and serves. */
static int alloc_errors_main(engram_group_t *group, void *arg)
{
    scenario_t *sc = arg;
    int rank = engram_group_rank(group);
    engram_config_t *cfg = config_for(ENGRAM_MODE_DIRECT, 20000);
    engram_transport_t *t;
    CHECK_OK(engram_transport_open(ops, group, cfg, &t));
    engram_region_t *remote = NULL;
    void *addr = NULL;
    uint32_t flags;
    engram_segment_params_t params = alloc_params(rank == 1 ? 2 * SEG_BYTES : SEG_BYTES);
    CHECK_STATUS(ops->alloc_symmetric(t, &params, ENGRAM_REG_RANK, &remote, &addr, &flags), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "must be equal") != NULL);
    params = alloc_params(rank == 2 ? 0 : SEG_BYTES);
    CHECK_STATUS(ops->alloc_symmetric(t, &params, ENGRAM_REG_RANK, &remote, &addr, &flags), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), rank == 2 ? "0 bytes" : "rank 2 failed to map its symmetric region") != NULL);
#if !defined(__SANITIZE_ADDRESS__)
    params = alloc_params(ALLOC_FAIL_BYTES);
    struct rlimit old;
    if (rank == 3)
        limit_address_space(&old);
    engram_status_t st = ops->alloc_symmetric(t, &params, ENGRAM_REG_RANK, &remote, &addr, &flags);
    if (rank == 3)
        CHECK(setrlimit(RLIMIT_AS, &old) == 0);
    CHECK_STATUS(st, ENGRAM_ERR_NOMEM);
    CHECK(rank == 3 || strstr(engram_last_error(), "rank 3 failed to map its symmetric region") != NULL);
#endif
    CHECK(remote == NULL && addr == NULL);
    params = alloc_params(SEG_BYTES);
    CHECK_OK(ops->alloc_symmetric(t, &params, ENGRAM_REG_RANK, &remote, &addr, &flags));
    serve_alloc_and_close(group, sc, t, cfg, remote, addr);
    return 0;
}

/* Gone, or a zombie not reaped yet. */
static bool process_gone(int pid)
{
    char path[64], line[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return true;
    size_t n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *paren = strrchr(line, ')');
    return paren != NULL && (paren[2] == 'Z' || paren[2] == 'X');
}

/* The owner of UCX-provided memory exits: the peers' mappings keep that
 * memory, so their gets still read its rows (as loopback's fd-mapped
 * segments do); their dereg finds the rank failed, destroys the workers
 * before unmapping, and dereg plus close end within the timeout. */
static int alloc_peer_death_main(engram_group_t *group, void *arg)
{
    scenario_t *sc = arg;
    int rank = engram_group_rank(group);
    engram_config_t *cfg = config_for(ENGRAM_MODE_DIRECT, EXIT_TIMEOUT_MS);
    engram_transport_t *t;
    CHECK_OK(engram_transport_open(ops, group, cfg, &t));
    engram_segment_params_t params = alloc_params(SEG_BYTES);
    engram_region_t *remote;
    void *addr;
    uint32_t flags;
    CHECK_OK(ops->alloc_symmetric(t, &params, ENGRAM_REG_RANK, &remote, &addr, &flags));
    CHECK(flags == 0);
    fill_checked(addr, rank);
    CHECK_OK(engram_group_barrier(group));
    if (rank == NRANKS - 1) {
        __atomic_store_n(&sc->shared->victim_pid, (int)getpid(), __ATOMIC_SEQ_CST);
        _exit(0); /* no dereg, no close */
    }
    uint64_t deadline = now_ms() + 20000;
    int victim;
    while ((victim = __atomic_load_n(&sc->shared->victim_pid, __ATOMIC_SEQ_CST)) == 0 || !process_gone(victim))
        CHECK(now_ms() < deadline);
    gets_checked(t, rank, remote, false, 0);
    uint64_t start = now_ms();
    ops->dereg(t, remote);
    ops->close(t);
    uint64_t took = now_ms() - start;
    if (rank == 0)
        printf("UCX_TLS=%s: alloc_symmetric owner exited; rows still read, dereg + close took %llu ms\n",
               getenv("UCX_TLS"), (unsigned long long)took);
    CHECK(took <= EXIT_TIMEOUT_MS + 2000);
    engram_config_destroy(cfg);
    return 0;
}

static int cma_unusable_main(engram_group_t *group, void *arg)
{
    (void)arg;
    engram_config_t *cfg = config_for(ENGRAM_MODE_DIRECT, 5000);
    engram_transport_t *t = NULL;
    CHECK_STATUS(engram_transport_open(ops, group, cfg, &t), ENGRAM_ERR_TRANSPORT);
    CHECK(t == NULL);
    CHECK(strstr(engram_last_error(), "no endpoint to rank") != NULL);
    engram_config_destroy(cfg);
    return 0;
}

static void run(engram_rank_main_fn fn, int local_size, scenario_t *sc)
{
    memset(sc->shared, 0, sizeof(*sc->shared));
    sc->local_size = local_size;
    int codes[NRANKS];
    engram_status_t st = engram_group_fork_run(NRANKS, local_size, fn, sc, codes);
    for (int r = 0; r < NRANKS; r++) {
        if (codes[r] != 0)
            fprintf(stderr, "rank %d exited with %d\n", r, codes[r]);
    }
    CHECK_OK(st);
}

int main(int argc, char **argv)
{
    CHECK(getenv("UCX_TLS") != NULL);
    const char *why = NULL;
    CHECK(ops->available(NULL, &why));
    shared_t *sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    scenario_t sc = {.shared = sh};
    if (argc > 1 && strcmp(argv[1], "cma_unusable") == 0) {
        run(cma_unusable_main, 0, &sc);
    } else {
        sc.mode = ENGRAM_MODE_DIRECT;
        run(fetch_main, 0, &sc);
        sc.mode = ENGRAM_MODE_HYBRID;
        run(fetch_main, 2, &sc);
        /* The victim's exit code is 0 (it exits on purpose); the launcher
         * must still report every survivor's success. */
        run(peer_exit_main, 0, &sc);
        run(alloc_fetch_main, 0, &sc);
        run(alloc_errors_main, 0, &sc);
        if (tls_maps_peers())
            run(alloc_peer_death_main, 0, &sc);
    }
    munmap(sh, sizeof(shared_t));
    printf("ok\n");
    return 0;
}
