/* The host fake of the stream operations and the fixtures of the CPU
 * tier's host_gather tests (host_gather_fake.h). */
#include "engram/gpu/host_gather_fake.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/log.h"
#include "tests/check.h"

/* ---- the fake stream ---- */



static void *stream_main(void *arg)
{
    fake_stream_t *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (s->head == NULL)
            pthread_cond_wait(&s->cv, &s->mu);
        op_t *o = s->head;
        s->head = o->next;
        if (s->head == NULL)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        int kind = o->kind;
        if (kind == OP_WRITE)
            __atomic_store_n((uint32_t *)o->dst, o->value, __ATOMIC_RELEASE);
        else if (kind == OP_WAIT) /* cyclic, as CUDA's */
            while ((int32_t)(__atomic_load_n(o->flag, __ATOMIC_ACQUIRE) - o->value) < 0)
                sched_yield();
        else if (kind == OP_COPY) {
            memcpy(o->dst, o->src, o->bytes);
            s->copies++;
        } else if (kind == OP_PROBE) {
            const fake_cache_t *c = o->cache;
            memset(o->mask, 0, (o->count + 31) / 32 * sizeof(uint32_t));
            for (uint32_t r = 0; r < o->count; r++) {
                o->slots[r] = engram_hot_find(&c->hash, o->indices[r]);
                if (o->slots[r] != ENGRAM_HOT_MISS)
                    o->mask[r / 32] |= 1u << (r % 32);
            }
        } else if (kind == OP_HITS) {
            const fake_cache_t *c = o->cache;
            for (uint32_t r = 0; r < o->count; r++)
                if (o->slots[r] != ENGRAM_HOT_MISS) {
                    memcpy((char *)o->dst + (uint64_t)r * o->row_bytes,
                           c->rows + (uint64_t)o->slots[r] * o->row_bytes, o->row_bytes);
                    s->hit_rows++;
                }
        } else if (kind == OP_NOTIFY) {
            o->fn(o->arg);
            s->notified++;
        } else if (kind == OP_RECORD) {
            atomic_store(&o->event->done, o->value);
        } else if (kind == OP_WAIT_EVENT) { /* cyclic */
            while ((int32_t)(atomic_load(&o->event->done) - o->value) < 0)
                sched_yield();
        } else if (kind == OP_PLACE) {
            const uint32_t n = o->count;
            for (uint32_t k = 0; k < n; k++)
                memcpy((char *)o->dst + (uint64_t)o->dst_rows[k] * o->row_bytes,
                       (const char *)o->src + (uint64_t)k * o->row_bytes, o->row_bytes);
            s->placed += n;
        }
        free(o);
        pthread_mutex_lock(&s->mu);
        s->pending--;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (kind == OP_QUIT)
            return NULL;
    }
}

/* Recorded into the stream's graph while it captures; otherwise queued,
 * an event's record and wait taking their place among the event's
 * records now (as CUDA's: a wait is for the record last queued). */
static const char *push_live(fake_stream_t *s, op_t o);

static const char *push(fake_stream_t *s, op_t o)
{
    pthread_mutex_lock(&s->mu);
    int n = ++s->queued;
    fake_graph_t *g = s->rec;
    pthread_mutex_unlock(&s->mu);
    if (s->fail_at != 0 && n == s->fail_at)
        return "injected failure";
    if (g != NULL) {
        if (g->n == g->cap) {
            g->cap = g->cap ? 2 * g->cap : 64;
            g->ops = realloc(g->ops, g->cap * sizeof(*g->ops));
            CHECK(g->ops != NULL);
        }
        g->ops[g->n++] = (struct fake_graph_op){.stream = s, .op = o};
        return NULL;
    }
    if (o.kind == OP_RECORD)
        o.value = atomic_fetch_add(&o.event->pushed, 1) + 1;
    else if (o.kind == OP_WAIT_EVENT)
        o.value = atomic_load(&o.event->pushed);
    return push_live(s, o);
}

static const char *push_live(fake_stream_t *s, op_t o)
{
    op_t *p = malloc(sizeof(*p));
    CHECK(p != NULL);
    *p = o;
    p->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = p;
    else
        s->head = p;
    s->tail = p;
    s->pending++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

const char *fake_write(void *stream, void *flag_dev, uint32_t value)
{
    return push(stream, (op_t){.kind = OP_WRITE, .dst = flag_dev, .value = value});
}

const char *fake_wait(void *stream, const void *flag_dev, uint32_t value)
{
    return push(stream, (op_t){.kind = OP_WAIT, .flag = flag_dev, .value = value});
}

const char *fake_copy(void *stream, void *dst, const void *src, size_t bytes)
{
    return push(stream, (op_t){.kind = OP_COPY, .dst = dst, .src = src, .bytes = bytes});
}

const char *fake_probe(void *stream, const void *cache_dev, const int64_t *indices, uint32_t num_rows,
                              uint32_t *slots_dev, uint32_t *hit_mask)
{
    return push(stream, (op_t){.kind = OP_PROBE, .cache = cache_dev, .indices = indices, .count = num_rows,
                               .slots = slots_dev, .mask = hit_mask});
}

const char *fake_hits(void *stream, const void *cache_dev, const uint32_t *slots_dev, uint32_t num_rows,
                             uint32_t row_bytes, char *rows_dst)
{
    return push(stream, (op_t){.kind = OP_HITS, .cache = cache_dev, .slots = (uint32_t *)slots_dev,
                               .count = num_rows, .row_bytes = row_bytes, .dst = rows_dst});
}

atomic_bool fail_bind; /* the pool's bind fails */

const char *fake_bind(const void *cache_dev)
{
    CHECK(cache_dev != NULL);
    return atomic_load(&fail_bind) ? "injected bind failure" : NULL;
}

const char *fake_place(void *stream, const void *cache_dev, const char *staged, const uint32_t *dst_rows,
                              uint32_t count, uint32_t row_bytes, char *rows_dst)
{
    CHECK(cache_dev != NULL && count > 0);
    return push(stream, (op_t){.kind = OP_PLACE, .src = staged, .dst_rows = dst_rows, .count = count,
                               .row_bytes = row_bytes, .dst = rows_dst});
}


const char *fake_drain(void *stream)
{
    stream_sync(stream);
    return NULL;
}

const char *fake_link(void *from, void *to, void *event)
{
    fake_stream_t *f = from, *t = to;
    const char *err = push(f, (op_t){.kind = OP_RECORD, .event = event});
    if (err != NULL)
        return err;
    fake_graph_t *g = f->rec;
    if (g != NULL && t->rec == NULL) { /* drawn into the capture */
        CHECK(g->num_streams < 8);
        g->streams[g->num_streams++] = t;
        t->rec = g;
    }
    return push(t, (op_t){.kind = OP_WAIT_EVENT, .event = event});
}

const char *fake_notify(void *stream, void (*fn)(void *), void *arg)
{
    return push(stream, (op_t){.kind = OP_NOTIFY, .fn = fn, .arg = arg});
}

void fake_graph_begin(fake_graph_t *g, fake_stream_t *s)
{
    memset(g, 0, sizeof(*g));
    g->streams[g->num_streams++] = s;
    s->rec = g;
}

void fake_graph_end(fake_graph_t *g)
{
    for (int i = 0; i < g->num_streams; i++)
        g->streams[i]->rec = NULL;
}

void fake_graph_replay(const fake_graph_t *g)
{
    for (size_t i = 0; i < g->n; i++) {
        op_t o = g->ops[i].op;
        fake_stream_t *s = g->ops[i].stream;
        if (o.kind == OP_RECORD)
            o.value = atomic_fetch_add(&o.event->pushed, 1) + 1;
        else if (o.kind == OP_WAIT_EVENT)
            o.value = atomic_load(&o.event->pushed);
        CHECK(push_live(s, o) == NULL);
    }
}

void fake_graph_free(fake_graph_t *g)
{
    free(g->ops);
    memset(g, 0, sizeof(*g));
}

const engram_gather_stream_ops_t fake_ops = {fake_write, fake_wait, fake_copy, fake_probe,
                                                    fake_hits,  fake_bind, fake_place, fake_drain, fake_link, fake_notify};

void stream_start(fake_stream_t *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    CHECK(pthread_create(&s->thread, NULL, stream_main, s) == 0);
}

void stream_sync(fake_stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->pending > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

void stream_stop(fake_stream_t *s)
{
    s->fail_at = 0;
    CHECK(push(s, (op_t){.kind = OP_QUIT}) == NULL);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

/* ---- a table and a slot's buffers ---- */


unsigned char byte_of(uint64_t idx, uint32_t b)
{
    return (unsigned char)(idx * 131u + b * 7u + 1u);
}

uint32_t scale_of(uint64_t idx, uint32_t k)
{
    return (uint32_t)(idx * 2654435761u) ^ (k + 1u);
}

void table_make(table_t *t, shape_t sh)
{
    t->sh = sh;
    t->row_stride = (sh.row_bytes + 31u) / 32u * 32u;
    t->rank_stride = sh.entries_per_rank * t->row_stride;
    uint64_t total = (uint64_t)sh.ranks * sh.entries_per_rank;
    t->span = calloc(sh.ranks, t->rank_stride);
    CHECK(t->span != NULL);
    for (uint64_t idx = 0; idx < total; idx++)
        for (uint32_t b = 0; b < sh.row_bytes; b++)
            t->span[(idx / sh.entries_per_rank) * t->rank_stride + (idx % sh.entries_per_rank) * t->row_stride + b] =
                (char)byte_of(idx, b);
    t->scales = sh.packs ? malloc(total * sh.packs * sizeof(uint32_t)) : NULL;
    for (uint64_t i = 0; i < total * sh.packs; i++)
        t->scales[i] = scale_of(i / sh.packs, (uint32_t)(i % sh.packs));
    bool hybrid = sh.scaleup > 1;
    engram_route_shape_t rs = {
        .entries_per_rank = sh.entries_per_rank,
        .total_entries = total,
        .rank_stride = t->rank_stride,
        .row_stride = t->row_stride,
        .scaleup = hybrid ? sh.scaleup : 1,
        .hybrid = hybrid,
        .epr_log2 = engram_route_log2(sh.entries_per_rank),
    };
    t->src = (engram_gather_source_t){
        .shape = rs,
        .span = t->span, /* routed peer first_peer (0) first */
        .peer_stride = hybrid ? 0 : t->rank_stride,
        .first_peer = sh.first_peer,
        .local_peers = sh.local_peers,
        .row_bytes = sh.row_bytes,
        .scales = t->scales,
        .packs = sh.packs,
    };
}

void table_free(table_t *t)
{
    free(t->span);
    free(t->scales);
}


uint64_t max_scale_elems(const shape_t *sh, uint32_t max_tokens, uint32_t ept)
{
    return (uint64_t)ept * sh->packs * (((uint64_t)max_tokens + 3) & ~3ull) + (uint64_t)max_tokens * ept * sh->packs;
}

void slot_make(slot_t *s, engram_gather_pool_t *pool, const table_t *t, uint32_t max_tokens, uint32_t ept)
{
    const shape_t *sh = &t->sh;
    uint64_t rows = (uint64_t)max_tokens * ept;
    uint32_t chunks = engram_gather_max_chunks(rows, sh->row_bytes, sh->chunk_bytes);
    uint64_t selems = max_scale_elems(sh, max_tokens, ept);
    s->buf = (engram_gather_buffers_t){
        .indices = calloc(rows ? rows : 1, sizeof(int64_t)),
        .staging = calloc(rows ? rows : 1, sh->row_bytes),
        .scales = sh->packs ? calloc(selems, sizeof(uint32_t)) : NULL,
        .flags = calloc(chunks ? chunks : 1, sizeof(uint32_t)),
        .dst_rows = calloc(rows ? rows : 1, sizeof(uint32_t)),
        .hit_mask = calloc(rows / 32 + 1, sizeof(uint32_t)),
        .indices_dev = calloc(rows ? rows : 1, sizeof(int64_t)),
        .hit_slots = calloc(rows ? rows : 1, sizeof(uint32_t)),
        .stage_dev = calloc(rows ? rows : 1, sh->row_bytes),
        .dst_dev = calloc(rows ? rows : 1, sizeof(uint32_t)),
        .max_rows = rows,
        .max_chunks = chunks,
    };
    s->buf.flags_dev = s->buf.flags;
    s->ready = calloc(1, sizeof(uint32_t));
    s->buf.ready = s->ready;
    s->buf.ready_dev = s->ready;
    s->copied = calloc(1, sizeof(uint32_t));
    s->buf.copied = s->copied;
    s->buf.copied_dev = s->copied;
    stream_start(&s->copy);
    s->buf.copy_stream = &s->copy;
    s->rows = calloc(rows ? rows : 1, sh->row_bytes);
    s->scales_out = sh->packs ? calloc(selems, sizeof(uint32_t)) : NULL;
    CHECK(s->buf.indices && s->buf.staging && s->buf.flags && s->rows);
    CHECK_OK(engram_gather_job_create(pool, &t->src, &s->buf, sh->chunk_bytes, &s->job));
}

void slot_free(slot_t *s)
{
    stream_stop(&s->copy);
    engram_gather_job_destroy(s->job);
    free(s->buf.indices);
    free(s->buf.staging);
    free(s->buf.scales);
    free(s->buf.flags);
    free(s->buf.dst_rows);
    free(s->buf.hit_mask);
    free(s->buf.indices_dev);
    free(s->buf.hit_slots);
    free(s->buf.stage_dev);
    free(s->buf.dst_dev);
    free(s->ready);
    free(s->copied);
    free(s->rows);
    free(s->scales_out);
}

void wait_finished(slot_t *s)
{
    while (!engram_gather_job_finished(s->job))
        sched_yield();
}


void fixture_open(fixture_t *fx, shape_t sh, int threads, uint32_t max_tokens, uint32_t ept)
{
    table_make(&fx->t, sh);
    CHECK_OK(engram_gather_pool_create(threads, -1, &fx->pool));
    stream_start(&fx->st);
    slot_make(&fx->s, fx->pool, &fx->t, max_tokens, ept);
}

void fixture_close(fixture_t *fx)
{
    stream_stop(&fx->st);
    slot_free(&fx->s);
    engram_gather_pool_destroy(fx->pool);
    table_free(&fx->t);
}

/* The fetch joined on st, st drained: its rows are there, the pool done. */
void join_sync(slot_t *s, fake_stream_t *st)
{
    CHECK_OK(engram_gather_job_join(s->job, &fake_ops, st));
    stream_sync(st);
    wait_finished(s);
}

/* Checks one fetch's rows, scales and tally against the table. */
void check_fetch(const table_t *t, slot_t *s, const int64_t *idx, uint32_t tokens, uint32_t ept, bool col)
{
    const shape_t *sh = &t->sh;
    uint64_t total = (uint64_t)sh->ranks * sh->entries_per_rank, bad = 0, first = UINT64_MAX;
    uint64_t col_stride = ((uint64_t)tokens + 3) & ~3ull;
    for (uint32_t r = 0; r < tokens * ept; r++) {
        bool ok = idx[r] >= 0 && (uint64_t)idx[r] < total;
        if (!ok && bad++ == 0)
            first = r;
        for (uint32_t b = 0; b < sh->row_bytes; b++)
            CHECK((unsigned char)s->rows[(uint64_t)r * sh->row_bytes + b] == (ok ? byte_of((uint64_t)idx[r], b) : 0));
        uint32_t tok = r / ept, e = r % ept;
        for (uint32_t k = 0; k < sh->packs; k++) {
            uint64_t at = col ? ((uint64_t)e * sh->packs + k) * col_stride + tok : (uint64_t)r * sh->packs + k;
            CHECK(s->scales_out[at] == (ok ? scale_of((uint64_t)idx[r], k) : 0u));
        }
    }
    uint64_t got_bad, got_first;
    engram_gather_job_bad(s->job, &got_bad, &got_first);
    CHECK(got_bad == bad);
    CHECK(got_first == first);
}

uint64_t rng = 88172645463325252ull;
uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}


void cache_make(cache_t *c, const table_t *t, uint64_t every)
{
    uint64_t total = (uint64_t)t->sh.ranks * t->sh.entries_per_rank, n = 0;
    int64_t *list = malloc((total / every + 1) * sizeof(*list));
    c->rows = malloc((total / every + 1) * t->sh.row_bytes);
    CHECK(list != NULL && c->rows != NULL);
    for (uint64_t idx = 1; idx < total; idx += every, n++) {
        list[n] = (int64_t)idx;
        for (uint32_t b = 0; b < t->sh.row_bytes; b++)
            c->rows[n * t->sh.row_bytes + b] = (char)byte_of(idx, b);
    }
    CHECK_OK(engram_hot_hash_build(list, n, total, &c->keys, &c->vals, &c->dev.hash.log2));
    free(list);
    c->dev.hash.keys = c->keys;
    c->dev.hash.vals = c->vals;
    c->dev.rows = c->rows;
}

void cache_free(cache_t *c)
{
    free(c->keys);
    free(c->vals);
    free(c->rows);
}

/* One fetch of idx[tokens x ept] through `cache` when not NULL: then only
 * the misses are staged and placed. */
void run_fetch_of(const table_t *t, slot_t *s, fake_stream_t *st, const int64_t *idx, uint32_t tokens,
                         uint32_t ept, bool col, const cache_t *cache)
{
    const uint64_t n = (uint64_t)tokens * ept;
    memset(s->rows, 0xee, n * t->sh.row_bytes); /* nothing left from an earlier fetch */
    const uint64_t placed = s->copy.placed, hit_rows = st->hit_rows;
    CHECK_OK(engram_gather_job_queue(s->job, &fake_ops, st, idx, tokens, ept, col, cache ? &cache->dev : NULL,
                                     s->rows, s->scales_out));
    join_sync(s, st);
    check_fetch(t, s, idx, tokens, ept, col);
    uint64_t hits = 0;
    for (uint64_t r = 0; cache != NULL && r < n; r++)
        hits += engram_hot_find(&cache->dev.hash, idx[r]) != ENGRAM_HOT_MISS;
    CHECK(engram_gather_job_hits(s->job) == hits);
    CHECK(st->hit_rows - hit_rows == hits); /* on the fetch's stream, beside the pool */
    CHECK(s->copy.placed - placed == (cache != NULL ? n - hits : 0)); /* only misses cross */
}

/* One fetch of tokens x ept random rows (a few bad when `bad`). */
void run_fetch_cached(const table_t *t, slot_t *s, fake_stream_t *st, uint32_t tokens, uint32_t ept, bool col,
                             bool bad, const cache_t *cache)
{
    uint64_t total = (uint64_t)t->sh.ranks * t->sh.entries_per_rank, n = (uint64_t)tokens * ept;
    int64_t *idx = malloc((n ? n : 1) * sizeof(*idx));
    CHECK(idx != NULL);
    for (uint64_t r = 0; r < n; r++)
        idx[r] = (int64_t)(next_rand() % total);
    if (bad && n > 3) {
        idx[n / 2] = -1;
        idx[n / 3] = (int64_t)total;
        idx[n - 1] = INT64_MIN;
    }
    run_fetch_of(t, s, st, idx, tokens, ept, col, cache);
    free(idx);
}

void run_fetch(const table_t *t, slot_t *s, fake_stream_t *st, uint32_t tokens, uint32_t ept, bool col,
                      bool bad)
{
    run_fetch_cached(t, s, st, tokens, ept, col, bad, NULL);
}

