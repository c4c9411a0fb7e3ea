/* The GPU fetch kernel's arguments and launcher, shared by the C side
 * (gpu_uva.c) and the CUDA side (gather.cu). */
#ifndef ENGRAM_GPU_GATHER_H
#define ENGRAM_GPU_GATHER_H

#include <stdint.h>
#include "engram/gpu/hot_hash.h"
#include "engram/plugin/routing.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One block's report, written by the block's thread 0 into host-mapped
 * memory: its bad-index tally (no counters to reset and no copy back per
 * fetch) and, last, the fetch's sequence number once all the block's rows
 * are written (args.seq; kernel-signalled completion, gpu_fetch.c). */
typedef struct engram_gpu_bad {
    uint64_t count;
    uint64_t first_row; /* lowest token * entries_per_token + entry; UINT64_MAX if none */
    uint64_t hits;      /* rows the hot-row cache served */
    uint64_t seq;       /* args.seq of the last launch that signalled through this report */
} engram_gpu_bad_t;

typedef struct engram_gpu_gather_args {
    engram_route_shape_t shape;
    const int64_t *indices; /* device, [num_rows] */
    const char *span;       /* this node's shards, back to back at shape.rank_stride */
    uint64_t peer_stride;   /* span bytes per routed peer: rank_stride (direct), 0 (hybrid: in src_off) */
    uint32_t first_peer;    /* routed peer of the span's first shard */
    uint32_t local_peers;   /* routed peers in the span; rows of the others are left to the host transport */
    char *rows;             /* device, [num_rows][row_bytes] */
    uint32_t row_bytes;
    uint32_t num_rows; /* num_tokens * entries_per_token */
    uint32_t entries_per_token;
    uint32_t num_tokens;
    const uint32_t *scales; /* device, replicated [total_entries][packs]; NULL when packs == 0 */
    uint32_t *scales_out;   /* device, row-major or column-major (engram_scales_col_stride) */
    uint32_t packs;
    uint32_t col_major;
    engram_gpu_bad_t *bad; /* host-mapped, [blocks] */
    /* dedup (engram/dedup.h): device [num_rows], the first row holding each
     * row's index (the row itself for firsts, bad indices and rows of
     * other nodes); rows with another first are left to the copy kernel.
     * NULL: every row is loaded. */
    const uint32_t *first;
    /* Nonzero: every block stores it into its report's seq after its rows,
     * scales and tally are written (and fenced): the host sees the fetch
     * complete without an event behind the kernel on the stream. 0: no
     * signal (an event or a later kernel tells completion). */
    uint64_t seq;
    /* Nonzero: the kernel loads its first step's rows before it waits for
     * the work before it on the stream, and checks their indices after
     * (gather.cu). 0 under graph capture, where memory a graph allocates
     * may not be mapped before its allocation runs. */
    uint32_t speculate;
    /* Nonzero: launched without programmatic dependent launch (under graph
     * capture: a captured kernel launched early may read the indices before
     * the work that writes them at each replay has landed). */
    uint32_t unchained;
    /* The hot-row cache (hot.log2 0: none): rows it holds are read from
     * hot_rows (device, [slot][row_bytes]) instead of the span. */
    engram_hot_hash_t hot;
    const char *hot_rows;
} engram_gpu_gather_args_t;

/* Loads every kernel of this file now. With CUDA's lazy loading a
 * kernel's first launch loads its module, which waits for the device to go
 * idle: behind a kernel that spins until a host thread moves data (GIN's
 * proxy mode), that first launch would never return. Returns the
 * cudaError_t. */
int engram_gpu_kernels_load(void);

/* Launches `blocks` blocks (one per SM) on `stream` (a cudaStream_t);
 * returns the launch's cudaError_t. */
int engram_gpu_gather_launch(const engram_gpu_gather_args_t *a, int blocks, void *stream);

/* Rows staged back to back in host memory (mapped for the GPU) are placed
 * at their receive rows: rows[dst_row[k]] = staged[src[k]] for k < count
 * (src NULL: staged[k]; a repeated row's entry names its first's staged
 * row). Returns the launch's cudaError_t. */
int engram_gpu_scatter_launch(const char *staged, const uint32_t *dst_row, const uint32_t *src, uint32_t count,
                              uint32_t row_bytes, char *rows, int blocks, void *stream);

/* host_gather's cache kernels take at most `blocks` blocks, as many as
 * their rows need. */
/* The cache probe of indices[num_rows] (GPU memory): slots[r] = the cache
 * slot of indices[r] or ENGRAM_HOT_MISS (device), and bit r % 32 of
 * hit_mask[r / 32] set for a hit (every word of the rows written; host
 * memory the GPU writes, visible once the kernel is done). hash: device
 * arrays. */
int engram_gpu_hot_probe_launch(const engram_hot_hash_t *hash, const int64_t *indices, uint32_t num_rows,
                                uint32_t *slots, uint32_t *hit_mask, int blocks, void *stream);
/* rows[r] = hot_rows[slots[r]] for each r < num_rows with a slot; other
 * rows are left alone. */
int engram_gpu_hot_hits_launch(const char *hot_rows, const uint32_t *slots, uint32_t num_rows, uint32_t row_bytes,
                               char *rows, int blocks, void *stream);
/* rows[dst_rows[k]] = staged[k] for k < count, all GPU memory. */
int engram_gpu_place_launch(const char *staged, const uint32_t *dst_rows, uint32_t count, uint32_t row_bytes,
                            char *rows, int blocks, void *stream);

/* dedup on the GPU, before the gather kernel: clears `table` (device,
 * 2^table_log2 entries) and fills a->first (writable: first) from
 * a->indices with a->shape's routing: one winner per distinct index of
 * this node's rows by atomicCAS in an open-addressing table. Returns the
 * first cudaError_t. */
int engram_gpu_dedup_mark_launch(const engram_gpu_gather_args_t *a, uint32_t *table, uint32_t table_log2,
                                 uint32_t *first, int blocks, void *stream);
/* After the gather kernel: rows[r] = rows[first[r]] where they differ. */
int engram_gpu_dedup_copy_launch(const uint32_t *first, uint32_t num_rows, uint32_t row_bytes, char *rows,
                                 int blocks, void *stream);

#ifdef __cplusplus
}
#endif
#endif
