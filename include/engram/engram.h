/* engram: one-sided remote row lookups over a table sharded across ranks.
 *
 * Lifecycle (every call marked "collective" is made by all ranks of the
 * group, in the same order):
 *   engram_config_create -> engram_context_create (collective: selects and
 *   opens the transport) -> engram_table_create (collective) -> engram_write
 *   (collective) -> engram_fetch / engram_test / engram_wait /
 *   engram_fetch_release (local, any number, up to fetch_slots in flight) ->
 *   engram_table_destroy (collective) -> engram_context_destroy (collective).
 *
 * Errors: every call returns an engram_status_t; the details of a failure
 * are logged once and available from engram_last_error(). Out-parameters are
 * set only on success (the one exception, ENGRAM_ERR_BAD_INDEX from
 * engram_wait, is documented there). Sizes: engram_table_create and
 * engram_storage_size_hint compute every size in 64 bits and refuse, with
 * ENGRAM_ERR_OVERFLOW naming the params, a table whose buffers pass the
 * address space (2^47 bytes), or for recv=HOST this machine's memory.
 *
 * Public header (installed as <engram/engram.h>); link -lengram
 * (pkg-config engram, or CMake find_package(engram) -> engram::engram). */
#ifndef ENGRAM_ENGRAM_H
#define ENGRAM_ENGRAM_H

#include <stddef.h>
#include <stdint.h>
#include "engram/backend.h"
#include "engram/config.h"
#include "engram/group.h"
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version these headers belong to; engram_version() reports the
 * library's. libengram.so.<MAJOR> keeps its ABI within a major version
 * (symbols versioned ENGRAM_<MAJOR>.<MINOR>). */
#define ENGRAM_VERSION_MAJOR 0
#define ENGRAM_VERSION_MINOR 1
#define ENGRAM_VERSION_PATCH 0
#define ENGRAM_VERSION_STRING "0.1.0"

/* The running library's version: "major.minor.patch", and each part into
 * the pointers that are not NULL. */
ENGRAM_API const char *engram_version(int *major, int *minor, int *patch);

#define ENGRAM_ROW_ALIGN 32u /* table rows are stored at a multiple of this */

typedef struct engram_context engram_context_t;
typedef struct engram_table engram_table_t;
typedef struct engram_fetch engram_fetch_t;

typedef enum engram_recv_location {
    ENGRAM_RECV_HOST = 0, /* rows land in host memory */
    ENGRAM_RECV_CUDA = 1, /* rows land in GPU memory (needs a CUDA build) */
} engram_recv_location_t;

typedef struct engram_storage_hint {
    uint64_t row_stride;      /* bytes between table rows: row_bytes rounded up to 32 */
    uint64_t cpu_table_bytes; /* host bytes per rank for the table shard */
    uint64_t gpu_recv_bytes;  /* receive bytes for max_rows_per_fetch rows */
} engram_storage_hint_t;

ENGRAM_API engram_status_t engram_storage_size_hint(uint64_t entries_per_rank, uint32_t row_bytes,
                                                    uint64_t max_rows_per_fetch, engram_storage_hint_t *out);

/* Collective. cfg may be NULL (defaults + file + env). The context keeps a
 * copy of cfg and borrows group, which must outlive it. */
ENGRAM_API engram_status_t engram_context_create(const engram_config_t *cfg, engram_group_t *group,
                                                 engram_context_t **out);
/* Collective. If any rank still has tables, every rank gets ENGRAM_ERR_BUSY
 * and keeps its context. Returns within the timeout_ms key of the call
 * (its collectives share it) plus this rank's own release of the
 * transport, whatever the peers do: when they did not all take part (a
 * peer died, stopped or did not answer in time, or the group failed in an
 * earlier collective), this rank still tears down and returns
 * ENGRAM_ERR_PEER. */
ENGRAM_API engram_status_t engram_context_destroy(engram_context_t *ctx);
/* Name of the transport the context runs on ("loopback", "ucx", ...). */
ENGRAM_API const char *engram_context_transport(const engram_context_t *ctx);

/* size: sizeof(engram_table_params_t) as the caller was built; an older
 * (smaller) one is accepted down to ENGRAM_TABLE_PARAMS_MIN_SIZE, the fields
 * it lacks taking their defaults (recv HOST), as will fields
 * appended later. A larger one (newer header) is accepted when the fields
 * this library does not know are zero. */
typedef struct engram_table_params {
    size_t size;
    uint64_t entries_per_rank;   /* rows in each rank's shard */
    uint32_t row_bytes;          /* bytes per row (e.g. 256: 128 bf16, or 256 fp8) */
    uint32_t entries_per_token;  /* rows fetched per token */
    uint32_t max_tokens;         /* largest num_tokens of one fetch */
    uint32_t scale_packs;        /* 4-byte scale packs per row; 0 = no scales */
    engram_recv_location_t recv; /* where fetched rows land */
} engram_table_params_t;
#define ENGRAM_TABLE_PARAMS_MIN_SIZE offsetof(engram_table_params_t, recv)

/* Collective: validates that every rank passed the same params, allocates
 * this rank's shard and receive slots, registers the shard with the
 * transport (exchanging handles with the peers), and ends with a barrier.
 * A failure on any rank releases everything on every rank and returns an
 * error everywhere (bounded by the timeout_ms key). */
ENGRAM_API engram_status_t engram_table_create(engram_context_t *ctx, const engram_table_params_t *params,
                                               engram_table_t **out);
/* Collective. If any rank has fetches not released, every rank gets
 * ENGRAM_ERR_BUSY and keeps the table. Returns within the timeout_ms key of
 * the call (its collectives, a transport's barrier before it deregisters
 * included, share it) plus this rank's own release of its memory, whatever
 * the peers do: when they did not all take part (a peer died, stopped or
 * did not answer in time, or the group failed in an earlier collective),
 * this rank still tears down and returns ENGRAM_ERR_PEER. */
ENGRAM_API engram_status_t engram_table_destroy(engram_table_t *table);

/* Collective: barrier, copy this rank's shard, barrier.
 * rows: [entries_per_rank][row_bytes] of this rank's shard; row_bytes must
 * equal the table's. scales: the replicated global table
 * [ranks * entries_per_rank][scale_packs] (every rank passes all of it;
 * scales are gathered locally at fetch time, never sent over the wire);
 * NULL iff scale_packs == 0. Nothing is written unless every rank's
 * arguments are valid and no rank has a fetch in flight. */
ENGRAM_API engram_status_t engram_write(engram_table_t *table, const void *rows, uint32_t row_bytes,
                                        const uint32_t *scales);

/* A shard written in pieces, for tables that do not fit in memory twice
 * (a shard loaded from a file, a chunk at a time):
 * engram_write_begin (collective: every rank idle, as engram_write's first
 * barrier; the table stops being fetchable), any number of
 * engram_write_rows (local: rows [first_row, first_row + num_rows) of
 * this rank's shard from rows[num_rows][row_bytes], which the caller may
 * reuse when it returns), then engram_write_end (collective: the scales as
 * engram_write takes them, and the closing barrier). A failure of any
 * rank's engram_write_rows fails engram_write_end everywhere; a failed
 * engram_write_end leaves the table unwritten (begin again). */
ENGRAM_API engram_status_t engram_write_begin(engram_table_t *table);
ENGRAM_API engram_status_t engram_write_rows(engram_table_t *table, uint64_t first_row, uint64_t num_rows,
                                             const void *rows, uint32_t row_bytes);
ENGRAM_API engram_status_t engram_write_end(engram_table_t *table, const uint32_t *scales);
/* engram_write_rows from a file: rows [first_row, first_row + num_rows)
 * of this rank's shard are num_rows * row_bytes bytes of `fd` from
 * file_offset (a raw table, or a .npy file's data after its header), read
 * with pread (fd's own offset does not move). Where the shard holds its
 * rows unpadded in host memory (row_bytes a multiple of 32; recv=HOST and
 * gpu_path=host_gather tables) they are read straight into it, the
 * file's bytes copied once; otherwise through a buffer of at most 16 MiB.
 * The file ending before the rows, or a read error, is refused naming the
 * row and offset (and fails engram_write_end everywhere, as any failed
 * engram_write_rows). */
ENGRAM_API engram_status_t engram_write_rows_fd(engram_table_t *table, int fd, uint64_t file_offset,
                                                uint64_t first_row, uint64_t num_rows);

#define ENGRAM_FETCH_SCALES_COL_MAJOR (1u << 0) /* scales TMA-aligned column-major */
/* engram_fetch_on_stream only: work queued on the stream sees the rows
 * once the fetch's first engram_test, engram_wait or engram_fetch_buffers
 * has returned, not from the call on; work queued in between overlaps the
 * fetch. On gpu_path=host_gather that lets fetches queued back to back on
 * one stream be gathered while the one before is copied (without it each
 * waits on the stream for the one before's copies); a GPU-initiated
 * transport works this way with or without it; the UVA kernel's rows are
 * ordered at the call either way. The stream must still exist at that
 * first call, which queues work on it. */
#define ENGRAM_FETCH_ORDER_AT_WAIT (1u << 1)

/* Issues the gets for indices[num_tokens][entries_per_token] (global row
 * indices, 8-byte aligned: ENGRAM_ERR_INVALID otherwise) and returns at
 * once; up to fetch_slots fetches per table may be in flight
 * (ENGRAM_ERR_BUSY beyond). num_tokens may be 0. */
ENGRAM_API engram_status_t engram_fetch(engram_table_t *table, const int64_t *indices, uint32_t num_tokens,
                                        unsigned flags, engram_fetch_t **out);
/* The same for a table with recv = ENGRAM_RECV_CUDA: indices are in GPU
 * memory, and the fetch is a kernel on `stream` (a cudaStream_t of the
 * table's device, the one current at engram_table_create; NULL = its
 * default stream) that reads this node's rows straight from the mapped
 * shards. The table's device is made current for the work this call, and
 * engram_test, engram_wait and engram_fetch_buffers, queue on the stream;
 * the caller's current device is left as it was. Stream-ordered: work queued later on `stream` sees the rows
 * without waiting (with a GPU-initiated transport, or with
 * ENGRAM_FETCH_ORDER_AT_WAIT, work queued after the first engram_test,
 * engram_wait or engram_fetch_buffers, which queues the wait for the gets
 * or the copies: work queued before it overlaps them);
 * engram_test/engram_wait complete it on the host and
 * return GPU pointers (rows, scales) and the bad-index report as for
 * engram_fetch. The kernel occupies gpu_sms SMs (config; 0 = all; auto,
 * the default: the fewest reaching 0.9 of the all-SM rate, timed when the
 * table is created). indices must be aligned as for engram_fetch, and
 * mapped when this is called: outside graph capture the
 * kernel reads them once before the work ahead of it on `stream` is done
 * (its first rows' reads start early) and again after, and uses the later.
 * On more than one node, rows owned by other nodes come through the
 * context's host transport: this call then copies the indices back and
 * waits for that copy (and so for the work queued before it on `stream`)
 * to route them on the host, and those rows reach the receive buffer when
 * engram_test/engram_wait has seen their gets complete: they are there for
 * the host when wait returns and for work queued on `stream` after it. */
ENGRAM_API engram_status_t engram_fetch_on_stream(engram_table_t *table, const int64_t *indices,
                                                  uint32_t num_tokens, unsigned flags, void *stream,
                                                  engram_fetch_t **out);
/* Queues the table's fetches are spread over (the context's num_queues). */
ENGRAM_API int engram_table_queues(const engram_table_t *table);
/* As engram_fetch, on queues [first_queue, first_queue + num_queues) only.
 * Threads: fetches whose queue ranges do not overlap may be issued, tested,
 * waited and released concurrently from different threads (receive slots
 * are shared safely; each fetch handle is used by one thread at a time),
 * unless the transport needs owner progress (ENGRAM_CAP_OWNER_PROGRESS, e.g.
 * ucx over shared memory or TCP), whose progress call serialises the whole
 * transport: then the caller serialises its fetch calls. engram_write and
 * the destroy calls must not run concurrently with any fetch call. */
ENGRAM_API engram_status_t engram_fetch_on_queues(engram_table_t *table, int first_queue, int num_queues,
                                                  const int64_t *indices, uint32_t num_tokens, unsigned flags,
                                                  engram_fetch_t **out);
/* Fetch handles (engram_fetch_t *) are opaque values, not addresses: each
 * names one fetch, and stays valid until engram_fetch_release. A released
 * handle never names a later fetch (not even one that reuses its receive
 * slot), nor does a handle of a destroyed table: engram_test, engram_wait,
 * engram_fetch_buffers, engram_fetch_captured, engram_fetch_bad_indices and
 * engram_fetch_release refuse such a handle, and NULL, with
 * ENGRAM_ERR_INVALID and leave every fetch as it was. */

/* ENGRAM_OK when complete, ENGRAM_INPROGRESS, or an error. recv=CUDA: a
 * kernel fault is reported from a fetch's second test on (the first reads
 * only the kernel's completion report, without a CUDA call), so a wait
 * ends on a fault at its second poll. */
ENGRAM_API engram_status_t engram_test(engram_fetch_t *fetch);
/* Waits (bounded by timeout_ms) and returns the rows
 * [num_tokens][entries_per_token * row_bytes] and, if the table has
 * scales, the scales: row-major [num_tokens][entries_per_token *
 * scale_packs], or with ENGRAM_FETCH_SCALES_COL_MAJOR column-major with token
 * stride 1 and column stride num_tokens rounded up to a multiple of 4.
 * Pointers stay valid until engram_fetch_release.
 * ENGRAM_ERR_BAD_INDEX: some indices were out of range; those rows (and
 * their scales) are zero-filled, the others are valid, rows/scales ARE set,
 * and the message (engram_last_error) gives the count and the first
 * offending (token, entry); engram_fetch_bad_indices gives them too.
 * ENGRAM_ERR_TIMEOUT: the gets did not complete in time; the fetch is
 * still in flight (test or wait again, or release it). */
ENGRAM_API engram_status_t engram_wait(engram_fetch_t *fetch, const void **rows, const uint32_t **scales);
/* The fetch's receive buffers (rows, scales; laid out as engram_wait's)
 * without waiting or touching the host's view of its completion, so it may
 * be called while `stream` is being captured into a CUDA graph. recv=CUDA:
 * the pointers are for stream-ordered use, work queued on the fetch's
 * stream after this call sees the rows (with a GPU-initiated transport
 * this call queues the wait for the fetch's gets, as the first
 * engram_test does, if none has yet). recv=HOST: only once
 * engram_test/engram_wait has seen the fetch complete (ENGRAM_ERR_STATE
 * before). The pointers stay valid until engram_fetch_release; no
 * bad-index report (engram_wait gives it). Either out-parameter may be
 * NULL; set only on ENGRAM_OK. */
ENGRAM_API engram_status_t engram_fetch_buffers(engram_fetch_t *fetch, const void **rows, const uint32_t **scales);
/* *captured: 1 when engram_fetch_on_stream found its stream capturing a
 * CUDA graph, so the fetch's work runs at the graph's replays (test and
 * wait then return at once, the pointers are the graph's receive buffers;
 * engram_fetch_bad_indices gives the last completed replay's report on
 * gpu_path=host_gather, none on uva or a launcher), else 0 (every
 * recv=HOST fetch). A captured fetch holds its receive slot until
 * released; releasing it waits for the device (every replay launched
 * ends), and its graph must not be replayed after. One executable graph
 * per captured fetch, its replays one after another (as on one stream):
 * two replays of the fetch running at once share its slot. */
ENGRAM_API engram_status_t engram_fetch_captured(const engram_fetch_t *fetch, int *captured);
/* The out-of-range indices of a completed fetch: their count and the first
 * one's (token, entry), 0 when none; of a captured one, its graph's last
 * completed replay's where the path tallies them (engram_fetch_captured).
 * Any out-parameter may be NULL. */
ENGRAM_API engram_status_t engram_fetch_bad_indices(const engram_fetch_t *fetch, uint64_t *count,
                                                    uint32_t *first_token, uint32_t *first_entry);
/* Ends the fetch: its handle is invalid from here, and the fetch no longer
 * counts as in flight (for engram_write and engram_table_destroy). A fetch
 * still in flight is waited for first (bounded by timeout_ms; not again
 * when a wait already timed out). ENGRAM_OK: its receive slot is free.
 * ENGRAM_ERR_TIMEOUT: its gets had not completed, so they may still land
 * in its receive slot; the slot is retired, not reused until they are
 * known complete (a later fetch on the same queues tests them) or the
 * table is destroyed (which frees their requests). Nothing leaks either
 * way; fetch_slots - retired slots fetches may then be in flight. NULL is
 * a no-op (ENGRAM_OK). */
ENGRAM_API engram_status_t engram_fetch_release(engram_fetch_t *fetch);

/* The outcome of a fetch ended by engram_fetch_release_ordered. */
typedef struct engram_fetch_completion {
    uint64_t cookie;         /* as given to engram_fetch_release_ordered */
    engram_status_t status;  /* ENGRAM_OK, ENGRAM_ERR_BAD_INDEX (as engram_wait's), or what failed the fetch */
    uint32_t first_bad_token, first_bad_entry;
    uint64_t bad_count;      /* out-of-range indices; their rows were zero-filled */
} engram_fetch_completion_t;
#define ENGRAM_RELEASED_MAX 1024u /* fetches of a table released in stream order and not yet polled */

/* Ends a fetch of a recv=CUDA table without waiting for it: the handle is
 * invalid from here, and its outcome (status, bad-index report) comes
 * later, with `cookie`, from engram_table_poll_released. Its receive slot
 * may be taken at once by a later engram_fetch_on_stream on the same
 * stream, which CUDA runs after this fetch and after the work queued on
 * the stream in between: work reading the rows on that stream is safe,
 * and work on another stream must be ordered before the fetch stream's
 * later work by the caller (an event). A fetch on another stream takes the
 * slot only once the library has seen the fetch complete. Until then the
 * fetch counts as in flight for engram_write, engram_table_cache_rows and
 * engram_table_destroy (ENGRAM_ERR_BUSY). A fetch that is already complete,
 * or was captured into a CUDA graph, is released as by
 * engram_fetch_release, its outcome still delivered. Refused, the fetch
 * left as it was: a recv=HOST table or rows that need the host to
 * complete (gpu_path=host_gather, rows of other nodes through the host
 * transport: ENGRAM_ERR_UNSUPPORTED); ENGRAM_RELEASED_MAX fetches
 * released and not yet polled (ENGRAM_ERR_BUSY). Threads: as the table's
 * other GPU fetch calls (one at a time). */
ENGRAM_API engram_status_t engram_fetch_release_ordered(engram_fetch_t *fetch, uint64_t cookie);
/* Up to max completions of fetches ended by engram_fetch_release_ordered
 * that the library has seen complete, oldest first, into out; *n how many
 * (out may be NULL when max is 0). wait nonzero: while fetches so released
 * are still running and none is complete, waits for one (bounded by
 * timeout_ms: ENGRAM_ERR_TIMEOUT, *n 0). *pending, when not NULL: those
 * still running after the call. Local. */
ENGRAM_API engram_status_t engram_table_poll_released(engram_table_t *table, engram_fetch_completion_t *out,
                                                      uint32_t max, int wait, uint32_t *n, uint32_t *pending);

/* A hot-row cache in this rank's GPU memory (recv=CUDA tables): the rows
 * listed are copied into it, and fetches serve them from there, bit for bit
 * the table's rows and scales; the others take the table's path (host
 * threads and the copy engine, or the GPU's reads of the shards). Each rank
 * holds its own cache of rows of this node's shards (a row of another node
 * is refused). Local; the table must be written, and no fetch of it in
 * flight (ENGRAM_ERR_BUSY) nor any other call on it running. Replaces the
 * previous set; n == 0 drops it. A write (engram_write, engram_write_end)
 * reloads the cache from the new rows before it returns, so a fetch never
 * sees a stale row (a reload keeps the cache's memory, so CUDA graphs
 * captured with it stay valid; replacing or dropping the cache frees it,
 * so graphs captured before must not be replayed after). rows: distinct
 * global indices (a repeat or an index outside the table is refused,
 * naming it), at most 2^31 - 1 of them; the cache takes n * row_bytes of
 * GPU memory, plus 24 bytes a row for its index. */
ENGRAM_API engram_status_t engram_table_cache_rows(engram_table_t *table, const int64_t *rows, uint64_t n);
/* The same for the max_rows most frequent rows of a profile:
 * indices[n] in any order (e.g. the index lists of a run's first fetches,
 * or a trace), repeats counted, indices outside the table or owned by
 * other nodes ignored; ties go to the lower index. */
ENGRAM_API engram_status_t engram_table_cache_profile(engram_table_t *table, const int64_t *indices, uint64_t n,
                                                      uint64_t max_rows);

/* A table's counters since it was created (this rank's fetches). Set
 * size = sizeof(engram_table_stats_t) first; a caller built against an
 * older header gets the fields its size covers. */
typedef struct engram_table_stats {
    size_t size;
    uint64_t fetches;        /* fetches issued (each engram_fetch* that took a slot) */
    uint64_t rows;           /* rows they asked for */
    uint64_t bytes;          /* row bytes of released fetches that completed */
    uint64_t bad_rows;       /* rows of released fetches whose index was out of range */
    uint64_t repeats;        /* rows the host layer's dedup copied from an earlier row of their fetch
                              * instead of reading again (GPU-side dedup of a node's own rows not counted) */
    uint64_t wait_ns;        /* time callers spent in engram_wait */
    const char *path;        /* how rows arrive: "transport" (recv=HOST), "uva" (the GPU kernel reads
                              * host or GPU memory), "host_gather" (host threads and the copy engine) */
    int gather_threads;      /* host_gather's pool; 0 on other paths */
    int shard_huge_pages;    /* 1 when this rank's shard is on 2 MiB pages */
    uint64_t shard_bytes;    /* this rank's shard as allocated */
    uint64_t cache_rows;     /* rows the GPU's hot-row cache holds (engram_table_cache_rows); 0 without one */
    uint64_t cache_hits;     /* rows of released fetches read from it (with GPU-side dedup, a repeated row
                              * once: its repeats are copies of it) */
} engram_table_stats_t;

ENGRAM_API engram_status_t engram_table_stats(const engram_table_t *table, engram_table_stats_t *out);

/* How a recv=CUDA table whose rows on this node (every local rank's shard)
 * take node_table_bytes would get its rows on this rank's current GPU, by
 * the rule table create applies: gpu_path=uva or host_gather as set;
 * auto takes uva within the GPU's measured reach into host memory (random
 * rows of pinned host memory read at most ENGRAM_GPU_REACH_SHARE of the
 * rate of the first, 64 MiB window beyond it), host_gather past it, and uva
 * wherever host_gather cannot run (gpu_table=device, a fetch launcher,
 * several nodes). The reach is probed with up to 2 GiB of pinned memory
 * once per device and process. Local. Set size = sizeof(*out) first. */
typedef struct engram_gpu_path_report {
    size_t size;
    const char *path;          /* "uva" or "host_gather" */
    const char *reason;        /* why, static text */
    uint64_t reach_bytes;      /* the measured reach; 0 when nothing was probed */
    uint64_t probed_bytes;     /* the largest window probed; 0 when nothing was */
    double share_past;         /* the first window past the reach: its rate over the first window's; 0 if none */
    double gbps_first;         /* row bytes per second in the first window, GB/s; 0 when nothing was probed */
} engram_gpu_path_report_t;
#define ENGRAM_GPU_REACH_SHARE 0.75

ENGRAM_API engram_status_t engram_gpu_path_report(const engram_context_t *ctx, uint64_t node_table_bytes,
                                                  engram_gpu_path_report_t *out);

#ifdef __cplusplus
}
#endif
#endif
