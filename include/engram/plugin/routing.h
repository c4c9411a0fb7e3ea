/* Routing decomposition and flush control, header-only and usable from C
 * and CUDA: the host fetch loop, the engram layer's GPU kernels and those
 * of GPU-initiated transports (<engram/plugin/gpu_launcher.h>) include this
 * one file, so the math cannot drift between them; hence it is part of the
 * plugin API, below both. A launcher reads engram_gpu_issue_t's shape
 * (engram_route_shape_t) and applies engram_route_index (or
 * engram_route_owner) to every row and the flush policy per (queue, peer).
 *
 *   owner = idx / entries_per_rank, local = idx % entries_per_rank
 *   direct: peer = owner,            intra = 0
 *   hybrid: peer = owner / scaleup,  intra = owner % scaleup
 *   src_off = intra * rank_stride + local * row_stride      (64-bit)
 *
 * An index outside [0, ranks * entries_per_rank) never becomes an offset. */
#ifndef ENGRAM_PLUGIN_ROUTING_H
#define ENGRAM_PLUGIN_ROUTING_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define ENGRAM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ENGRAM_HOST_DEVICE static inline
#endif

/* ENGRAM_GET_AGGREGATE of <engram/plugin/transport.h>, which nvcc-compiled
 * kernels do not include (engram/context.c checks the two are equal). */
#define ENGRAM_ROUTE_AGGREGATE 1u

typedef struct engram_route_shape {
    uint64_t entries_per_rank;
    uint64_t total_entries; /* ranks * entries_per_rank */
    uint64_t rank_stride;   /* bytes between local ranks' shards in a node span */
    uint64_t row_stride;    /* bytes between rows of a shard */
    uint32_t scaleup;       /* ranks per node (hybrid); 1 in direct mode */
    uint32_t hybrid;        /* 0 = direct, 1 = hybrid (rail) */
    int32_t epr_log2;       /* log2(entries_per_rank) when a power of two, else -1 */
} engram_route_shape_t;

/* log2(v) for a power of two, else -1: lets routing shift instead of divide. */
ENGRAM_HOST_DEVICE int32_t engram_route_log2(uint64_t v)
{
    if (v == 0 || (v & (v - 1)) != 0)
        return -1;
    int32_t l = 0;
    while ((v >>= 1) != 0)
        l++;
    return l;
}

typedef struct engram_route {
    uint32_t peer;    /* rank (direct) or node (hybrid) */
    uint64_t src_off; /* byte offset in the peer's registered region */
} engram_route_t;

/* owner = idx / entries_per_rank, local = idx % entries_per_rank (a shift
 * and a mask when entries_per_rank is a power of two). */
ENGRAM_HOST_DEVICE void engram_route_split(const engram_route_shape_t *s, uint64_t idx, uint64_t *owner,
                                           uint64_t *local)
{
    if (s->epr_log2 >= 0) {
        *owner = idx >> s->epr_log2;
        *local = idx & (s->entries_per_rank - 1);
    } else {
        *owner = idx / s->entries_per_rank;
        *local = idx % s->entries_per_rank;
    }
}

/* false (and *r untouched) for an out-of-range index. */
ENGRAM_HOST_DEVICE bool engram_route_index(const engram_route_shape_t *s, int64_t idx, engram_route_t *r)
{
    if (idx < 0 || (uint64_t)idx >= s->total_entries)
        return false;
    uint64_t owner, local;
    engram_route_split(s, (uint64_t)idx, &owner, &local);
    uint64_t peer = s->hybrid ? owner / s->scaleup : owner;
    uint64_t intra = s->hybrid ? owner % s->scaleup : 0;
    r->peer = (uint32_t)peer;
    r->src_off = intra * s->rank_stride + local * s->row_stride;
    return true;
}

/* The rank that holds idx (in range) and the row's offset in that rank's
 * own shard, whatever the table's mode: where a get to the owner reads
 * when every rank registers only its own shard (hybrid mode's rows of
 * other nodes on a GPU-initiated transport with several ranks per node). */
ENGRAM_HOST_DEVICE void engram_route_owner(const engram_route_shape_t *s, int64_t idx, uint32_t *owner,
                                           uint64_t *off)
{
    uint64_t o, local;
    engram_route_split(s, (uint64_t)idx, &o, &local);
    *owner = (uint32_t)o;
    *off = local * s->row_stride;
}

/* Flush control: counter is the (queue, peer) position in the current run
 * of flush_depth requests of this fetch (0 = none issued yet, then cycling
 * 1..flush_depth). Every get carries AGGREGATE except each flush_depth-th,
 * which rings the doorbell. Returns the get flags. No division: this runs
 * once per row. */
ENGRAM_HOST_DEVICE unsigned engram_flush_next_flags(uint32_t *counter, uint32_t flush_depth)
{
    uint32_t n = *counter >= flush_depth ? 1u : *counter + 1u;
    *counter = n;
    return n == flush_depth ? 0u : ENGRAM_ROUTE_AGGREGATE;
}

/* After issue: a (queue, peer) that received requests is flushed once. */
ENGRAM_HOST_DEVICE bool engram_flush_needed(uint32_t counter)
{
    return counter != 0;
}

/* The receive layout's column stride of TMA-aligned column-major scales
 * (the engram layer gathers scales; a launcher moves rows only): num_tokens
 * rounded up to a multiple of 4, in 64 bits (in 32 bits UINT32_MAX - 2
 * rounds to 0). */
ENGRAM_HOST_DEVICE uint64_t engram_scales_col_stride(uint32_t num_tokens)
{
    return ((uint64_t)num_tokens + 3u) & ~(uint64_t)3u;
}

#endif
