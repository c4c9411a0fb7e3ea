/* Segment ops: memory that transports read from and write into.
 *
 * A segment is allocated by one rank, exported as a file descriptor, passed
 * to the other local ranks of the group over a Unix socket (SCM_RIGHTS; see
 * memory/fd_share.h) and imported (mapped) there. Nothing is ever created
 * under a path: no /dev/shm names, no files. */
#ifndef ENGRAM_HAL_SEGMENT_H
#define ENGRAM_HAL_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum engram_mem_kind {
    ENGRAM_MEM_HOST = 0,           /* host memory, NUMA-local, memfd-backed */
    ENGRAM_MEM_CUDA_DEVICE = 1,    /* GPU memory (cuMem) */
    ENGRAM_MEM_CUDA_HOST_NUMA = 2, /* host memory on the GPU's NUMA node (cuMem) */
} engram_mem_kind_t;

#define ENGRAM_MEM_KIND_BIT(k) (1u << (k))
#define ENGRAM_MEM_NUM_KINDS 3

/* The kind's name in messages and engram_info ("?" for none of them). */
static inline const char *engram_mem_kind_name(engram_mem_kind_t kind)
{
    static const char *const names[ENGRAM_MEM_NUM_KINDS] = {"host", "cuda_device", "cuda_host_numa"};
    return (unsigned)kind < ENGRAM_MEM_NUM_KINDS ? names[kind] : "?";
}

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

#ifdef __cplusplus
}
#endif
#endif
