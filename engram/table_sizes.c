/* Every byte count of a table, computed once in 64 bits with overflow
 * checks before anything is allocated: the shard, the receive slots, the
 * scale buffers (with the column-major round-up) and the routed offsets.
 * Later code (host and GPU paths) uses these numbers instead of
 * multiplying params again, so no size is computed twice or in 32 bits. */
#include "engram/internal.h"
#include "hal/log.h"

#include <unistd.h>

/* The limit of the sizes being checked; set per call, read by the helpers. */
typedef struct limit {
    uint64_t bytes;
    const char *what;
} limit_t;

/* *acc * b, or false when the product passes the limit (which also
 * catches 64-bit wraps). */
static bool mul_bounded(const limit_t *l, uint64_t *acc, uint64_t b)
{
    uint64_t r;
    if (__builtin_mul_overflow(*acc, b, &r) || r > l->bytes)
        return false;
    *acc = r;
    return true;
}

static bool add_bounded(const limit_t *l, uint64_t *acc, uint64_t b)
{
    if (b > l->bytes - *acc)
        return false;
    *acc += b;
    return true;
}

#define TOO_LARGE(fmt, ...) \
    ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, fmt " exceed %llu bytes (%s)", __VA_ARGS__, (unsigned long long)l.bytes, l.what)

uint64_t engram_host_memory_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return ENGRAM_MAX_BYTES;
    uint64_t bytes = (uint64_t)pages * (uint64_t)page;
    return bytes < ENGRAM_MAX_BYTES ? bytes : ENGRAM_MAX_BYTES;
}

engram_status_t engram_table_sizes(const engram_table_params_t *p, uint64_t ranks, uint64_t local_ranks,
                                   uint64_t slots, uint64_t limit_bytes, engram_table_sizes_t *out)
{
    const limit_t l = {limit_bytes, limit_bytes < ENGRAM_MAX_BYTES ? "this machine's memory" : "the address space"};
    engram_table_sizes_t s = {.row_stride = engram_row_stride(p->row_bytes)};
    s.shard_bytes = s.row_stride;
    if (!mul_bounded(&l, &s.shard_bytes, p->entries_per_rank))
        return TOO_LARGE("table params: shard of entries_per_rank %llu x row stride %llu (row_bytes %u)",
                         (unsigned long long)p->entries_per_rank, (unsigned long long)s.row_stride, p->row_bytes);
    /* a node span holds every local shard: routed offsets stay below it */
    uint64_t span = s.shard_bytes;
    if (!mul_bounded(&l, &span, local_ranks))
        return TOO_LARGE("table params: node span of %llu local ranks x %llu-byte shards",
                         (unsigned long long)local_ranks, (unsigned long long)s.shard_bytes);
    if (__builtin_mul_overflow(p->entries_per_rank, ranks, &s.total_entries) || s.total_entries > INT64_MAX)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW,
                            "table params: entries_per_rank %llu x %llu ranks exceed int64 indices",
                            (unsigned long long)p->entries_per_rank, (unsigned long long)ranks);
    s.slot_rows = (uint64_t)p->max_tokens * p->entries_per_token; /* < 2^64: two 32-bit factors */
    s.slot_row_bytes = s.slot_rows;
    bool fits = mul_bounded(&l, &s.slot_row_bytes, p->row_bytes);
    s.recv_bytes = s.slot_row_bytes;
    if (!fits || !mul_bounded(&l, &s.recv_bytes, slots))
        return TOO_LARGE("table params: receive slots of max_tokens %u x entries_per_token %u x row_bytes %u "
                         "x fetch_slots %llu",
                         p->max_tokens, p->entries_per_token, p->row_bytes, (unsigned long long)slots);
    if (p->scale_packs > 0) {
        /* room for the column-major layout: columns of max_tokens rounded up to 4 */
        s.slot_scale_elems = engram_scales_col_stride(p->max_tokens);
        s.scales_recv_bytes = sizeof(uint32_t);
        if (!mul_bounded(&l, &s.slot_scale_elems, p->entries_per_token) ||
            !mul_bounded(&l, &s.slot_scale_elems, p->scale_packs) ||
            !mul_bounded(&l, &s.scales_recv_bytes, s.slot_scale_elems) || !mul_bounded(&l, &s.scales_recv_bytes, slots))
            return TOO_LARGE("table params: scale slots of max_tokens %u (rounded up to 4) x entries_per_token %u "
                             "x scale_packs %u x 4 bytes x fetch_slots %llu",
                             p->max_tokens, p->entries_per_token, p->scale_packs, (unsigned long long)slots);
        s.scales_bytes = sizeof(uint32_t);
        if (!mul_bounded(&l, &s.scales_bytes, s.total_entries) || !mul_bounded(&l, &s.scales_bytes, p->scale_packs))
            return TOO_LARGE("table params: replicated scales of %llu entries (entries_per_rank %llu x %llu ranks) "
                             "x scale_packs %u x 4 bytes",
                             (unsigned long long)s.total_entries, (unsigned long long)p->entries_per_rank,
                             (unsigned long long)ranks, p->scale_packs);
    }
    uint64_t all = 0;
    if (!add_bounded(&l, &all, s.shard_bytes) || !add_bounded(&l, &all, s.recv_bytes) ||
        !add_bounded(&l, &all, s.scales_recv_bytes) || !add_bounded(&l, &all, s.scales_bytes))
        return TOO_LARGE("table params: shard %llu + receive %llu + scale slots %llu + scales %llu bytes in all",
                         (unsigned long long)s.shard_bytes, (unsigned long long)s.recv_bytes,
                         (unsigned long long)s.scales_recv_bytes, (unsigned long long)s.scales_bytes);
    *out = s;
    return ENGRAM_OK;
}

engram_status_t engram_storage_size_hint(uint64_t entries_per_rank, uint32_t row_bytes, uint64_t max_rows_per_fetch,
                                         engram_storage_hint_t *out)
{
    if (out == NULL || entries_per_rank == 0 || row_bytes == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "storage_size_hint: out must not be NULL, entries_per_rank and "
                                                "row_bytes must be > 0");
    const limit_t l = {ENGRAM_MAX_BYTES, "the address space"};
    uint64_t stride = engram_row_stride(row_bytes), table = stride, recv = stride;
    if (!mul_bounded(&l, &table, entries_per_rank))
        return TOO_LARGE("storage_size_hint: entries_per_rank %llu x row stride %llu (row_bytes %u)",
                         (unsigned long long)entries_per_rank, (unsigned long long)stride, row_bytes);
    if (!mul_bounded(&l, &recv, max_rows_per_fetch))
        return TOO_LARGE("storage_size_hint: max_rows_per_fetch %llu x row stride %llu (row_bytes %u)",
                         (unsigned long long)max_rows_per_fetch, (unsigned long long)stride, row_bytes);
    out->row_stride = stride;
    out->cpu_table_bytes = table;
    out->gpu_recv_bytes = recv;
    return ENGRAM_OK;
}
