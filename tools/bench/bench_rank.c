/* One rank's part of a case: build the table, check the fetched rows bit
 * for bit against the all-gathered table, then time fetch + wait beside a
 * memcpy gather of the same rows from the same (gathered) memory. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hal/config_keys.h"
#include "hal/log.h"
#include "memory/host_segment.h"
#include "tools/bench/bench.h"

typedef struct rank_times {
    double issue_us, wait_us, fetch_us, ref_us;
    int32_t check_ok;
    int32_t status;
    char transport[32];
} rank_times_t;

typedef struct rank_state {
    const bench_case_t *c;
    engram_group_t *g;
    engram_context_t *ctx;
    engram_table_t *table;
    engram_segment_t *all_seg; /* the gathered reference table, in the same kind of memory as the shards */
    uint8_t *all_rows;         /* all_seg's rows [total][row_bytes] */
    uint32_t *all_scales; /* [total][packs] */
    int64_t *indices;
    uint8_t *ref_out;
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

/* Writes this rank's shard, then gathers every shard as the reference. */
static engram_status_t write_and_gather(rank_state_t *s)
{
    const bench_case_t *c = s->c;
    int rank = engram_group_rank(s->g);
    uint64_t total = c->entries_per_rank * (uint64_t)c->ranks;
    uint64_t shard_bytes = c->entries_per_rank * c->row_bytes;
    uint32_t packs = bench_scale_packs(c);
    /* The reference reads from a host segment like the ones the fetch
     * reads from (same page size, same NUMA policy), so the ratio compares
     * the access path, not the memory behind it. */
    engram_segment_params_t sp = {.size = sizeof(sp), .bytes = shard_bytes * (uint64_t)c->ranks, .numa_node = -1,
                                  .huge = ENGRAM_HUGE_AUTO, .device = -1};
    engram_status_t st = engram_host_segment_ops.alloc(&sp, &s->all_seg);
    if (st != ENGRAM_OK)
        return st;
    s->all_rows = s->all_seg->addr;
    uint8_t *shard = malloc(shard_bytes);
    s->all_scales = packs ? malloc(total * packs * sizeof(uint32_t)) : NULL;
    if (shard == NULL || (packs && s->all_scales == NULL)) {
        free(shard);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "bench: cannot allocate the reference table");
    }
    for (uint64_t i = 0; i < c->entries_per_rank; i++)
        bench_fill_row((uint64_t)rank * c->entries_per_rank + i, c->row_bytes, shard + i * c->row_bytes);
    for (uint64_t i = 0; i < total * packs; i++)
        s->all_scales[i] = bench_scale(i / packs, (uint32_t)(i % packs));
    st = engram_write(s->table, shard, c->row_bytes, s->all_scales);
    if (st == ENGRAM_OK)
        st = engram_group_allgather(s->g, shard, s->all_rows, shard_bytes);
    free(shard);
    return st;
}

static void ref_gather(const rank_state_t *s)
{
    uint32_t rb = s->c->row_bytes;
    for (uint64_t i = 0; i < s->nrows; i++)
        memcpy(s->ref_out + i * rb, s->all_rows + (uint64_t)s->indices[i] * rb, rb);
}

static bool check_fetch(rank_state_t *s)
{
    const bench_case_t *c = s->c;
    engram_fetch_t *f;
    const void *rows;
    const uint32_t *sf;
    unsigned flags = c->sf_col_major ? ENGRAM_FETCH_SF_COL_MAJOR : 0;
    if (engram_fetch(s->table, s->indices, c->tokens, flags, &f) != ENGRAM_OK)
        return false;
    bool ok = engram_wait(f, &rows, &sf) == ENGRAM_OK;
    ref_gather(s);
    ok = ok && memcmp(rows, s->ref_out, s->nrows * c->row_bytes) == 0;
    uint32_t packs = bench_scale_packs(c);
    uint32_t stride = (c->tokens + 3) & ~3u;
    for (uint64_t i = 0; ok && packs && i < s->nrows; i++) {
        uint32_t tok = (uint32_t)(i / c->entries_per_token), e = (uint32_t)(i % c->entries_per_token);
        for (uint32_t k = 0; k < packs; k++) {
            uint32_t col = e * packs + k;
            uint32_t got = c->sf_col_major ? sf[(uint64_t)col * stride + tok]
                                           : sf[(uint64_t)tok * c->entries_per_token * packs + col];
            ok = ok && got == s->all_scales[(uint64_t)s->indices[i] * packs + k];
        }
    }
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
    unsigned flags = c->sf_col_major ? ENGRAM_FETCH_SF_COL_MAJOR : 0;
    for (int i = -c->warmup; st == ENGRAM_OK && i < n; i++) {
        bench_make_indices(c, engram_group_rank(s->g), (uint64_t)(i + c->warmup + 1), s->indices);
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

static void free_state(rank_state_t *s)
{
    engram_table_destroy(s->table);
    engram_context_destroy(s->ctx);
    if (s->all_seg)
        s->all_seg->ops->free(s->all_seg);
    free(s->all_scales);
    free(s->indices);
    free(s->ref_out);
}

/* Rank 0 writes all ranks' times to the result pipe (fd in arg). */
typedef struct rank_arg {
    const bench_case_t *c;
    int result_fd;
} rank_arg_t;

static int rank_main(engram_group_t *g, void *varg)
{
    rank_arg_t *arg = varg;
    const bench_case_t *c = arg->c;
    rank_state_t s = {.c = c, .g = g};
    rank_times_t mine;
    memset(&mine, 0, sizeof(mine));
    s.nrows = (uint64_t)c->tokens * c->entries_per_token;
    s.indices = malloc(s.nrows * sizeof(int64_t) + 1);
    s.ref_out = malloc(s.nrows * c->row_bytes + 1);
    engram_status_t st = s.indices && s.ref_out ? ENGRAM_OK : ENGRAM_ERR_NOMEM;
    if (st == ENGRAM_OK)
        st = open_table(&s);
    if (st == ENGRAM_OK)
        st = write_and_gather(&s);
    if (st == ENGRAM_OK) {
        bench_make_indices(c, engram_group_rank(g), 0, s.indices);
        mine.check_ok = check_fetch(&s);
        snprintf(mine.transport, sizeof(mine.transport), "%s", engram_context_transport(s.ctx));
        st = time_ranks(&s, &mine);
    }
    mine.status = st;
    rank_times_t *all = calloc((size_t)c->ranks, sizeof(*all));
    engram_status_t gst = all ? engram_group_allgather(g, &mine, all, sizeof(mine)) : ENGRAM_ERR_NOMEM;
    if (gst == ENGRAM_OK && engram_group_rank(g) == 0) {
        ssize_t want = (ssize_t)(sizeof(*all) * (size_t)c->ranks);
        if (write(arg->result_fd, all, (size_t)want) != want)
            gst = ENGRAM_ERR_IO;
    }
    free(all);
    free_state(&s);
    return st == ENGRAM_OK && gst == ENGRAM_OK ? 0 : 1;
}

static void reduce(const bench_case_t *c, rank_times_t *all, bench_result_t *res)
{
    double v[4][c->ranks];
    res->check_ok = true;
    res->status = ENGRAM_OK;
    for (int r = 0; r < c->ranks; r++) {
        v[0][r] = all[r].issue_us;
        v[1][r] = all[r].wait_us;
        v[2][r] = all[r].fetch_us;
        v[3][r] = all[r].ref_us;
        res->check_ok = res->check_ok && all[r].check_ok;
        if (all[r].status != ENGRAM_OK)
            res->status = all[r].status;
    }
    snprintf(res->transport, sizeof(res->transport), "%s", all[0].transport);
    res->issue_us = median(v[0], c->ranks);
    res->wait_us = median(v[1], c->ranks);
    res->fetch_us = median(v[2], c->ranks);
    res->ref_us = median(v[3], c->ranks);
    double rows = (double)c->tokens * c->entries_per_token;
    double scale = c->concurrent ? c->ranks : 1; /* aggregate over ranks timed at once */
    res->mpps = res->fetch_us > 0 ? scale * rows / res->fetch_us : 0;
    res->ref_mpps = res->ref_us > 0 ? rows / res->ref_us : 0;
    res->gbps = res->mpps * c->row_bytes / 1e3;
    res->ratio = res->ref_mpps > 0 ? res->mpps / (scale * res->ref_mpps) : 0;
}

engram_status_t bench_run_case(const bench_case_t *c, bench_result_t *res)
{
    int fds[2];
    if (pipe(fds) != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "bench: pipe failed");
    rank_arg_t arg = {.c = c, .result_fd = fds[1]};
    /* the results are small enough for the pipe buffer */
    engram_status_t st = engram_group_fork_run(c->ranks, c->local_size, rank_main, &arg, NULL);
    close(fds[1]);
    rank_times_t *all = calloc((size_t)c->ranks, sizeof(*all));
    ssize_t want = (ssize_t)(sizeof(*all) * (size_t)c->ranks);
    if (all == NULL || read(fds[0], all, (size_t)want) != want) {
        if (st == ENGRAM_OK)
            st = ENGRAM_ERROR(ENGRAM_ERR_PEER, "bench: no results from the ranks");
    } else {
        reduce(c, all, res);
        if (st != ENGRAM_OK && res->status == ENGRAM_OK)
            res->status = st;
        st = ENGRAM_OK;
    }
    free(all);
    close(fds[0]);
    return st;
}
