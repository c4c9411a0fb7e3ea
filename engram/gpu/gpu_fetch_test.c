/* GPU fetch (recv=CUDA), bit for bit against the host reference: 1 rank and
 * 4 ranks sharing one GPU as one node, then 4 ranks as 2 emulated nodes x 2
 * (rows of the other node through the host transport: loopback, and ucx
 * over posix and tcp), direct and hybrid, bf16 and fp8+scales in both
 * layouts, odd row sizes, shards in host-NUMA or device memory, several
 * fetches in flight, and bad indices zero-filled and reported; a few
 * scenarios again with dedup=on (repeated rows, repeated bad indices,
 * this node's and the other node's); fetches ended in stream order. Needs a GPU
 * (tagged gpu).
 * Built with ENGRAM_GPU_TEST_NCCL_GIN (//transports/nccl_gin:nccl_gin_fetch_test)
 * it runs the same checks through transport=nccl_gin instead: 1 rank
 * (every row its own: the communicator, windows and dev comm of one rank),
 * and 2 ranks, one per GPU or all on one (NCCL_MULTI_RANK_GPU_ENABLE=1,
 * set when they share it), as 1 node x 2 and as 2 emulated nodes x 1 (each
 * with its own NCCL_HOSTID, so NCCL's nodes are the group's), then 2
 * emulated nodes x 2 and x 4, direct and hybrid; a host-receive table is
 * refused there. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/delayed_copy.h"
#include "tests/check.h"
#include "tests/engram_harness.h"
#include "tests/table_gen.h"

#define MAX_TOKENS 96u
#define EPT 5u
#define CUDA_CHECK(expr) CHECK((expr) == cudaSuccess)

typedef struct scenario {
    int ranks, local; /* local < ranks: emulated nodes */
    bool hybrid;
    const char *gpu_table;
    const char *transport;
    const char *ucx_tls; /* UCX_TLS for transport=ucx */
    const char *dedup;   /* the dedup key; NULL = its default */
    bool mixed_sms;      /* gpu_sms=auto on rank 0, 3 on the others (a rank's own key; an odd grid launches unclustered) */
    const char *gpu_path; /* NULL = its default (auto: uva for these small tables) */
    const char *gather;   /* host_gather's "threads,chunk_kib"; NULL = the defaults */
} scenario_t;

/* The bad-index report of the last fetch finish() waited for. */
static struct {
    uint64_t count;
    uint32_t token, entry;
} last_bad;

typedef struct gpu_fetch {
    int64_t *d_idx;
    engram_fetch_t *f;
} gpu_fetch_t;

static void issue_flags(harness_t *h, cudaStream_t s, const int64_t *idx, uint32_t tokens, unsigned flags,
                        gpu_fetch_t *out)
{
    size_t n = (size_t)tokens * EPT;
    CUDA_CHECK(cudaMalloc((void **)&out->d_idx, n * sizeof(int64_t) + 8));
    /* On `s`: the fetch reads them in stream order (a cudaMemcpy from
     * pageable memory may return before its DMA lands, unordered with a
     * non-blocking stream). */
    CUDA_CHECK(cudaMemcpyAsync(out->d_idx, idx, n * sizeof(int64_t), cudaMemcpyHostToDevice, s));
    CHECK_OK(engram_fetch_on_stream(h->table, out->d_idx, tokens, flags, s, &out->f));
}

static void issue(harness_t *h, cudaStream_t s, const int64_t *idx, uint32_t tokens, bool col, gpu_fetch_t *out)
{
    issue_flags(h, s, idx, tokens, col ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0, out);
}

/* Says which rows differ (this node's, other nodes', bad) and how (zero,
 * another row of the table, garbage), then fails the rank. */
static _Noreturn void explain_mismatch(const harness_t *h, const int64_t *idx, uint32_t tokens, const uint8_t *rows)
{
    const engram_table_params_t *p = &h->params;
    int rank = engram_group_rank(h->g), local = engram_group_local_size(h->g);
    uint64_t total = p->entries_per_rank * (uint64_t)engram_group_size(h->g);
    uint8_t *want = malloc(p->row_bytes), *other = malloc(p->row_bytes), *zero = calloc(1, p->row_bytes);
    unsigned bad_here = 0, bad_other = 0, ok_other = 0, zeros = 0, moved = 0;
    int64_t first = -2;
    for (uint64_t i = 0; i < (uint64_t)tokens * EPT; i++) {
        const uint8_t *got = rows + i * p->row_bytes;
        bool oob = idx[i] < 0 || (uint64_t)idx[i] >= total;
        bool remote = !oob && (int)(idx[i] / (int64_t)p->entries_per_rank) / local != rank / local;
        if (oob)
            memset(want, 0, p->row_bytes);
        else
            table_gen_row((uint64_t)idx[i], p->row_bytes, want);
        if (memcmp(got, want, p->row_bytes) == 0) {
            ok_other += remote;
            continue;
        }
        if (first == -2)
            first = (int64_t)i;
        remote ? bad_other++ : bad_here++;
        zeros += memcmp(got, zero, p->row_bytes) == 0;
        for (uint64_t j = 0; j < (uint64_t)tokens * EPT; j++) {
            if (idx[j] < 0 || (uint64_t)idx[j] >= total)
                continue;
            table_gen_row((uint64_t)idx[j], p->row_bytes, other);
            if (memcmp(got, other, p->row_bytes) == 0) {
                moved++;
                break;
            }
        }
    }
    const uint8_t *g0 = rows + (uint64_t)first * p->row_bytes;
    table_gen_row((uint64_t)idx[first], p->row_bytes, want);
    fprintf(stderr,
            "rank %d: %u tokens x %u, row_bytes %u: wrong rows: %u of this node, %u of other nodes (%u right); "
            "%u zero, %u another fetched row; first wrong row %lld (index %lld): got %02x%02x%02x%02x%02x%02x%02x%02x "
            "want %02x%02x%02x%02x%02x%02x%02x%02x\n",
            rank, tokens, EPT, p->row_bytes, bad_here, bad_other, ok_other, zeros, moved, (long long)first,
            (long long)idx[first], g0[0], g0[1], g0[2], g0[3], g0[4], g0[5], g0[6], g0[7], want[0], want[1], want[2],
            want[3], want[4], want[5], want[6], want[7]);
    exit(1);
}

/* Waits, copies the rows and scales back and compares; returns the wait status. */
static engram_status_t finish(harness_t *h, const int64_t *idx, uint32_t tokens, bool col, gpu_fetch_t *gf)
{
    const void *d_rows = NULL;
    const uint32_t *d_sf = NULL;
    engram_status_t st = engram_wait(gf->f, &d_rows, &d_sf);
    CHECK(st == ENGRAM_OK || st == ENGRAM_ERR_BAD_INDEX);
    const engram_table_params_t *p = &h->params;
    size_t row_bytes = (size_t)tokens * EPT * p->row_bytes;
    size_t sf_elems = col ? (size_t)EPT * p->scale_packs * ((tokens + 3) & ~3u) : (size_t)tokens * EPT * p->scale_packs;
    uint8_t *rows = malloc(row_bytes + 1);
    uint32_t *sf = malloc(sf_elems * sizeof(uint32_t) + 4);
    if (row_bytes)
        CUDA_CHECK(cudaMemcpy(rows, d_rows, row_bytes, cudaMemcpyDeviceToHost));
    if (sf_elems)
        CUDA_CHECK(cudaMemcpy(sf, d_sf, sf_elems * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    if (!harness_check(h, idx, tokens, col, rows, sf))
        explain_mismatch(h, idx, tokens, rows);
    free(rows);
    free(sf);
    engram_fetch_bad_indices(gf->f, &last_bad.count, &last_bad.token, &last_bad.entry);
    engram_fetch_release(gf->f);
    CUDA_CHECK(cudaFree(gf->d_idx));
    return st;
}

static void make_indices(harness_t *h, uint32_t tokens, uint64_t seed, int64_t *out)
{
    table_gen_indices(h->params.entries_per_rank * (uint64_t)engram_group_size(h->g), TABLE_GEN_UNIFORM, seed,
                      engram_group_rank(h->g), 0, (uint64_t)tokens * EPT, out);
}

static void check_shapes(harness_t *h, cudaStream_t s, bool col)
{
    static const uint32_t token_counts[] = {0, 1, 7, MAX_TOKENS};
    int64_t idx[MAX_TOKENS * EPT];
    for (size_t t = 0; t < sizeof(token_counts) / sizeof(token_counts[0]); t++) {
        make_indices(h, token_counts[t], 31 + t, idx);
        gpu_fetch_t gf;
        issue(h, s, idx, token_counts[t], col, &gf);
        CHECK_OK(finish(h, idx, token_counts[t], col, &gf));
    }
}

/* Every rank's first and last row, plus fetch_slots fetches in flight. */
static void check_boundaries_and_slots(harness_t *h, cudaStream_t s)
{
    int n = engram_group_size(h->g);
    uint64_t epr = h->params.entries_per_rank;
    int64_t idx[4][MAX_TOKENS * EPT];
    memset(idx, 0, sizeof(idx));
    for (int r = 0; r < n; r++) {
        idx[0][2 * r] = (int64_t)(r * epr);
        idx[0][2 * r + 1] = (int64_t)(r * epr + epr - 1);
    }
    for (int k = 1; k < 4; k++)
        make_indices(h, MAX_TOKENS, 200 + k, idx[k]);
    gpu_fetch_t gf[4];
    for (int k = 0; k < 4; k++)
        issue(h, s, idx[k], MAX_TOKENS, false, &gf[k]);
    engram_fetch_t *extra;
    CHECK_STATUS(engram_fetch_on_stream(h->table, (const int64_t *)((const char *)gf[0].d_idx + 4), 1, 0, s, &extra),
                 ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_fetch_on_stream(h->table, gf[0].d_idx, 1, 0, s, &extra), ENGRAM_ERR_BUSY);
    for (int k = 3; k >= 0; k--)
        CHECK_OK(finish(h, idx[k], MAX_TOKENS, false, &gf[k]));
}

/* Stream order. Without ENGRAM_FETCH_ORDER_AT_WAIT (where the rows need no
 * host and no GPU-initiated wait), work queued right after the call
 * follows the rows: once an event recorded then has completed, engram_test
 * finds the fetch done. With it, work queued after engram_fetch_buffers
 * follows them: fetch_slots fetches queued back to back, each copied out
 * on the stream after its buffer query, bit for bit. */
static void check_stream_order(harness_t *h, cudaStream_t s, bool at_call)
{
    const engram_table_params_t *p = &h->params;
    const size_t row_bytes = (size_t)MAX_TOKENS * EPT * p->row_bytes, sf_elems = (size_t)MAX_TOKENS * EPT * p->scale_packs;
    int64_t idx[4][MAX_TOKENS * EPT];
    gpu_fetch_t gf[4];
    if (at_call) {
        make_indices(h, MAX_TOKENS, 400, idx[0]);
        issue_flags(h, s, idx[0], MAX_TOKENS, 0, &gf[0]);
        cudaEvent_t after;
        CUDA_CHECK(cudaEventCreateWithFlags(&after, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(after, s));
        CUDA_CHECK(cudaEventSynchronize(after));
        CUDA_CHECK(cudaEventDestroy(after));
        CHECK_OK(engram_test(gf[0].f));
        CHECK_OK(finish(h, idx[0], MAX_TOKENS, false, &gf[0]));
    }
    uint8_t *rows;
    uint32_t *sf;
    CUDA_CHECK(cudaMallocHost((void **)&rows, 4 * row_bytes + 1));
    CUDA_CHECK(cudaMallocHost((void **)&sf, 4 * sf_elems * sizeof(uint32_t) + 4));
    for (int k = 0; k < 4; k++) {
        make_indices(h, MAX_TOKENS, 410 + (uint64_t)k, idx[k]);
        issue_flags(h, s, idx[k], MAX_TOKENS, ENGRAM_FETCH_ORDER_AT_WAIT, &gf[k]);
    }
    for (int k = 0; k < 4; k++) {
        const void *d_rows;
        const uint32_t *d_sf;
        CHECK_OK(engram_fetch_buffers(gf[k].f, &d_rows, &d_sf));
        CUDA_CHECK(cudaMemcpyAsync(rows + k * row_bytes, d_rows, row_bytes, cudaMemcpyDeviceToHost, s));
        if (sf_elems)
            CUDA_CHECK(cudaMemcpyAsync(sf + k * sf_elems, d_sf, sf_elems * 4, cudaMemcpyDeviceToHost, s));
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    for (int k = 0; k < 4; k++) {
        if (!harness_check(h, idx[k], MAX_TOKENS, false, rows + k * row_bytes, sf + k * sf_elems))
            explain_mismatch(h, idx[k], MAX_TOKENS, rows + k * row_bytes);
        CHECK_OK(engram_wait(gf[k].f, NULL, NULL));
        CHECK_OK(engram_fetch_release(gf[k].f));
        CUDA_CHECK(cudaFree(gf[k].d_idx));
    }
    CUDA_CHECK(cudaFreeHost(rows));
    CUDA_CHECK(cudaFreeHost(sf));
}

static void check_bad_indices(harness_t *h, cudaStream_t s, bool col)
{
    int64_t idx[MAX_TOKENS * EPT];
    make_indices(h, MAX_TOKENS, 77, idx);
    int64_t total = (int64_t)(h->params.entries_per_rank * (uint64_t)engram_group_size(h->g));
    idx[3 * EPT + 2] = -1; /* the first: token 3, entry 2 */
    idx[10 * EPT + 0] = total;
    idx[50 * EPT + 4] = INT64_MAX;
    gpu_fetch_t gf;
    issue(h, s, idx, MAX_TOKENS, col, &gf);
    CHECK_STATUS(finish(h, idx, MAX_TOKENS, col, &gf), ENGRAM_ERR_BAD_INDEX);
    CHECK(last_bad.count == 3 && last_bad.token == 3 && last_bad.entry == 2);
}

/* Few distinct rows, each many times over every rank's shard, and bad
 * indices repeated: each bad position a zero row, each counted. */
static void check_repeats(harness_t *h, cudaStream_t s, bool col)
{
    int64_t idx[MAX_TOKENS * EPT];
    int64_t total = (int64_t)(h->params.entries_per_rank * (uint64_t)engram_group_size(h->g));
    for (uint32_t i = 0; i < MAX_TOKENS * EPT; i++)
        idx[i] = (int64_t)((uint64_t)i * 2654435761u % 23) * (total / 23);
    idx[2] = idx[9] = idx[MAX_TOKENS * EPT - 1] = total;
    idx[11] = -3;
    gpu_fetch_t gf;
    issue(h, s, idx, MAX_TOKENS, col, &gf);
    CHECK_STATUS(finish(h, idx, MAX_TOKENS, col, &gf), ENGRAM_ERR_BAD_INDEX);
    CHECK(last_bad.count == 4 && last_bad.token == 0 && last_bad.entry == 2);
}

/* This rank's node's rows: [*lo, *hi). */
static void node_rows(const harness_t *h, int64_t *lo, int64_t *hi)
{
    int first = engram_group_rank(h->g) - engram_group_local_rank(h->g);
    *lo = (int64_t)((uint64_t)first * h->params.entries_per_rank);
    *hi = *lo + (int64_t)((uint64_t)engram_group_local_size(h->g) * h->params.entries_per_rank);
}

/* Writes every row of this rank's shard as `byte` (the scales as the
 * harness's), in one piece. */
static void write_flat(harness_t *h, uint8_t byte)
{
    const engram_table_params_t *p = &h->params;
    uint64_t total = p->entries_per_rank * (uint64_t)engram_group_size(h->g), nsf = total * p->scale_packs;
    uint8_t *rows = malloc(p->entries_per_rank * p->row_bytes);
    uint32_t *sf = p->scale_packs ? malloc(nsf * sizeof(uint32_t)) : NULL;
    memset(rows, byte, p->entries_per_rank * p->row_bytes);
    for (uint64_t i = 0; i < nsf; i++)
        sf[i] = table_gen_scale(i / p->scale_packs, (uint32_t)(i % p->scale_packs));
    CHECK_OK(engram_write(h->table, rows, p->row_bytes, sf));
    free(rows);
    free(sf);
}

/* The hot-row cache: a third of this node's rows cached, every check again
 * (hits and misses in one fetch, bad indices, repeats, both layouts), hits
 * counted (each distinct row once where the GPU dedups: firsts_only), a
 * write reloading it (never a stale row), refusals, and the cache from a
 * profile. */
static void check_cache(harness_t *h, cudaStream_t s, bool packs, bool firsts_only)
{
    int64_t lo, hi;
    node_rows(h, &lo, &hi);
    uint64_t n = 0, total = h->params.entries_per_rank * (uint64_t)engram_group_size(h->g);
    int64_t *rows = malloc((size_t)(hi - lo) * sizeof(*rows));
    for (int64_t r = lo; r < hi; r += 3)
        rows[n++] = r;
    CHECK_OK(engram_table_cache_rows(h->table, rows, n));
    engram_table_stats_t st0 = {.size = sizeof(st0)}, st1 = {.size = sizeof(st1)};
    CHECK_OK(engram_table_stats(h->table, &st0));
    CHECK(st0.cache_rows == n);
    check_shapes(h, s, false);
    check_bad_indices(h, s, false);
    check_repeats(h, s, false);
    if (packs) {
        check_shapes(h, s, true);
        check_bad_indices(h, s, true);
        check_repeats(h, s, true);
    }
    /* one fetch's hits, counted */
    int64_t idx[MAX_TOKENS * EPT];
    make_indices(h, MAX_TOKENS, 991, idx);
    uint64_t want = 0;
    for (uint32_t i = 0; i < MAX_TOKENS * EPT; i++) {
        bool first = true; /* GPU dedup reads a repeated row once, and copies its repeats */
        for (uint32_t j = 0; firsts_only && j < i && first; j++)
            first = idx[j] != idx[i];
        want += first && idx[i] >= lo && idx[i] < hi && (idx[i] - lo) % 3 == 0;
    }
    CHECK_OK(engram_table_stats(h->table, &st0));
    gpu_fetch_t gf;
    issue(h, s, idx, MAX_TOKENS, false, &gf);
    CHECK_OK(finish(h, idx, MAX_TOKENS, false, &gf));
    CHECK_OK(engram_table_stats(h->table, &st1));
    CHECK(st1.cache_hits - st0.cache_hits == want);
    /* the caller's indices rewritten on the stream right after the call
     * (the join left to the wait): every part of the fetch read them first */
    issue_flags(h, s, idx, MAX_TOKENS, ENGRAM_FETCH_ORDER_AT_WAIT, &gf);
    CUDA_CHECK(cudaMemsetAsync(gf.d_idx, 0xff, (size_t)MAX_TOKENS * EPT * sizeof(int64_t), s));
    CHECK_OK(finish(h, idx, MAX_TOKENS, false, &gf));
    /* a write reloads the cache: new rows from it, then the old ones again */
    write_flat(h, 0x5a);
    issue(h, s, idx, MAX_TOKENS, false, &gf);
    const void *d_rows;
    CHECK_OK(engram_wait(gf.f, &d_rows, NULL));
    size_t bytes = (size_t)MAX_TOKENS * EPT * h->params.row_bytes;
    uint8_t *got = malloc(bytes);
    CUDA_CHECK(cudaMemcpy(got, d_rows, bytes, cudaMemcpyDeviceToHost));
    for (size_t b = 0; b < bytes; b++)
        CHECK(got[b] == 0x5a);
    free(got);
    CHECK_OK(engram_fetch_release(gf.f));
    CUDA_CHECK(cudaFree(gf.d_idx));
    CHECK_OK(harness_write_chunks(h, 100));
    check_shapes(h, s, false);
    /* refusals: each names its cause and leaves the cache as it was */
    rows[1] = rows[0];
    CHECK_STATUS(engram_table_cache_rows(h->table, rows, n), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "listed twice") != NULL);
    int64_t bad[2] = {lo, (int64_t)total};
    CHECK_STATUS(engram_table_cache_rows(h->table, bad, 2), ENGRAM_ERR_BAD_INDEX);
    if (hi - lo < (int64_t)total) {
        bad[1] = lo > 0 ? 0 : hi;
        CHECK_STATUS(engram_table_cache_rows(h->table, bad, 2), ENGRAM_ERR_INVALID);
        CHECK(strstr(engram_last_error(), "on another node") != NULL);
    }
    issue(h, s, idx, MAX_TOKENS, false, &gf);
    CHECK_STATUS(engram_table_cache_rows(h->table, rows, 1), ENGRAM_ERR_BUSY);
    CHECK_OK(finish(h, idx, MAX_TOKENS, false, &gf));
    CHECK_OK(engram_table_stats(h->table, &st1));
    CHECK(st1.cache_rows == n);
    /* from a profile: the fetch's own indices, the 50 most frequent */
    CHECK_OK(engram_table_cache_profile(h->table, idx, MAX_TOKENS * EPT, 50));
    CHECK_OK(engram_table_stats(h->table, &st1));
    CHECK(st1.cache_rows > 0 && st1.cache_rows <= 50);
    check_shapes(h, s, packs);
    CHECK_OK(engram_table_cache_rows(h->table, NULL, 0));
    CHECK_OK(engram_table_stats(h->table, &st1));
    CHECK(st1.cache_rows == 0);
    free(rows);
}

/* The scenario's context, opened with a host-receive table: refused by a
 * GPU-initiated transport, taken (and dropped again) by the others. */
static engram_context_t *open_context(engram_group_t *g, const scenario_t *sc, bool gin)
{
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = 64, .row_bytes = 256, .entries_per_token = EPT,
                               .max_tokens = 8, .recv = ENGRAM_RECV_HOST};
    harness_t h;
    engram_status_t st = harness_open(&h, g, sc->transport, sc->hybrid, &p);
    CHECK(h.ctx != NULL);
    if (gin) {
        CHECK_STATUS(st, ENGRAM_ERR_UNSUPPORTED);
    } else {
        CHECK_OK(st);
        CHECK_OK(engram_table_destroy(h.table));
    }
    CHECK(strcmp(engram_context_transport(h.ctx), sc->transport) == 0);
    return h.ctx;
}

/* gpu_path=host_gather where it cannot run (shards in GPU memory): every
 * rank's table create is refused with the reason. */
static bool host_gather_refused(engram_group_t *g, engram_context_t *ctx, const scenario_t *sc)
{
    (void)g;
    bool device = strcmp(sc->gpu_table, "device") == 0;
    if (sc->gpu_path == NULL || strcmp(sc->gpu_path, "host_gather") != 0 || !device)
        return false;
    engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = 1000, .row_bytes = 256,
                               .entries_per_token = EPT, .max_tokens = MAX_TOKENS, .recv = ENGRAM_RECV_CUDA};
    engram_table_t *t = NULL;
    CHECK_STATUS(engram_table_create(ctx, &p, &t), ENGRAM_ERR_UNSUPPORTED);
    CHECK(strstr(engram_last_error(), "gpu_path=host_gather with gpu_table=device: the table's "
                                      "host_gather path cannot read shards in GPU memory") != NULL);
    CHECK(t == NULL);
    CHECK_OK(engram_context_destroy(ctx));
    return true;
}

/* Fetches ended in stream order (engram_fetch_release_ordered): ORDERED_N
 * fetches on one stream queued behind a spinning kernel, so the host runs
 * far ahead of the GPU through 4 slots; each fetch's rows are copied out
 * on the stream before the next fetch in its slot overwrites them. Then
 * the rules while they run (another stream waits, the cache is busy), the
 * outcomes (one bad index), every copy bit-exact, and a fetch released
 * after its wait. Where rows need the host (host_gather, other nodes
 * through the host transport) the call is refused. */
#define ORDERED_N 40
static void check_release_ordered(harness_t *h, cudaStream_t s, bool refused)
{
    const engram_table_params_t *p = &h->params;
    const size_t rows_per = (size_t)MAX_TOKENS * EPT, row_bytes = rows_per * p->row_bytes;
    const size_t sf_elems = rows_per * p->scale_packs;
    int64_t *idx = malloc(ORDERED_N * rows_per * sizeof(int64_t)), *d_idx, *d_spin;
    uint8_t *rows;
    uint32_t *sf;
    CUDA_CHECK(cudaMalloc((void **)&d_idx, ORDERED_N * rows_per * sizeof(int64_t)));
    CUDA_CHECK(cudaMalloc((void **)&d_spin, sizeof(int64_t)));
    CUDA_CHECK(cudaMallocHost((void **)&rows, ORDERED_N * row_bytes + 1));
    CUDA_CHECK(cudaMallocHost((void **)&sf, ORDERED_N * sf_elems * sizeof(uint32_t) + 4));
    for (int i = 0; i < ORDERED_N; i++)
        make_indices(h, MAX_TOKENS, 900 + (uint64_t)i, idx + i * rows_per);
    idx[7 * rows_per + 5 * EPT + 1] = -1; /* fetch 7: token 5, entry 1 */
    CUDA_CHECK(cudaMemcpy(d_idx, idx, ORDERED_N * rows_per * sizeof(int64_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize()); /* a copy from pageable memory may still be landing */
    engram_fetch_t *f;
    CHECK_STATUS(engram_fetch_release_ordered(NULL, 0), ENGRAM_ERR_INVALID);
    uint32_t n = 0, pending = 0;
    CHECK_STATUS(engram_table_poll_released(h->table, NULL, 1, 0, &n, NULL), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_table_poll_released(NULL, NULL, 0, 0, &n, NULL), ENGRAM_ERR_INVALID);
    if (refused) {
        CHECK_OK(engram_fetch_on_stream(h->table, d_idx, MAX_TOKENS, 0, s, &f));
        CHECK_STATUS(engram_fetch_release_ordered(f, 1), ENGRAM_ERR_UNSUPPORTED);
        CHECK(strstr(engram_last_error(), "use engram_fetch_release") != NULL);
        CHECK_OK(engram_fetch_release(f)); /* left as it was */
    } else {
        /* 4e8 cycles: outlasts the calls below */
        CUDA_CHECK(engram_test_delayed_copy_launch(d_spin, d_idx, 1, 400000000ll, s));
        for (int i = 0; i < ORDERED_N; i++) {
            const void *d_rows;
            const uint32_t *d_sf;
            CHECK_OK(engram_fetch_on_stream(h->table, d_idx + i * rows_per, MAX_TOKENS, 0, s, &f));
            CHECK_OK(engram_fetch_buffers(f, &d_rows, &d_sf));
            CUDA_CHECK(cudaMemcpyAsync(rows + i * row_bytes, d_rows, row_bytes, cudaMemcpyDeviceToHost, s));
            if (sf_elems)
                CUDA_CHECK(cudaMemcpyAsync(sf + i * sf_elems, d_sf, sf_elems * 4, cudaMemcpyDeviceToHost, s));
            CHECK_OK(engram_fetch_release_ordered(f, 1000 + (uint64_t)i));
            if (i == 0)
                CHECK_STATUS(engram_fetch_release(f), ENGRAM_ERR_INVALID); /* the handle is stale */
        }
        /* still behind the spin: another stream finds every slot held */
        cudaStream_t other;
        CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
        CHECK_OK(engram_table_poll_released(h->table, NULL, 0, 0, &n, &pending));
        CHECK(n == 0 && pending > 0);
        CHECK_STATUS(engram_fetch_on_stream(h->table, d_idx, 1, 0, other, &f), ENGRAM_ERR_BUSY);
        CHECK(strstr(engram_last_error(), "released in stream order") != NULL);
        int64_t row0 = 0;
        CHECK_STATUS(engram_table_cache_rows(h->table, &row0, 1), ENGRAM_ERR_BUSY);
        bool seen[ORDERED_N] = {false};
        for (int got = 0; got < ORDERED_N;) {
            engram_fetch_completion_t c[7];
            CHECK_OK(engram_table_poll_released(h->table, c, 7, 1, &n, &pending));
            CHECK(n > 0);
            for (uint32_t k = 0; k < n; k++, got++) {
                int i = (int)(c[k].cookie - 1000);
                CHECK(i >= 0 && i < ORDERED_N && !seen[i]);
                seen[i] = true;
                if (i == 7)
                    CHECK(c[k].status == ENGRAM_ERR_BAD_INDEX && c[k].bad_count == 1 && c[k].first_bad_token == 5 &&
                          c[k].first_bad_entry == 1);
                else
                    CHECK(c[k].status == ENGRAM_OK && c[k].bad_count == 0);
            }
        }
        CHECK_OK(engram_table_poll_released(h->table, NULL, 0, 1, &n, &pending));
        CHECK(n == 0 && pending == 0);
        CUDA_CHECK(cudaStreamSynchronize(s));
        for (int i = 0; i < ORDERED_N; i++)
            if (!harness_check(h, idx + i * rows_per, MAX_TOKENS, false, rows + i * row_bytes, sf + i * sf_elems))
                explain_mismatch(h, idx + i * rows_per, MAX_TOKENS, rows + i * row_bytes);
        /* the slots are free for any stream again */
        gpu_fetch_t gf;
        issue(h, other, idx, MAX_TOKENS, false, &gf);
        CHECK_OK(finish(h, idx, MAX_TOKENS, false, &gf));
        CUDA_CHECK(cudaStreamDestroy(other));
    }
    /* released after its wait: the outcome at once */
    CHECK_OK(engram_fetch_on_stream(h->table, d_idx + 7 * rows_per, MAX_TOKENS, 0, s, &f));
    CHECK_STATUS(engram_wait(f, NULL, NULL), ENGRAM_ERR_BAD_INDEX);
    if (!refused) {
        CHECK_OK(engram_fetch_release_ordered(f, 77));
        engram_fetch_completion_t c;
        CHECK_OK(engram_table_poll_released(h->table, &c, 1, 0, &n, &pending));
        CHECK(n == 1 && pending == 0 && c.cookie == 77 && c.status == ENGRAM_ERR_BAD_INDEX && c.bad_count == 1);
    } else {
        CHECK_OK(engram_fetch_release(f));
    }
    CUDA_CHECK(cudaFreeHost(rows));
    CUDA_CHECK(cudaFreeHost(sf));
    CUDA_CHECK(cudaFree(d_idx));
    CUDA_CHECK(cudaFree(d_spin));
    free(idx);
}

/* Rows of other nodes through the host transport: capture refused, the
 * stream's capture left valid. */
static void check_capture_refused(harness_t *h, cudaStream_t s)
{
    int64_t *d_idx;
    CUDA_CHECK(cudaMalloc((void **)&d_idx, EPT * sizeof(int64_t)));
    CUDA_CHECK(cudaMemsetAsync(d_idx, 0, EPT * sizeof(int64_t), s)); /* in the fetches' stream order */
    cudaGraph_t graph;
    engram_fetch_t *f = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CHECK_STATUS(engram_fetch_on_stream(h->table, d_idx, 1, 0, s, &f), ENGRAM_ERR_UNSUPPORTED);
    CHECK(strstr(engram_last_error(), "the table's remote path cannot be captured in a CUDA graph") != NULL);
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaFree(d_idx));
}

/* A thread holding a global-mode capture (torch.cuda.graph's default) on
 * its own stream while the main thread fetches outside it. */
typedef struct global_capture {
    pthread_t thread;
    cudaStream_t stream;
    int device;
    atomic_int state; /* 1: capturing, 2: end it, 3: ended */
    cudaError_t ended;
} global_capture_t;

static void *global_capture_main(void *arg)
{
    global_capture_t *c = arg;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
    atomic_store(&c->state, 1);
    while (atomic_load(&c->state) != 2)
        sched_yield();
    cudaGraph_t graph = NULL;
    c->ended = cudaStreamEndCapture(c->stream, &graph);
    if (graph != NULL)
        cudaGraphDestroy(graph);
    atomic_store(&c->state, 3);
    return NULL;
}

/* The expected bad indices of idx[n] in a table of `total` rows. */
static uint64_t count_bad(const int64_t *idx, uint64_t n, int64_t total)
{
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += idx[i] < 0 || idx[i] >= total;
    return bad;
}

/* Fetches captured in CUDA graphs (global mode, as torch's) and replayed:
 * each replay a whole fetch of the indices written into the captured
 * tensor before it, rows and scales bit for bit, its bad indices counted
 * where the path tallies them per replay (host_gather); two graphs of one
 * table alternately, then one back to back; with the hot-row cache when
 * asked; a plain fetch waited for while another thread captures in global
 * mode leaves that capture valid. */
static void check_graph_replays(harness_t *h, cudaStream_t s, bool col, bool with_cache, bool per_replay_bad)
{
    const engram_table_params_t *p = &h->params;
    const int64_t total = (int64_t)(p->entries_per_rank * (uint64_t)engram_group_size(h->g));
    int64_t *cached = NULL;
    if (with_cache) { /* every third row of this node's */
        int64_t lo, hi, n = 0;
        node_rows(h, &lo, &hi);
        cached = malloc((size_t)((hi - lo) / 3 + 1) * sizeof(*cached));
        for (int64_t r = lo + 1; r < hi; r += 3)
            cached[n++] = r;
        CHECK_OK(engram_table_cache_rows(h->table, cached, (uint64_t)n));
    }
    const unsigned flags = col ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0;
    const uint32_t tokens[2] = {MAX_TOKENS, 7};
    int64_t *d_idx[2];
    engram_fetch_t *f[2];
    cudaGraphExec_t exec[2];
    const void *d_rows[2];
    const uint32_t *d_sf[2];
    for (int g = 0; g < 2; g++) {
        CUDA_CHECK(cudaMalloc((void **)&d_idx[g], (size_t)tokens[g] * EPT * sizeof(int64_t)));
        CUDA_CHECK(cudaMemsetAsync(d_idx[g], 0, (size_t)tokens[g] * EPT * sizeof(int64_t), s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        cudaGraph_t graph;
        CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        CHECK_OK(engram_fetch_on_stream(h->table, d_idx[g], tokens[g], flags, s, &f[g]));
        CHECK_OK(engram_fetch_buffers(f[g], &d_rows[g], &d_sf[g]));
        CUDA_CHECK(cudaStreamEndCapture(s, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&exec[g], graph, 0));
        CUDA_CHECK(cudaGraphDestroy(graph));
    }
    const size_t max_rows = (size_t)MAX_TOKENS * EPT;
    uint8_t *rows = malloc(max_rows * p->row_bytes + 1);
    uint32_t *sf = malloc((size_t)EPT * (p->scale_packs + 1) * (MAX_TOKENS + 4) * sizeof(uint32_t) * 2);
    int64_t idx[MAX_TOKENS * EPT];
    for (int rep = 0; rep < 24; rep++) {
        const int g = rep % 2;
        const uint32_t T = tokens[g];
        const size_t n = (size_t)T * EPT;
        make_indices(h, T, 5000 + (uint64_t)rep, idx);
        if (rep % 3 == 1) {
            idx[1] = -1;
            idx[n - 1] = total + 5;
        }
        const size_t row_bytes = n * p->row_bytes;
        const size_t sf_elems = col ? (size_t)EPT * p->scale_packs * ((T + 3) & ~3u) : n * p->scale_packs;
        CUDA_CHECK(cudaMemcpyAsync(d_idx[g], idx, n * sizeof(int64_t), cudaMemcpyHostToDevice, s));
        CUDA_CHECK(cudaGraphLaunch(exec[g], s));
        CUDA_CHECK(cudaMemcpyAsync(rows, d_rows[g], row_bytes, cudaMemcpyDeviceToHost, s));
        if (sf_elems)
            CUDA_CHECK(cudaMemcpyAsync(sf, d_sf[g], sf_elems * sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        if (!harness_check(h, idx, T, col, rows, sf))
            explain_mismatch(h, idx, T, rows);
        uint64_t bad = 99;
        uint32_t token = 0, entry = 0;
        CHECK_OK(engram_fetch_bad_indices(f[g], &bad, &token, &entry));
        CHECK(bad == (per_replay_bad ? count_bad(idx, n, total) : 0));
        if (per_replay_bad && bad > 0)
            CHECK(token == 0 && entry == 1);
    }
    /* back to back on one stream, the indices unchanged: the last one checked */
    make_indices(h, MAX_TOKENS, 9000, idx);
    CUDA_CHECK(cudaMemcpyAsync(d_idx[0], idx, max_rows * sizeof(int64_t), cudaMemcpyHostToDevice, s));
    for (int rep = 0; rep < 16; rep++)
        CUDA_CHECK(cudaGraphLaunch(exec[0], s));
    CUDA_CHECK(cudaMemcpyAsync(rows, d_rows[0], max_rows * p->row_bytes, cudaMemcpyDeviceToHost, s));
    const size_t sf0 = col ? (size_t)EPT * p->scale_packs * ((MAX_TOKENS + 3) & ~3u) : max_rows * p->scale_packs;
    if (sf0)
        CUDA_CHECK(cudaMemcpyAsync(sf, d_sf[0], sf0 * sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (!harness_check(h, idx, MAX_TOKENS, col, rows, sf))
        explain_mismatch(h, idx, MAX_TOKENS, rows);
    /* a plain fetch, tested and waited for while another thread captures
     * in global mode: that capture stays valid */
    global_capture_t gc = {.ended = cudaErrorUnknown};
    CUDA_CHECK(cudaGetDevice(&gc.device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&gc.stream, cudaStreamNonBlocking));
    CHECK(pthread_create(&gc.thread, NULL, global_capture_main, &gc) == 0);
    while (atomic_load(&gc.state) != 1)
        sched_yield();
    engram_fetch_t *plain; /* the last replay's indices (no allocation: that would end the capture) */
    CHECK_OK(engram_fetch_on_stream(h->table, d_idx[1], 7, flags, s, &plain));
    (void)engram_test(plain);
    CHECK_OK(engram_wait(plain, NULL, NULL));
    CHECK_OK(engram_fetch_release(plain));
    atomic_store(&gc.state, 2);
    pthread_join(gc.thread, NULL);
    CHECK(gc.ended == cudaSuccess);
    CUDA_CHECK(cudaStreamDestroy(gc.stream));
    for (int g = 0; g < 2; g++) {
        CUDA_CHECK(cudaGraphExecDestroy(exec[g]));
        CHECK_OK(engram_fetch_release(f[g]));
        CUDA_CHECK(cudaFree(d_idx[g]));
    }
    free(rows);
    free(sf);
    if (with_cache) {
        CHECK_OK(engram_table_cache_rows(h->table, NULL, 0));
        free(cached);
    }
}

/* A fetch issued into a CUDA graph being captured says so
 * (engram_fetch_captured) and one issued outside capture does not; the
 * slots serve fetches after it as before, and testing them during a
 * global-mode capture is allowed; a fetch runs on the table's device
 * whichever is current, and leaves the caller's current. */
static void check_captured(harness_t *h, cudaStream_t s)
{
    int64_t *d_idx;
    CUDA_CHECK(cudaMalloc((void **)&d_idx, EPT * sizeof(int64_t)));
    CUDA_CHECK(cudaMemsetAsync(d_idx, 0, EPT * sizeof(int64_t), s)); /* in the fetches' stream order */
    int before = -1, after = -1, captured = 7;
    CUDA_CHECK(cudaGetDevice(&before));
    engram_fetch_t *f;
    CHECK_OK(engram_fetch_on_stream(h->table, d_idx, 1, 0, s, &f));
    CHECK_OK(engram_fetch_captured(f, &captured));
    CHECK(captured == 0);
    CHECK_OK(engram_wait(f, NULL, NULL));
    CHECK_OK(engram_fetch_release(f));
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CHECK_OK(engram_fetch_on_stream(h->table, d_idx, 1, 0, s, &f));
    CHECK_OK(engram_fetch_captured(f, &captured));
    CHECK(captured == 1);
    CHECK_OK(engram_test(f)); /* the replays do the work: nothing to wait for */
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CHECK_OK(engram_fetch_release(f));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaGetDevice(&after));
    CHECK(after == before);
    /* a fetch behind a spin in every slot (one served the captured fetch),
     * each tested twice (the second test asks CUDA for a fault through the
     * slot's event): running, not failed */
    int64_t *d_spin;
    CUDA_CHECK(cudaMalloc((void **)&d_spin, sizeof(int64_t)));
    /* 4e8 cycles: still spinning while the fetches behind it are tested */
    CUDA_CHECK(engram_test_delayed_copy_launch(d_spin, d_idx, 1, 400000000ll, s));
    engram_fetch_t *running[64];
    int n = 0;
    engram_status_t st = ENGRAM_OK;
    while (n < 64 && (st = engram_fetch_on_stream(h->table, d_idx, 1, 0, s, &running[n])) == ENGRAM_OK) {
        CHECK_STATUS(engram_test(running[n]), ENGRAM_INPROGRESS);
        CHECK_STATUS(engram_test(running[n]), ENGRAM_INPROGRESS);
        n++;
    }
    CHECK(st == ENGRAM_ERR_BUSY && n > 0);
    /* tested again while this thread captures another stream in global
     * mode (torch.cuda.graph's): the fault query neither fails nor
     * invalidates the capture */
    cudaStream_t s2;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; i++)
        CHECK_STATUS(engram_test(running[i]), ENGRAM_INPROGRESS);
    CUDA_CHECK(cudaStreamEndCapture(s2, &graph));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(s2));
    for (int i = 0; i < n; i++) {
        CHECK_OK(engram_wait(running[i], NULL, NULL));
        CHECK_OK(engram_fetch_release(running[i]));
    }
    CUDA_CHECK(cudaFree(d_spin));
    /* another GPU current: the fetch still runs on the table's, and the
     * caller's stays current */
    int devices = 0;
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    if (devices > 1) {
        int other = (before + 1) % devices;
        CUDA_CHECK(cudaSetDevice(other));
        CHECK_OK(engram_fetch_on_stream(h->table, d_idx, 1, 0, s, &f));
        CHECK_OK(engram_wait(f, NULL, NULL));
        CHECK_OK(engram_fetch_release(f));
        CUDA_CHECK(cudaGetDevice(&after));
        CHECK(after == other);
        CUDA_CHECK(cudaSetDevice(before));
    }
    CUDA_CHECK(cudaFree(d_idx));
}

static int rank_main(engram_group_t *g, void *arg)
{
    const scenario_t *sc = arg;
    int devices = 0;
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    bool gin = strcmp(sc->transport, "nccl_gin") == 0;
    int rank = engram_group_rank(g), local = engram_group_local_size(g);
    /* emulated nodes: one GPU each where there are enough, and NCCL told
     * which node it is on */
    CUDA_CHECK(cudaSetDevice((gin ? rank : engram_group_local_rank(g)) % devices));
    if (gin && devices < engram_group_size(g))
        setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0); /* NCCL refuses ranks sharing a GPU otherwise */
    char hostid[32];
    snprintf(hostid, sizeof(hostid), "engram-node-%d", rank / local);
    if (gin && local < engram_group_size(g))
        setenv("NCCL_HOSTID", hostid, 1);
    setenv("ENGRAM_GPU_TABLE", sc->gpu_table, 1);
    if (sc->ucx_tls)
        setenv("UCX_TLS", sc->ucx_tls, 1);
    if (sc->dedup)
        setenv("ENGRAM_DEDUP", sc->dedup, 1);
    if (sc->mixed_sms)
        setenv("ENGRAM_GPU_SMS", rank == 0 ? "auto" : "3", 1);
    if (sc->gpu_path)
        setenv("ENGRAM_GPU_PATH", sc->gpu_path, 1);
    if (sc->gather) {
        char threads[16];
        snprintf(threads, sizeof(threads), "%.*s", (int)(strchr(sc->gather, ',') - sc->gather), sc->gather);
        setenv("ENGRAM_GATHER_THREADS", threads, 1);
        setenv("ENGRAM_GATHER_CHUNK_KIB", strchr(sc->gather, ',') + 1, 1);
    }
    engram_context_t *ctx = open_context(g, sc, gin);
    if (host_gather_refused(g, ctx, sc))
        return 0;
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    static const struct { uint32_t row_bytes, packs; } dtypes[] = {{256, 0}, {256, 1}, {72, 3}, {30, 0}};
    for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
        engram_table_params_t p = {.size = sizeof(p), .entries_per_rank = d == 1 ? 4096 : 1000,
                                   .row_bytes = dtypes[d].row_bytes, .entries_per_token = EPT,
                                   .max_tokens = MAX_TOKENS, .scale_packs = dtypes[d].packs,
                                   .recv = ENGRAM_RECV_CUDA};
        /* one context for every table: what a user does, and one NCCL
         * communicator per process */
        harness_t h = {.g = g, .ctx = ctx, .params = p};
        CHECK_OK(engram_table_create(ctx, &p, &h.table));
        engram_fetch_t *f;
        CHECK_STATUS(engram_fetch_on_stream(h.table, NULL, 0, 0, s, &f), ENGRAM_ERR_STATE);
        /* one table of each scenario written in pieces */
        CHECK_OK(harness_write_chunks(&h, d == 2 ? 77 : 0));
        int64_t one = 0;
        CHECK_STATUS(engram_fetch(h.table, &one, 1, 0, &f), ENGRAM_ERR_INVALID);
        check_shapes(&h, s, false);
        check_bad_indices(&h, s, false);
        if (dtypes[d].packs) {
            check_shapes(&h, s, true);
            check_bad_indices(&h, s, true);
        }
        check_boundaries_and_slots(&h, s);
        if (local == engram_group_size(g)) /* rows of other nodes come when the host sees their gets */
            check_stream_order(&h, s, !gin);
        check_repeats(&h, s, false);
        if (dtypes[d].packs)
            check_repeats(&h, s, true);
        bool host_gather = sc->gpu_path != NULL && strcmp(sc->gpu_path, "host_gather") == 0;
        if (gin || local == engram_group_size(g)) {
            check_captured(&h, s);
            check_graph_replays(&h, s, false, false, host_gather);
            check_graph_replays(&h, s, dtypes[d].packs > 0, !gin, host_gather);
        } else {
            check_capture_refused(&h, s);
        }
        check_release_ordered(&h, s, host_gather || (!gin && local < engram_group_size(g)));
        if (!gin)
            check_cache(&h, s, dtypes[d].packs > 0,
                        sc->dedup != NULL && strcmp(sc->dedup, "on") == 0 &&
                            (sc->gpu_path == NULL || strcmp(sc->gpu_path, "host_gather") != 0));
        CHECK_OK(engram_table_destroy(h.table));
    }
    CHECK_OK(engram_context_destroy(ctx));
    CUDA_CHECK(cudaStreamDestroy(s));
    return 0;
}

int main(void)
{
#ifdef ENGRAM_GPU_TEST_NCCL_GIN
    static const scenario_t shapes[] = {
        {1, 1, false, "host_numa", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {1, 1, true, "device", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {2, 2, false, "host_numa", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {2, 2, true, "host_numa", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {2, 1, false, "host_numa", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {2, 1, true, "host_numa", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {2, 2, false, "device", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {2, 1, true, "host_numa", "nccl_gin", NULL, "on", false, NULL, NULL},
        /* several ranks per node (DeepEP's production shape): the node's
         * rows through the node span, other nodes' from their owners */
        {4, 2, true, "host_numa", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {4, 2, true, "device", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {4, 2, false, "host_numa", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {4, 2, true, "host_numa", "nccl_gin", NULL, "on", false, NULL, NULL},
        {8, 4, true, "host_numa", "nccl_gin", NULL, NULL, false, NULL, NULL},
        {8, 4, true, "device", "nccl_gin", NULL, "on", false, NULL, NULL},
        {8, 4, false, "device", "nccl_gin", NULL, NULL, false, NULL, NULL}};
#else
    static const scenario_t shapes[] = {
        {1, 1, false, "host_numa", "loopback", NULL, NULL, false, NULL, NULL},
        {4, 4, false, "host_numa", "loopback", NULL, NULL, false, NULL, NULL},
        {4, 4, true, "host_numa", "loopback", NULL, NULL, false, NULL, NULL},
        {1, 1, false, "device", "loopback", NULL, NULL, false, NULL, NULL},
        {4, 4, false, "device", "loopback", NULL, NULL, false, NULL, NULL},
        {4, 4, true, "device", "loopback", NULL, NULL, false, NULL, NULL},
        /* 2 emulated nodes x 2: the other node's rows through the host transport */
        {4, 2, false, "host_numa", "loopback", NULL, NULL, false, NULL, NULL},
        {4, 2, true, "host_numa", "loopback", NULL, NULL, false, NULL, NULL},
        {4, 2, false, "device", "loopback", NULL, NULL, false, NULL, NULL},
        {4, 2, false, "host_numa", "ucx", "posix,self", NULL, false, NULL, NULL},
        {4, 2, true, "host_numa", "ucx", "posix,self", NULL, false, NULL, NULL},
        {4, 2, true, "device", "ucx", "tcp,self", NULL, false, NULL, NULL},
        {4, 2, false, "host_numa", "ucx", "tcp,self", NULL, false, NULL, NULL},
        /* dedup=on: this node's rows by the marking kernel, the other's by the host */
        {1, 1, false, "host_numa", "loopback", NULL, "on", false, NULL, NULL},
        {4, 4, true, "device", "loopback", NULL, "on", false, NULL, NULL},
        {4, 2, false, "host_numa", "loopback", NULL, "on", false, NULL, NULL},
        {4, 2, true, "host_numa", "ucx", "tcp,self", "on", false, NULL, NULL},
        /* ranks with different gpu_sms create their tables together */
        {4, 4, false, "host_numa", "loopback", NULL, NULL, true, NULL, NULL},
        /* gpu_path=host_gather: host threads and the copy engine, no kernel */
        {1, 1, false, "host_numa", "loopback", NULL, NULL, false, "host_gather", NULL},
        {4, 4, false, "host_numa", "loopback", NULL, NULL, false, "host_gather", NULL},
        {4, 4, true, "host_numa", "loopback", NULL, NULL, false, "host_gather", "3,4"},
        {4, 4, false, "host_numa", "loopback", NULL, "on", false, "host_gather", "1,4"},
        /* host_gather on 2 emulated nodes x 2: the other node's rows through the host transport */
        {4, 2, false, "host_numa", "loopback", NULL, NULL, false, "host_gather", NULL},
        {4, 2, true, "host_numa", "ucx", "tcp,self", NULL, false, "host_gather", "3,4"},
        {4, 2, false, "host_numa", "ucx", "posix,self", "on", false, "host_gather", NULL},
        {1, 1, false, "device", "loopback", NULL, NULL, false, "host_gather", NULL}};   /* refused */
#endif
    /* every scenario runs, so one failure does not hide the others;
     * GPU_FETCH_TEST_ONLY=i,j,... runs those (0-based) alone */
    int failed = 0;
    const char *only = getenv("GPU_FETCH_TEST_ONLY");
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const scenario_t *sc = &shapes[s];
        if (only != NULL) {
            bool listed = false;
            for (const char *p = only; *p != '\0'; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p))
                listed |= strtoul(p, NULL, 10) == s;
            if (!listed)
                continue;
        }
        int codes[8];
        engram_status_t st = engram_group_fork_run(sc->ranks, sc->local, rank_main, (void *)sc, codes);
        printf("gpu_fetch_test: %d ranks, %d per node, %s, table in %s, transport %s%s%s%s%s%s%s%s%s%s: %s\n",
               sc->ranks, sc->local, sc->hybrid ? "hybrid" : "direct", sc->gpu_table, sc->transport,
               sc->ucx_tls ? " UCX_TLS=" : "", sc->ucx_tls ? sc->ucx_tls : "", sc->dedup ? " dedup=" : "",
               sc->dedup ? sc->dedup : "", sc->mixed_sms ? " gpu_sms=auto|3" : "", sc->gpu_path ? " gpu_path=" : "",
               sc->gpu_path ? sc->gpu_path : "", sc->gather ? " gather=" : "", sc->gather ? sc->gather : "",
               st == ENGRAM_OK ? "ok" : "FAILED");
        fflush(stdout);
        failed += st != ENGRAM_OK;
    }
    printf("gpu_fetch_test: %s (%d of %zu scenarios failed)\n", failed ? "FAILED" : "ok", failed,
           sizeof(shapes) / sizeof(shapes[0]));
    return failed ? 1 : 0;
}
