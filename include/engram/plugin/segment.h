/* Segment ops: memory that transports read from and write into.
 *
 * A segment is allocated by one rank, exported as a file descriptor, passed
 * to the other local ranks of the group over a Unix socket (SCM_RIGHTS;
 * engram_fd_allgather below) and imported (mapped) there. Nothing is ever created
 * under a path: no /dev/shm names, no files. Two services share segments
 * among a node's ranks for a transport: the fd exchange and the span that
 * maps a node's segments back to back. */
#ifndef ENGRAM_PLUGIN_SEGMENT_H
#define ENGRAM_PLUGIN_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "engram/backend.h"
#include "engram/group.h"
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* engram_mem_kind_t, ENGRAM_MEM_KIND_BIT, engram_mem_kind_name: <engram/backend.h>. */

typedef struct engram_segment_ops engram_segment_ops_t;

typedef struct engram_segment {
    const engram_segment_ops_t *ops;
    engram_mem_kind_t kind;
    void *addr;      /* mapped address in this process */
    size_t size;     /* bytes, rounded up to the page size in use */
    int numa_node;   /* -1 if unknown */
    int device;      /* CUDA device, -1 for host */
    bool huge_pages; /* backed by huge pages */
    bool imported;   /* mapped from another process's export */
    bool read_only;  /* imported read-only */
    void *priv;      /* backend state */
} engram_segment_t;

typedef struct engram_segment_params {
    size_t size; /* sizeof(engram_segment_params_t) */
    size_t bytes;
    int numa_node; /* -1: the calling thread's node */
    int huge;      /* ENGRAM_HUGE_AUTO / _ON / _OFF (config_view.h) */
    int device;    /* CUDA kinds only */
} engram_segment_params_t;

struct engram_segment_ops {
    size_t size; /* sizeof(engram_segment_ops_t) */
    const char *name;
    engram_mem_kind_t kind;
    engram_status_t (*alloc)(const engram_segment_params_t *params, engram_segment_t **out);
    /* An fd another process can import; owned by the segment (do not close). */
    engram_status_t (*export_fd)(engram_segment_t *seg, int *fd);
    /* Map `bytes` of an exported fd; read_only maps it PROT_READ. The fd is
     * not consumed. At `fixed_addr` (MAP_FIXED) when non-NULL, so callers can
     * lay several segments back to back in one reserved range. */
    engram_status_t (*import_fd)(int fd, size_t bytes, bool read_only, void *fixed_addr,
                                 engram_segment_t **out);
    void (*free)(engram_segment_t *seg);
};

/* Collective over the whole group. fds[r] receives an fd referring to rank
 * r's `my_fd` for every rank r on this host (fds[own rank] is a dup of
 * my_fd) and -1 for ranks on other hosts. The caller closes the fds. On
 * failure no fd is left open and every rank returns an error (bounded by
 * the group's timeout without progress: a connection made or an fd
 * received or served restarts it, so an exchange among many ranks may
 * take longer in all, while a stalled peer fails it). The fds travel over
 * abstract Unix sockets, accepted only from the group's own processes
 * (SO_PEERCRED). */
ENGRAM_PLUGIN_API engram_status_t engram_fd_allgather(engram_group_t *group, int my_fd, int *fds);

/* Several segments mapped back to back in one reserved address range, so a
 * single registration (one memory key) covers them all. Hybrid mode uses it
 * for a node's local segments, reached through a rail rank at a stride of
 * the segment size. */
typedef struct engram_segment_span {
    char *base;    /* parts[i] is mapped at base + i * stride */
    size_t stride; /* bytes per part (the segments' size) */
    int count;
    engram_segment_t **parts;
    void *reserved; /* the whole reservation (aligned base lies inside it) */
    size_t reserved_bytes;
} engram_segment_span_t;

/* Imports fds[0..count) (each exported by `ops`, each `stride` bytes) back
 * to back. The fds are not consumed. On failure nothing stays mapped. */
ENGRAM_PLUGIN_API engram_status_t engram_segment_span_map(const engram_segment_ops_t *ops, const int *fds, int count,
                                                          size_t stride, bool read_only, engram_segment_span_t *out);

/* Collective over the group: every rank maps the segments of the ranks of
 * its own node (its own included, at its local rank's slot) back to back.
 * Every rank's `seg` must have the same size. */
ENGRAM_PLUGIN_API engram_status_t engram_segment_span_map_node(engram_group_t *group, engram_segment_t *seg,
                                                               bool read_only, engram_segment_span_t *out);

/* Unmaps every part and the reservation; a zeroed span is a no-op. */
ENGRAM_PLUGIN_API void engram_segment_span_unmap(engram_segment_span_t *span);

#ifdef __cplusplus
}
#endif
#endif
