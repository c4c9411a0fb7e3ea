/* One case on forked ranks: each rank builds its table, checks the fetched
 * rows and scales bit for bit against table_gen (regenerated per row, so no
 * rank holds a copy of the table), then times fetch + wait beside a memcpy
 * gather of the same rows from one reference table that all ranks share.
 * Results come back through a shared mapping, one slot per rank, so no
 * rank waits on a reader at any rank count. */
#include <stdlib.h>
#include <string.h>
#include <linux/mman.h>
#include <sys/mman.h>
#include <time.h>

#include "engram/log.h"
#include "tools/bench/bench.h"

typedef struct rank_times {
    double issue_us, wait_us, fetch_us, ref_us;
    int32_t check_ok;
    int32_t status;
    int32_t done; /* set last: the slot was written by its rank */
    char transport[32];
    char error[sizeof(((bench_result_t *)0)->error)]; /* the rank's engram_last_error when status failed */
    engram_table_stats_t stats; /* the rank's table counters at the end */
} rank_times_t;

/* Made by the parent before the fork; the ranks inherit the mappings. */
typedef struct shared {
    const bench_case_t *c;
    uint8_t *ref_rows;     /* the reference table [total][row_bytes], MAP_SHARED on pages like the shards' */
    uint64_t ref_bytes;    /* as mapped (a whole number of its pages) */
    uint32_t *scales;          /* [total][packs], MAP_SHARED; NULL without packs */
    uint64_t scales_bytes;
    rank_times_t *results; /* [ranks], MAP_SHARED */
} shared_t;

typedef struct rank_state {
    const bench_case_t *c;
    const shared_t *sh;
    engram_group_t *g;
    engram_context_t *ctx;
    engram_table_t *table;
    const uint8_t *ref_rows;
    int64_t *indices;
    uint8_t *ref_out;
    uint8_t *want; /* one row */
    uint64_t nrows;
} rank_state_t;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static engram_status_t open_table(rank_state_t *s)
{
    const bench_case_t *c = s->c;
    engram_config_t *cfg;
    engram_status_t st = engram_config_create(&cfg);
    if (st != ENGRAM_OK)
        return st;
    if (c->transport)
        st = engram_config_set(cfg, "transport", c->transport);
    if (st == ENGRAM_OK)
        st = engram_config_set(cfg, "mode", c->hybrid ? "hybrid" : "direct");
    if (st == ENGRAM_OK)
        st = engram_context_create(cfg, s->g, &s->ctx);
    engram_config_destroy(cfg);
    if (st != ENGRAM_OK)
        return st;
    engram_table_params_t p = {
        .size = sizeof(p),
        .entries_per_rank = c->entries_per_rank,
        .row_bytes = c->row_bytes,
        .entries_per_token = c->entries_per_token,
        .max_tokens = c->tokens,
        .scale_packs = bench_scale_packs(c),
        .recv = ENGRAM_RECV_HOST,
    };
    return engram_table_create(s->ctx, &p, &s->table);
}

/* Each rank fills its own part of the shared reference (rows and scales),
 * then writes its shard from there. */
static engram_status_t fill_and_write(rank_state_t *s)
{
    const bench_case_t *c = s->c;
    uint64_t rank = (uint64_t)engram_group_rank(s->g), epr = c->entries_per_rank;
    uint32_t packs = bench_scale_packs(c);
    uint8_t *shard = s->sh->ref_rows + rank * epr * c->row_bytes;
    for (uint64_t i = 0; i < epr; i++) {
        uint64_t gi = rank * epr + i;
        table_gen_row(gi, c->row_bytes, shard + i * c->row_bytes);
        for (uint32_t k = 0; k < packs; k++)
            s->sh->scales[gi * packs + k] = table_gen_scale(gi, k);
    }
    /* every rank's scales are in place before any rank's write reads them */
    engram_status_t st = engram_group_barrier(s->g);
    return st == ENGRAM_OK ? engram_write(s->table, shard, c->row_bytes, s->sh->scales) : st;
}

static void ref_gather(const rank_state_t *s)
{
    uint32_t rb = s->c->row_bytes;
    for (uint64_t i = 0; i < s->nrows; i++)
        memcpy(s->ref_out + i * rb, s->ref_rows + (uint64_t)s->indices[i] * rb, rb);
}

static bool check_rows(rank_state_t *s, const uint8_t *rows, const uint32_t *sf)
{
    const bench_case_t *c = s->c;
    uint32_t packs = bench_scale_packs(c);
    uint64_t stride = ((uint64_t)c->tokens + 3) / 4 * 4; /* column-major scales: tokens rounded up to 4 */
    for (uint64_t i = 0; i < s->nrows; i++) {
        uint64_t idx = (uint64_t)s->indices[i];
        table_gen_row(idx, c->row_bytes, s->want);
        if (memcmp(rows + i * c->row_bytes, s->want, c->row_bytes) != 0)
            return false;
        uint64_t tok = i / c->entries_per_token, e = i % c->entries_per_token;
        for (uint32_t k = 0; k < packs; k++) {
            uint64_t col = e * packs + k;
            uint32_t got = c->sf_col_major ? sf[col * stride + tok] : sf[tok * c->entries_per_token * packs + col];
            if (got != table_gen_scale(idx, k))
                return false;
        }
    }
    return true;
}

static bool check_fetch(rank_state_t *s)
{
    engram_fetch_t *f;
    const void *rows;
    const uint32_t *sf;
    unsigned flags = s->c->sf_col_major ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0;
    if (engram_fetch(s->table, s->indices, s->c->tokens, flags, &f) != ENGRAM_OK)
        return false;
    bool ok = engram_wait(f, &rows, &sf) == ENGRAM_OK && check_rows(s, rows, sf);
    engram_fetch_release(f);
    return ok;
}

static engram_status_t time_fetches(rank_state_t *s, rank_times_t *out)
{
    const bench_case_t *c = s->c;
    int n = c->iters;
    double *issue = calloc((size_t)n, sizeof(double)), *wait = calloc((size_t)n, sizeof(double));
    double *total = calloc((size_t)n, sizeof(double)), *ref = calloc((size_t)n, sizeof(double));
    engram_status_t st = ENGRAM_OK;
    if (!issue || !wait || !total || !ref)
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "bench: cannot allocate timings");
    unsigned flags = c->sf_col_major ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0;
    for (int i = -c->warmup; st == ENGRAM_OK && i < n; i++) {
        bench_indices(c, engram_group_rank(s->g), (uint64_t)(i + c->warmup + 1), s->indices);
        engram_fetch_t *f;
        double t0 = now_us();
        st = engram_fetch(s->table, s->indices, c->tokens, flags, &f);
        if (st != ENGRAM_OK)
            break;
        double t1 = now_us();
        st = engram_wait(f, NULL, NULL);
        double t2 = now_us();
        engram_fetch_release(f);
        ref_gather(s);
        double t3 = now_us();
        if (i >= 0) {
            issue[i] = t1 - t0;
            wait[i] = t2 - t1;
            total[i] = t2 - t0;
            ref[i] = t3 - t2;
        }
    }
    if (st == ENGRAM_OK) {
        out->issue_us = median(issue, n);
        out->wait_us = median(wait, n);
        out->fetch_us = median(total, n);
        out->ref_us = median(ref, n);
    }
    free(issue);
    free(wait);
    free(total);
    free(ref);
    return st;
}

/* Sequential timing: one rank at a time, the others parked at a barrier,
 * so the figure does not depend on the machine's core count. */
static engram_status_t time_ranks(rank_state_t *s, rank_times_t *mine)
{
    if (s->c->concurrent) {
        engram_status_t st = engram_group_barrier(s->g);
        return st == ENGRAM_OK ? time_fetches(s, mine) : st;
    }
    engram_status_t st = ENGRAM_OK;
    for (int r = 0; r < s->c->ranks; r++) {
        engram_status_t bst = engram_group_barrier(s->g);
        if (bst != ENGRAM_OK)
            return bst;
        if (r == engram_group_rank(s->g))
            st = time_fetches(s, mine);
    }
    engram_status_t bst = engram_group_barrier(s->g);
    return st != ENGRAM_OK ? st : bst;
}

static int rank_main(engram_group_t *g, void *varg)
{
    const shared_t *sh = varg;
    const bench_case_t *c = sh->c;
    rank_state_t s = {.c = c, .sh = sh, .g = g, .ref_rows = sh->ref_rows};
    rank_times_t mine;
    memset(&mine, 0, sizeof(mine));
    s.nrows = (uint64_t)c->tokens * c->entries_per_token;
    s.indices = malloc(s.nrows * sizeof(int64_t));
    s.ref_out = malloc(s.nrows * c->row_bytes);
    s.want = malloc(c->row_bytes);
    engram_status_t st = s.indices && s.ref_out && s.want
                             ? ENGRAM_OK
                             : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "bench: cannot allocate the rank's buffers");
    if (st == ENGRAM_OK)
        st = open_table(&s);
    if (st == ENGRAM_OK)
        st = fill_and_write(&s);
    if (st == ENGRAM_OK) {
        bench_indices(c, engram_group_rank(g), 0, s.indices);
        mine.check_ok = check_fetch(&s);
        snprintf(mine.transport, sizeof(mine.transport), "%s", engram_context_transport(s.ctx));
        st = time_ranks(&s, &mine);
    }
    mine.status = st;
    if (st != ENGRAM_OK)
        snprintf(mine.error, sizeof(mine.error), "rank %d: %s", engram_group_rank(g), engram_last_error());
    mine.stats.size = sizeof(mine.stats);
    if (s.table == NULL || engram_table_stats(s.table, &mine.stats) != ENGRAM_OK)
        memset(&mine.stats, 0, sizeof(mine.stats));
    engram_table_destroy(s.table);
    engram_context_destroy(s.ctx);
    free(s.indices);
    free(s.ref_out);
    free(s.want);
    mine.done = 1;
    sh->results[engram_group_rank(g)] = mine;
    return st == ENGRAM_OK ? 0 : 1;
}

static void reduce(const bench_case_t *c, const rank_times_t *all, bench_result_t *res)
{
    double *v = malloc(sizeof(double) * 4 * (size_t)c->ranks);
    res->check_ok = true;
    res->status = ENGRAM_OK;
    for (int r = 0; r < c->ranks; r++) {
        res->check_ok = res->check_ok && all[r].check_ok;
        if (all[r].status != ENGRAM_OK && res->status == ENGRAM_OK) {
            res->status = all[r].status;
            snprintf(res->error, sizeof(res->error), "%s", all[r].error);
        }
    }
    snprintf(res->transport, sizeof(res->transport), "%s", all[0].transport);
    for (int r = 0; r < c->ranks; r++) {
        res->fetches += all[r].stats.fetches;
        res->rows += all[r].stats.rows;
        res->repeats += all[r].stats.repeats;
        res->bad_rows += all[r].stats.bad_rows;
        res->wait_s += (double)all[r].stats.wait_ns * 1e-9;
    }
    if (v == NULL) {
        res->status = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "bench: cannot allocate the reduction");
        return;
    }
    double *vi = v, *vw = v + c->ranks, *vf = v + 2 * c->ranks, *vr = v + 3 * c->ranks;
    for (int r = 0; r < c->ranks; r++) {
        vi[r] = all[r].issue_us;
        vw[r] = all[r].wait_us;
        vf[r] = all[r].fetch_us;
        vr[r] = all[r].ref_us;
    }
    res->issue_us = median(vi, c->ranks);
    res->wait_us = median(vw, c->ranks);
    res->fetch_us = median(vf, c->ranks);
    res->ref_us = median(vr, c->ranks);
    free(v);
    double rows = (double)c->tokens * c->entries_per_token;
    double scale = c->concurrent ? c->ranks : 1; /* aggregate over ranks timed at once */
    res->mpps = res->fetch_us > 0 ? scale * rows / res->fetch_us : 0;
    res->ref_mpps = res->ref_us > 0 ? rows / res->ref_us : 0;
    res->gbps = res->mpps * c->row_bytes / 1e3;
    res->ratio = res->ref_mpps > 0 ? res->mpps / (scale * res->ref_mpps) : 0;
}

static void *map_shared(uint64_t bytes)
{
    void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The reference table on the pages the shards get by default
 * (huge_pages=auto): 2 MiB huge pages where the host has them reserved,
 * normal pages otherwise. */
static uint8_t *map_reference(uint64_t bytes, uint64_t *mapped)
{
    const uint64_t huge = (uint64_t)2 << 20;
    *mapped = (bytes + huge - 1) / huge * huge;
    void *p = mmap(NULL, (size_t)*mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB,
                   -1, 0);
    if (p != MAP_FAILED)
        return p;
    *mapped = bytes;
    return map_shared(bytes);
}

static engram_status_t shared_create(const bench_case_t *c, shared_t *sh)
{
    uint64_t total = c->entries_per_rank * (uint64_t)c->ranks; /* bench_memory_check: no overflow */
    uint32_t packs = bench_scale_packs(c);
    /* The reference reads from memory on the same page size as the shards
     * the fetch reads from, so the ratio compares the access path, not the
     * memory behind it. One for all ranks, mapped here before the fork;
     * each rank fills its own part, as it writes its own shard. */
    *sh = (shared_t){.c = c, .scales_bytes = total * packs * sizeof(uint32_t)};
    sh->ref_rows = map_reference(total * c->row_bytes, &sh->ref_bytes);
    sh->results = map_shared(sizeof(rank_times_t) * (uint64_t)c->ranks);
    if (packs)
        sh->scales = map_shared(sh->scales_bytes);
    if (sh->ref_rows == NULL || sh->results == NULL || (packs && sh->scales == NULL))
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "bench: cannot map the shared reference table, scales and results");
    return ENGRAM_OK;
}

static void shared_destroy(const bench_case_t *c, shared_t *sh)
{
    if (sh->ref_rows)
        munmap(sh->ref_rows, (size_t)sh->ref_bytes);
    if (sh->scales)
        munmap(sh->scales, (size_t)sh->scales_bytes);
    if (sh->results)
        munmap(sh->results, sizeof(rank_times_t) * (size_t)c->ranks);
}

engram_status_t bench_run_case(const bench_case_t *c, bench_result_t *res)
{
    engram_status_t st = bench_memory_check(c);
    if (st != ENGRAM_OK)
        return st;
    shared_t sh;
    st = shared_create(c, &sh);
    if (st == ENGRAM_OK)
        st = engram_group_fork_run(c->ranks, c->local_size, rank_main, &sh, NULL);
    if (sh.results != NULL) {
        int missing = -1;
        for (int r = 0; r < c->ranks && missing < 0; r++)
            if (!sh.results[r].done)
                missing = r;
        if (missing < 0) {
            reduce(c, sh.results, res);
            if (st != ENGRAM_OK && res->status == ENGRAM_OK)
                res->status = st;
            st = ENGRAM_OK;
        } else if (st == ENGRAM_OK) {
            st = ENGRAM_ERROR(ENGRAM_ERR_PEER, "bench: no result from rank %d", missing);
        }
    }
    shared_destroy(c, &sh);
    return st;
}
