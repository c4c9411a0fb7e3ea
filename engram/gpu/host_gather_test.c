/* The host-gather pool and its jobs against a host fake of a CUDA stream
 * (host_gather_fake.h): chunking and pipelining, routing (direct and
 * hybrid), bad indices, scales in both layouts, several jobs in flight, a
 * fetch's stream free before its join, the pool's lifecycle and every
 * error path. Every fetched row is compared with the table indexed on the
 * host. */
#include <stdlib.h>
#include <string.h>

#include "engram/gpu/host_gather_fake.h"
#include "hal/log.h"
#include "tests/check.h"

static void test_shapes(void)
{
    static const shape_t shapes[] = {
        /* ranks scaleup epr   row  packs first local max_rows chunk */
        {4, 1, 1000, 256, 0, 0, 4, 0, 64 * 1024},
        {4, 1, 1024, 256, 2, 0, 4, 0, 4096},    /* many chunks: one task each */
        {2, 1, 333, 96, 1, 0, 2, 0, 96 * 40},   /* a chunk that is not a task multiple */
        {3, 1, 77, 16, 3, 0, 3, 0, 1 << 20},    /* one chunk */
        {1, 1, 50, 4096, 1, 0, 1, 0, 1024},     /* rows larger than a chunk: one row each */
        {4, 4, 512, 128, 2, 0, 1, 0, 8192},     /* hybrid: one node span of 4 ranks */
    };
    static const int threads[] = {1, 3, 8};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        for (size_t th = 0; th < sizeof(threads) / sizeof(threads[0]); th++) {
            table_t t;
            table_make(&t, shapes[i]);
            engram_gather_pool_t *pool;
            CHECK_OK(engram_gather_pool_create(threads[th], -1, &pool));
            CHECK(engram_gather_pool_threads(pool) == threads[th]);
            fake_stream_t st;
            stream_start(&st);
            slot_t s;
            slot_make(&s, pool, &t, 100, 24);
            run_fetch(&t, &s, &st, 100, 24, false, false);
            run_fetch(&t, &s, &st, 100, 24, true, true);
            run_fetch(&t, &s, &st, 1, 1, false, true);
            run_fetch(&t, &s, &st, 37, 5, true, true); /* fewer rows than the slot holds */
            run_fetch(&t, &s, &st, 0, 24, false, false);
            for (uint64_t every = 1; every <= 9; every += 4) { /* every row cached, a fifth, a ninth */
                cache_t c;
                cache_make(&c, &t, every);
                run_fetch_cached(&t, &s, &st, 100, 24, false, false, &c);
                run_fetch_cached(&t, &s, &st, 100, 24, true, true, &c);
                run_fetch_cached(&t, &s, &st, 1, 1, false, true, &c);
                run_fetch_cached(&t, &s, &st, 37, 5, true, true, &c);
                run_fetch_cached(&t, &s, &st, 0, 24, false, false, &c);
                run_fetch(&t, &s, &st, 100, 24, false, true); /* and without it again */
                cache_free(&c);
            }
            stream_stop(&st);
            slot_free(&s);
            engram_gather_pool_destroy(pool);
            table_free(&t);
        }
}

/* Rows of routed peers outside [first_peer, first_peer + local_peers) are
 * left to another path: their staging rows are not written, their scales
 * (replicated) are; told (other_peers) the pool does not stage them, and
 * with a cache it places none of them. */
static void test_other_nodes_left(void)
{
    for (int v = 0; v < 3; v++) {
        const bool told = v > 0, cached = v == 2;
        table_t t;
        table_make(&t, (shape_t){4, 1, 64, 32, 1, 2, 2, 0, 4096});
        t.src.span = t.span + 2 * t.rank_stride; /* ranks 2 and 3 are this node's */
        t.src.other_peers = told;
        engram_gather_pool_t *pool;
        CHECK_OK(engram_gather_pool_create(2, -1, &pool));
        fake_stream_t st;
        stream_start(&st);
        slot_t s;
        slot_make(&s, pool, &t, 4, 2);
        cache_t cache; /* the odd rows (of every node: the fake's hits op serves any) */
        if (cached)
            cache_make(&cache, &t, 2);
        memset(s.buf.staging, 0xab, 8 * 32);
        memset(s.rows, 0xab, 8 * 32);
        int64_t idx[8] = {0, 130, 63, 255, 64, 201, 127, 128};
        const uint64_t placed = s.copy.placed;
        CHECK_OK(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 4, 2, false, cached ? &cache.dev : NULL, s.rows,
                                         s.scales_out));
        join_sync(&s, &st);
        for (int r = 0; r < 8; r++) {
            bool filled = idx[r] >= 128 || (cached && idx[r] % 2 == 1);
            for (uint32_t b = 0; b < 32; b++)
                CHECK((unsigned char)s.rows[r * 32 + b] == (filled ? byte_of((uint64_t)idx[r], b) : 0xab));
            CHECK(s.scales_out[r] == scale_of((uint64_t)idx[r], 0));
        }
        if (cached) /* this node's misses only: 130, 128 (255 and 201 hit) */
            CHECK(s.copy.placed - placed == 2);
        stream_stop(&st);
        slot_free(&s);
        if (cached)
            cache_free(&cache);
        engram_gather_pool_destroy(pool);
        table_free(&t);
    }
}

/* Several slots in flight on one stream and on two; a slot still running
 * is refused. */
static void test_in_flight(void)
{
    table_t t;
    table_make(&t, (shape_t){2, 1, 4096, 256, 1, 0, 2, 0, 16384});
    engram_gather_pool_t *pool;
    CHECK_OK(engram_gather_pool_create(4, -1, &pool));
    fake_stream_t a, b;
    stream_start(&a);
    stream_start(&b);
    enum { SLOTS = 3, TOK = 64, EPT = 24 };
    slot_t s[SLOTS];
    int64_t *idx[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        slot_make(&s[i], pool, &t, TOK, EPT);
        idx[i] = malloc(TOK * EPT * sizeof(int64_t));
        for (int r = 0; r < TOK * EPT; r++)
            idx[i][r] = (int64_t)(next_rand() % (2 * 4096));
    }
    for (int round = 0; round < 20; round++) {
        /* stream a's first job waits behind a flag held at 0: the others queue behind it */
        uint32_t gate = 0;
        CHECK(fake_wait(&a, &gate, 1) == NULL);
        for (int i = 0; i < SLOTS; i++)
            CHECK_OK(engram_gather_job_queue(s[i].job, &fake_ops, i == 2 ? &b : &a, idx[i], TOK, EPT, false, NULL,
                                             s[i].rows, s[i].scales_out));
        CHECK_STATUS(engram_gather_job_queue(s[0].job, &fake_ops, &a, idx[0], TOK, EPT, false, NULL, s[0].rows,
                                             s[0].scales_out),
                     ENGRAM_ERR_STATE);
        CHECK(strstr(engram_last_error(), "still running") != NULL);
        __atomic_store_n(&gate, 1u, __ATOMIC_RELEASE);
        for (int i = 0; i < SLOTS; i++) {
            join_sync(&s[i], i == 2 ? &b : &a);
            check_fetch(&t, &s[i], idx[i], TOK, EPT, false);
        }
    }
    for (int i = 0; i < SLOTS; i++) {
        slot_free(&s[i]);
        free(idx[i]);
    }
    stream_stop(&a);
    stream_stop(&b);
    engram_gather_pool_destroy(pool);
    table_free(&t);
}

/* A failure to queue any step: the error names the step, the stream never
 * hangs on a flag, and the slot can fetch again once the pool is done. */
static void test_queue_errors(void)
{
    table_t t;
    table_make(&t, (shape_t){2, 1, 512, 64, 1, 0, 2, 0, 2048});
    engram_gather_pool_t *pool;
    CHECK_OK(engram_gather_pool_create(2, -1, &pool));
    /* 16 x 8 rows x 64 B = 4 chunks: the fetch's stream queues the indices'
     * copy and the pool's start; the copy stream its wait for them,
     * (wait, copy) x 4, the scales, its end */
    static const struct {
        bool on_copy;
        int fail_at;
        const char *what;
    } cases[] = {{false, 1, "indices"},       {false, 2, "pool's start"},
                 {true, 1, "for the fetch's stream"}, {true, 2, "wait for a chunk"},
                 {true, 3, "chunk's copy"},   {true, 8, "wait for a chunk"},
                 {true, 10, "scales"},        {true, 11, "copy stream's end"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fake_stream_t st;
        stream_start(&st);
        slot_t s;
        slot_make(&s, pool, &t, 16, 8);
        CHECK(s.buf.max_chunks == 4);
        int64_t idx[128];
        for (int r = 0; r < 128; r++)
            idx[r] = r * 7 % 1024;
        (cases[i].on_copy ? &s.copy : &st)->fail_at = cases[i].fail_at;
        CHECK_STATUS(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 16, 8, false, NULL, s.rows, s.scales_out),
                     ENGRAM_ERR_UNSUPPORTED);
        CHECK(strstr(engram_last_error(), cases[i].what) != NULL);
        CHECK(strstr(engram_last_error(), "injected failure") != NULL);
        stream_sync(&s.copy); /* would hang on an unset flag */
        join_sync(&s, &st);   /* would hang on the copied word */
        st.fail_at = s.copy.fail_at = 0;
        CHECK_OK(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 16, 8, true, NULL, s.rows, s.scales_out));
        join_sync(&s, &st);
        check_fetch(&t, &s, idx, 16, 8, true);
        stream_stop(&st);
        slot_free(&s);
    }
    /* the join itself */
    {
        fake_stream_t st;
        stream_start(&st);
        slot_t s;
        slot_make(&s, pool, &t, 16, 8);
        int64_t idx[128] = {0};
        CHECK_OK(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 16, 8, false, NULL, s.rows, s.scales_out));
        st.fail_at = st.queued + 1;
        CHECK_STATUS(engram_gather_job_join(s.job, &fake_ops, &st), ENGRAM_ERR_UNSUPPORTED);
        CHECK(strstr(engram_last_error(), "wait for the copy stream") != NULL);
        st.fail_at = 0;
        join_sync(&s, &st);
        check_fetch(&t, &s, idx, 16, 8, false);
        stream_stop(&st);
        slot_free(&s);
    }
    /* more rows than the slot holds */
    fake_stream_t st;
    stream_start(&st);
    slot_t s;
    slot_make(&s, pool, &t, 2, 2);
    int64_t idx[6] = {0};
    CHECK_STATUS(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 3, 2, false, NULL, s.rows, s.scales_out),
                 ENGRAM_ERR_OVERFLOW);
    stream_stop(&st);
    slot_free(&s);
    engram_gather_pool_destroy(pool);
    table_free(&t);
}

/* With a cache: the fetch stream's copies, probe and hits failing to
 * queue (refused, the job abandoned), the pool's moves failing to queue
 * (the fetch's error once finished, its join passing), each followed by a
 * good fetch on the slot; a slot without the cache's buffers refused. */
static void test_queue_errors_cached(void)
{
    table_t t;
    table_make(&t, (shape_t){2, 1, 512, 64, 1, 0, 2, 0, 2048});
    cache_t c;
    cache_make(&c, &t, 3);
    engram_gather_pool_t *pool;
    CHECK_OK(engram_gather_pool_create(2, -1, &pool));
    int64_t idx[128];
    for (int r = 0; r < 128; r++)
        idx[r] = r * 7 % 1024;
    /* the fetch's stream: the indices' copies (host, GPU), the probe, the
     * pool's start, the hits */
    static const struct {
        int fail_at;
        const char *what;
    } refused[] = {{1, "indices' copy"}, {2, "indices' copy"}, {3, "cache's probe"}, {5, "cache's hits"}};
    /* the copy stream, from the pool: (staged copy, receive rows' copy,
     * place) per chunk with misses, the scales' copy, the copied word;
     * 0: the bind; -1: the last op */
    static const int pool_fail[] = {1, 2, 3, 0, -1};
    const size_t nref = sizeof(refused) / sizeof(refused[0]), npool = sizeof(pool_fail) / sizeof(pool_fail[0]);
    for (size_t i = 0; i < nref + npool; i++) {
        fake_stream_t st;
        stream_start(&st);
        slot_t s;
        slot_make(&s, pool, &t, 16, 8);
        if (i < nref) {
            st.fail_at = refused[i].fail_at;
            CHECK_STATUS(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 16, 8, false, &c.dev, s.rows,
                                                 s.scales_out),
                         ENGRAM_ERR_UNSUPPORTED);
            CHECK(strstr(engram_last_error(), refused[i].what) != NULL);
            stream_sync(&s.copy);
            join_sync(&s, &st);
        } else {
            const int at = pool_fail[i - nref];
            if (at == -1) { /* a good fetch counts the ops */
                CHECK_OK(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 16, 8, false, &c.dev, s.rows,
                                                 s.scales_out));
                join_sync(&s, &st);
                stream_sync(&s.copy);
                s.copy.fail_at = 2 * s.copy.queued;
            } else if (at == 0) {
                atomic_store(&fail_bind, true);
            } else {
                s.copy.fail_at = at;
            }
            CHECK_OK(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 16, 8, false, &c.dev, s.rows, s.scales_out));
            join_sync(&s, &st); /* passes: the pool drained the copy stream and wrote the word */
            const char *err = engram_gather_job_error(s.job);
            CHECK(err != NULL && strstr(err, "injected") != NULL);
            atomic_store(&fail_bind, false);
        }
        st.fail_at = s.copy.fail_at = 0;
        CHECK_OK(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 16, 8, true, &c.dev, s.rows, s.scales_out));
        join_sync(&s, &st);
        CHECK(engram_gather_job_error(s.job) == NULL);
        check_fetch(&t, &s, idx, 16, 8, true);
        stream_stop(&st);
        slot_free(&s);
    }
    fake_stream_t st;
    stream_start(&st);
    slot_t s;
    slot_make(&s, pool, &t, 16, 8);
    free(s.buf.hit_mask);
    s.buf.hit_mask = NULL;
    engram_gather_job_destroy(s.job);
    CHECK_OK(engram_gather_job_create(pool, &t.src, &s.buf, t.sh.chunk_bytes, &s.job));
    CHECK_STATUS(engram_gather_job_queue(s.job, &fake_ops, &st, idx, 16, 8, false, &c.dev, s.rows, s.scales_out),
                 ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "hit_mask") != NULL);
    CHECK(st.queued == 0); /* refused: nothing queued */
    stream_stop(&st);
    slot_free(&s);
    engram_gather_pool_destroy(pool);
    cache_free(&c);
    table_free(&t);
}

/* Hits and misses by entry, as an n-gram trace has them (an order's
 * sub-table hot, another's cold): whole tasks of hits (nothing staged),
 * whole tasks of misses, mixed ones and repeated rows, scales in both
 * layouts, at several pool sizes. */
static void test_structured_hits(void)
{
    table_t t;
    table_make(&t, (shape_t){2, 1, 4096, 256, 1, 0, 2, 0, 64 * 1024});
    cache_t c;
    cache_make(&c, &t, 2); /* the odd rows */
    enum { TOKENS = 96, EPT = 16 };
    static int64_t idx[TOKENS * EPT];
    for (uint32_t tok = 0; tok < TOKENS; tok++)
        for (uint32_t e = 0; e < EPT; e++) {
            /* tokens 0-15 hit everywhere, 16-31 miss everywhere, then the
             * first half of the entries hit, drawn from 64 rows (repeats) */
            const bool hit = tok < 16 || (tok >= 32 && e < EPT / 2);
            const uint64_t pick = tok >= 32 && e < EPT / 2 ? next_rand() % 64 : next_rand() % 4096;
            idx[tok * EPT + e] = (int64_t)(pick * 2 + (hit ? 1 : 0));
        }
    static const int threads[] = {1, 4, 15};
    for (size_t th = 0; th < sizeof(threads) / sizeof(threads[0]); th++) {
        engram_gather_pool_t *pool;
        CHECK_OK(engram_gather_pool_create(threads[th], -1, &pool));
        fake_stream_t st;
        stream_start(&st);
        slot_t s;
        slot_make(&s, pool, &t, TOKENS, EPT);
        for (int round = 0; round < 4; round++) {
            run_fetch_of(&t, &s, &st, idx, TOKENS, EPT, round % 2 == 1, &c);
            run_fetch_of(&t, &s, &st, idx + 16 * EPT, TOKENS - 16, EPT, false, &c); /* misses first */
        }
        stream_stop(&st);
        slot_free(&s);
        engram_gather_pool_destroy(pool);
    }
    cache_free(&c);
    table_free(&t);
}

/* Every fetch size of a slot fits its flags (engram_gather_max_chunks),
 * at chunk sizes that make fetches of few rows, many or a task each. */
static void test_every_size(void)
{
    static const uint64_t chunks[] = {64, 32 * 64 * 3, 64 * 1000};
    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
        fixture_t fx;
        fixture_open(&fx, (shape_t){2, 1, 512, 64, 0, 0, 2, 0, chunks[c]}, 3, 700, 1);
        for (uint32_t tokens = 1; tokens <= 700; tokens += tokens < 40 ? 1 : 13)
            run_fetch(&fx.t, &fx.s, &fx.st, tokens, 1, false, false);
        fixture_close(&fx);
    }
}

/* Abandoning a job whose stream has not reached the pool's start: its
 * waits pass at once, the pool never gathers it. */
static void test_abandon(void)
{
    fixture_t fx;
    fixture_open(&fx, (shape_t){1, 1, 256, 64, 0, 0, 1, 0, 1024}, 2, 8, 8);
    int64_t idx[64] = {0};
    uint32_t gate = 0;
    CHECK(fake_wait(&fx.st, &gate, 1) == NULL);
    CHECK_OK(engram_gather_job_queue(fx.s.job, &fake_ops, &fx.st, idx, 8, 8, false, NULL, fx.s.rows, NULL));
    engram_gather_job_abandon(fx.s.job);
    __atomic_store_n(&gate, 1u, __ATOMIC_RELEASE);
    join_sync(&fx.s, &fx.st); /* the pool took it and skipped its tasks */
    fixture_close(&fx);
}

/* Two slots of 16 x 8 rows of one table and pool, and an index list for each. */
typedef struct pair {
    table_t t;
    engram_gather_pool_t *pool;
    slot_t first, second;
    int64_t idx1[128], idx2[128];
} pair_t;

static void pair_open(pair_t *p, int64_t mult1, int64_t mult2)
{
    table_make(&p->t, (shape_t){2, 1, 512, 64, 1, 0, 2, 0, 2048});
    CHECK_OK(engram_gather_pool_create(2, -1, &p->pool));
    slot_make(&p->first, p->pool, &p->t, 16, 8);
    slot_make(&p->second, p->pool, &p->t, 16, 8);
    for (int r = 0; r < 128; r++) {
        p->idx1[r] = r * mult1 % 1024;
        p->idx2[r] = r * mult2 % 1024;
    }
}

/* The first fetch (row-major scales) on a, the second (column-major) on
 * b; then the second joined on b and checked. */
static void pair_fetch_second_first(pair_t *p, fake_stream_t *a, fake_stream_t *b)
{
    CHECK_OK(engram_gather_job_queue(p->first.job, &fake_ops, a, p->idx1, 16, 8, false, NULL, p->first.rows,
                                     p->first.scales_out));
    CHECK_OK(engram_gather_job_queue(p->second.job, &fake_ops, b, p->idx2, 16, 8, true, NULL, p->second.rows,
                                     p->second.scales_out));
    join_sync(&p->second, b);
    check_fetch(&p->t, &p->second, p->idx2, 16, 8, true);
}

static void pair_close(pair_t *p)
{
    slot_free(&p->first);
    slot_free(&p->second);
    engram_gather_pool_destroy(p->pool);
    table_free(&p->t);
}

/* The pool begins jobs as their streams reach them: a job posted first
 * whose stream waits on a later job's completion does not hold the pool. */
static void test_ready_out_of_order(void)
{
    pair_t p;
    pair_open(&p, 13, 29);
    fake_stream_t a, b;
    stream_start(&a);
    stream_start(&b);
    uint32_t gate = 0;
    CHECK(fake_wait(&a, &gate, 1) == NULL); /* a waits for b's fetch */
    pair_fetch_second_first(&p, &a, &b);
    CHECK(!engram_gather_job_finished(p.first.job));
    __atomic_store_n(&gate, 1u, __ATOMIC_RELEASE);
    join_sync(&p.first, &a);
    check_fetch(&p.t, &p.first, p.idx1, 16, 8, false);
    stream_stop(&a);
    stream_stop(&b);
    pair_close(&p);
}

/* Two fetches on one stream: the second is gathered, copied and joined
 * while the first's copies are held back; the first's rows come once its
 * copy stream moves. */
static void test_stream_free_before_join(void)
{
    pair_t p;
    pair_open(&p, 17, 31);
    fake_stream_t st;
    stream_start(&st);
    uint32_t gate = 0;
    CHECK(fake_wait(&p.first.copy, &gate, 1) == NULL); /* the first's copies wait */
    memset(p.first.rows, 0xee, 128 * 64);
    pair_fetch_second_first(&p, &st, &st);
    wait_finished(&p.first); /* gathered, not copied */
    CHECK((unsigned char)p.first.rows[0] == 0xee && p.first.copy.copies == 0);
    __atomic_store_n(&gate, 1u, __ATOMIC_RELEASE);
    join_sync(&p.first, &st);
    check_fetch(&p.t, &p.first, p.idx1, 16, 8, false);
    stream_stop(&st);
    pair_close(&p);
}

/* A seq that wraps: the waits compare cyclically. */
static void test_seq_wraps(void)
{
    fixture_t fx;
    fixture_open(&fx, (shape_t){1, 1, 256, 64, 0, 0, 1, 0, 1024}, 2, 8, 8);
    engram_gather_job_destroy(fx.s.job);
    *fx.s.ready = *fx.s.copied = UINT32_MAX - 1; /* a job's seq starts as its words */
    CHECK_OK(engram_gather_job_create(fx.pool, &fx.t.src, &fx.s.buf, fx.t.sh.chunk_bytes, &fx.s.job));
    for (int i = 0; i < 4; i++)
        run_fetch(&fx.t, &fx.s, &fx.st, 8, 8, false, false);
    CHECK(*fx.s.ready == 2u && *fx.s.copied == 2u);
    fixture_close(&fx);
}

static void test_pool_args(void)
{
    engram_gather_pool_t *pool = NULL;
    CHECK_STATUS(engram_gather_pool_create(0, -1, &pool), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "0 threads is outside 1..1024") != NULL);
    CHECK_STATUS(engram_gather_pool_create(1025, -1, &pool), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_gather_pool_create(1, -1, NULL), ENGRAM_ERR_INVALID);
    CHECK(pool == NULL);
    /* bound to node 0's CPUs where the machine names them; created either way */
    CHECK_OK(engram_gather_pool_create(2, 0, &pool));
    engram_gather_pool_destroy(pool);
    engram_gather_pool_destroy(NULL);
    CHECK(engram_gather_default_threads(-1, 1) >= 1);
    CHECK(engram_gather_default_threads(0, 1 << 20) == 1);
    CHECK(engram_gather_max_chunks(0, 256, 1024) == 0);
    CHECK(engram_gather_max_chunks(1, 256, 1024) == 1);
    CHECK(engram_gather_max_chunks(100, 4096, 1024) == 100);        /* a row each */
    CHECK(engram_gather_max_chunks(12288, 256, 512 * 1024) == 8);   /* at least 8 */
    CHECK(engram_gather_max_chunks(196608, 256, 512 * 1024) == 96); /* 2048 rows each: at most 512 KiB */
    CHECK(engram_gather_max_chunks(100, 256, 1 << 20) == 4);        /* a task (32 rows) each */
    CHECK(engram_gather_max_chunks(100, 96, 96 * 40) == 4);         /* 32 rows each (a task multiple) */
    CHECK(engram_gather_max_chunks(UINT32_MAX * 4ull, 1, 4) == UINT32_MAX); /* saturates */
    CHECK_OK(engram_gather_pool_create(1, -1, &pool));
    engram_gather_job_t *job;
    engram_gather_source_t src = {.row_bytes = 64};
    engram_gather_buffers_t buf = {.max_rows = 10, .max_chunks = 2};
    CHECK_STATUS(engram_gather_job_create(pool, &src, &buf, 256, &job), ENGRAM_ERR_INVALID); /* 3 chunks */
    buf.max_rows = (uint64_t)UINT32_MAX + 1;
    CHECK_STATUS(engram_gather_job_create(pool, &src, &buf, 256, &job), ENGRAM_ERR_INVALID);
    src.row_bytes = 0;
    CHECK_STATUS(engram_gather_job_create(pool, &src, &buf, 256, &job), ENGRAM_ERR_INVALID);
    uint32_t word = 0; /* consistent sizes, but no copied word or copy stream */
    src.row_bytes = 64;
    buf = (engram_gather_buffers_t){.max_rows = 10, .max_chunks = engram_gather_max_chunks(10, 64, 256),
                                    .ready = &word};
    CHECK_STATUS(engram_gather_job_create(pool, &src, &buf, 256, &job), ENGRAM_ERR_INVALID);
    buf.copied = &word;
    CHECK_STATUS(engram_gather_job_create(pool, &src, &buf, 256, &job), ENGRAM_ERR_INVALID);
    engram_gather_pool_destroy(pool);
}

int main(void)
{
    test_pool_args();
    test_shapes();
    test_other_nodes_left();
    test_in_flight();
    test_queue_errors();
    test_queue_errors_cached();
    test_structured_hits();
    test_abandon();
    test_ready_out_of_order();
    test_stream_free_before_join();
    test_seq_wraps();
    test_every_size();
    printf("host_gather_test: ok\n");
    return 0;
}
