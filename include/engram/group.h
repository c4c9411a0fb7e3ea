/* Group / bootstrap: who the ranks are and how they exchange small data.
 *
 * Ranks are grouped into nodes (the scale-up domain) of local_size
 * consecutive ranks: node = rank / local_size, local_rank = rank % local_size.
 * Providers: the fork launcher (embedded default), MPI, and caller callbacks.
 * One name pattern, engram_group_<provider>_<verb>: a provider that hands a
 * group back is engram_group_<provider>_create (callbacks, solo, and
 * engram_group_mpi_create of hal/group_mpi.h), released with
 * engram_group_destroy, as the library's other objects; the fork launcher
 * hands none back (each child's group lives for rank_main), so its verb is
 * run.
 * Every collective is bounded: a peer that dies or never arrives turns into
 * ENGRAM_ERR_PEER or ENGRAM_ERR_TIMEOUT on the surviving ranks, and leaves
 * the group failed: every later collective of it is refused at once with
 * that first failure's status and message (the ranks may no longer agree
 * on which collective comes next); make a new group to go on. *
 * Public header (installed as <engram/group.h>). */
#ifndef ENGRAM_GROUP_H
#define ENGRAM_GROUP_H

#include <stddef.h>
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct engram_group engram_group_t;

/* Callbacks for embedding in a framework that already has a process group.
 * allgather: each rank contributes `bytes` from `send`; `recv` receives
 * size * bytes, rank-ordered. Return 0 on success, nonzero on failure. */
/* size: sizeof(engram_group_callbacks_t) as the caller was built; an older
 * (smaller) one is accepted down to ENGRAM_GROUP_CALLBACKS_MIN_SIZE, the
 * fields it lacks taking their defaults (destroy: none); fields appended
 * later default the same way. */
typedef struct engram_group_callbacks {
    size_t size;
    int rank, nranks, local_size;
    void *ctx;
    int (*allgather)(void *ctx, const void *send, void *recv, size_t bytes);
    int (*barrier)(void *ctx);
    void (*destroy)(void *ctx); /* optional */
} engram_group_callbacks_t;
#define ENGRAM_GROUP_CALLBACKS_MIN_SIZE offsetof(engram_group_callbacks_t, destroy)

ENGRAM_API engram_status_t engram_group_callbacks_create(const engram_group_callbacks_t *cb, engram_group_t **out);

/* A group of one rank: this process alone (tools, single-process use). */
ENGRAM_API engram_status_t engram_group_solo_create(engram_group_t **out);

/* Fork launcher: runs rank_main in `nranks` forked child processes (emulated
 * nodes of `local_size` ranks; 0 means all ranks on one node) connected by
 * Unix socket pairs, waits for all of them and returns OK when every child
 * exited 0. exit_codes (optional, nranks entries) gets each child's exit code
 * (128 + signal when killed), also when the call fails because of them. A
 * child runs rank_main(g, arg); the launcher then destroys g, flushes stdio
 * and _exits with rank_main's return value (the parent's atexit handlers do
 * not run in children). A child that dies or leaves makes the others'
 * collectives fail with ENGRAM_ERR_PEER naming its rank. */
typedef int (*engram_rank_main_fn)(engram_group_t *group, void *arg);
ENGRAM_API engram_status_t engram_group_fork_run(int nranks, int local_size, engram_rank_main_fn rank_main,
                                                 void *arg, int *exit_codes);

ENGRAM_API void engram_group_destroy(engram_group_t *group);

ENGRAM_API int engram_group_rank(const engram_group_t *group);
ENGRAM_API int engram_group_size(const engram_group_t *group);
ENGRAM_API int engram_group_local_rank(const engram_group_t *group);
ENGRAM_API int engram_group_local_size(const engram_group_t *group);
/* Collective; 1 when every rank runs on this host, else 0: one host is one
 * running kernel (boot id) and one network and pid namespace, so two
 * containers of one machine with their own namespaces are two hosts (their
 * processes cannot share memory by fd). Computed once, then cached.
 * Negative status on failure. */
ENGRAM_API int engram_group_single_host(engram_group_t *group);
/* This process's host in that sense, as text (at most
 * ENGRAM_HOST_IDENTITY_MAX bytes with the NUL): two processes print the
 * same text iff they are on one host. For a caller that groups ranks by
 * host itself (a node's local_size). ENGRAM_ERR_IO without /proc,
 * ENGRAM_ERR_OVERFLOW when len is too small; buf set only on success. */
#define ENGRAM_HOST_IDENTITY_MAX 128
ENGRAM_API engram_status_t engram_host_identity(char *buf, size_t len);

ENGRAM_API engram_status_t engram_group_allgather(engram_group_t *group, const void *send, void *recv, size_t bytes);
ENGRAM_API engram_status_t engram_group_barrier(engram_group_t *group);
/* Collective: every rank learns every rank's status, so a collective step
 * fails on all ranks or none and no rank waits for one that gave up.
 * Returns `local` when it failed, else the first failed rank's status
 * (naming that rank), else the allgather's own status. */
ENGRAM_API engram_status_t engram_group_agree(engram_group_t *group, engram_status_t local);
/* Bound (ms) on waiting in a collective of this group; default 30000. A
 * value <= 0 is refused with a warning (collectives are always bounded).
 * The library's destroys share one bound among their collectives: while
 * one runs, each of its collectives waits at most what is left of
 * timeout_ms since the destroy began (engram_group_timeout says how much),
 * and one left no time fails at once with ENGRAM_ERR_TIMEOUT.
 * Fork launcher: it bounds the time without progress (for the last rank to
 * arrive, or while no byte of any rank's payload moves), so a collective of
 * any size that keeps moving completes; a stalled or absent peer fails it
 * within about this bound, with ENGRAM_ERR_TIMEOUT naming the ranks that
 * never arrived. MPI: MPI reports no progress, so it bounds the whole
 * collective (MPI does not say which ranks are missing). Callbacks: only
 * the callbacks themselves bound it (Python's Group.from_torch and
 * Group.from_mpi bound each of their collectives by this timeout;
 * from_torch names the ranks that never entered it). Every agreement, destroy's included, is such a collective. */
ENGRAM_API void engram_group_set_timeout(engram_group_t *group, int timeout_ms);
/* The current bound, so layers above can bound their own exchanges by it:
 * the timeout, or within a destroy what is left of it (at least 1). */
ENGRAM_API int engram_group_timeout(const engram_group_t *group);

/* While a collective of this group waits for other ranks, call fn(arg)
 * between polls (fn NULL: none). The engram layer sets it for transports
 * whose gets complete only while the owner's CPU serves them
 * (ENGRAM_CAP_OWNER_PROGRESS), so a rank parked at a barrier keeps serving
 * its peers. The fork and MPI providers honour it; a callbacks provider
 * honours it by calling engram_group_progress while its callback waits. */
typedef void (*engram_group_progress_fn)(void *arg);
ENGRAM_API void engram_group_set_progress(engram_group_t *group, engram_group_progress_fn fn, void *arg);
/* Calls the group's progress hook once; returns 1 if it has one, else 0
 * (then there is nothing to serve and a callback may simply block). For a
 * callbacks provider: call it in a loop, from the thread running the
 * callback, while the framework's collective is in flight (start it
 * asynchronously, poll its completion). Only from inside a callback: the
 * hook drives the transport, which must not run concurrently with other
 * calls on it, and a collective is such a call's only wait. */
ENGRAM_API int engram_group_progress(engram_group_t *group);

#ifdef __cplusplus
}
#endif
#endif
