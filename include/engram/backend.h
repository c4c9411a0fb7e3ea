/* Backends: the transports this library can select (config key transport:
 * a name, or auto), where each comes from, whether it can run here and
 * what it offers. engram_info prints this list.
 *
 * A backend is built in (linked into libengram), a module shipped with the
 * library (libengram_transport_<name>.so in engram_backend_module_dir()) or
 * a plugin found on plugin_path. Transports report what they can do with
 * the capability bits and memory kinds below; <engram/plugin/transport.h>
 * is where a transport sets them.
 *
 * Public header (installed as <engram/backend.h>; <engram/engram.h>
 * includes it). */
#ifndef ENGRAM_BACKEND_H
#define ENGRAM_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "engram/config.h"
#include "engram/group.h"
#include "engram/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Capability bits. */
#define ENGRAM_CAP_HOST_INITIATED (1u << 0) /* gets posted by the CPU through ops->get */
#define ENGRAM_CAP_GPU_INITIATED (1u << 1)  /* gets posted by a kernel (fetch launcher) */
#define ENGRAM_CAP_HYBRID (1u << 2)         /* supports ENGRAM_REG_NODE_SPAN regions */
#define ENGRAM_CAP_CROSS_HOST (1u << 3)     /* peers may live on other hosts */
/* Gets complete only while the owner's CPU calls into the transport (e.g.
 * UCX emulating RMA with active messages on shm/TCP): owners must call
 * ops->progress until every peer's gets are done. */
#define ENGRAM_CAP_OWNER_PROGRESS (1u << 4)
/* Every get is moved by a host thread of the transport's (e.g. NCCL's GIN
 * proxy, where no NIC offers GPU-initiated networking): correct, but far
 * slower than the transport's fast path. transport=auto passes over a
 * backend whose open reports it, for the next one; naming it still runs it. */
#define ENGRAM_CAP_HOST_PROXIED (1u << 5)

/* Kinds of memory a transport reads from and writes into. */
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

typedef enum engram_backend_origin {
    ENGRAM_BACKEND_BUILT_IN = 0, /* linked into libengram */
    ENGRAM_BACKEND_MODULE = 1,   /* shipped with it: a shared object in engram_backend_module_dir() */
    ENGRAM_BACKEND_PLUGIN = 2,   /* libengram_transport_<name>.so found on plugin_path */
} engram_backend_origin_t;

typedef enum engram_backend_state {
    /* Not in this build (its system library was missing), or its module or
     * plugin could not be loaded: reason says which. */
    ENGRAM_BACKEND_ABSENT = 0,
    /* Loaded, but it cannot run on this machine and group: its own
     * availability check said no, or its open failed (reason). */
    ENGRAM_BACKEND_UNAVAILABLE = 1,
    /* It opened here: the capabilities are what that open offered. */
    ENGRAM_BACKEND_AVAILABLE = 2,
} engram_backend_state_t;

#define ENGRAM_BACKEND_NAME_MAX 64   /* a backend's name, without its NUL */
#define ENGRAM_BACKEND_TEXT_BYTES 1024

/* One backend. Set size = sizeof(engram_backend_info_t) first; a caller
 * built against an older header gets the fields its size covers. */
typedef struct engram_backend_info {
    size_t size;
    char name[ENGRAM_BACKEND_NAME_MAX + 1];
    engram_backend_origin_t origin;
    engram_backend_state_t state;
    char reason[ENGRAM_BACKEND_TEXT_BYTES]; /* why it is not AVAILABLE; "" when it is */
    /* AVAILABLE only; zero otherwise. */
    uint32_t caps;        /* ENGRAM_CAP_* */
    uint32_t read_kinds;  /* ENGRAM_MEM_KIND_BIT of the kinds gets read from */
    uint32_t write_kinds; /* ENGRAM_MEM_KIND_BIT of the kinds gets write into */
    int max_queues;       /* queues an open offers */
    int max_outstanding;  /* gets one queue holds in flight to one peer; 0: not stated */
    char selected[ENGRAM_BACKEND_TEXT_BYTES]; /* what the open selected (e.g. UCX's lanes); "" if it says nothing */
} engram_backend_info_t;

typedef struct engram_backend_list engram_backend_list_t;

/* Every backend: the built-ins and modules in the library's order, then
 * the plugins on cfg's plugin_path by name. Loads the modules and plugins
 * (a plugin that cannot be loaded is listed ABSENT with the loader's
 * reason), asks each loaded backend whether it can run on this machine and
 * group, and opens and closes each that can with cfg, to learn what it
 * offers. Collective over group, as availability checks and opens may be:
 * every rank calls it (a program alone: engram_group_solo_create). Fails
 * only for NULL arguments or when out of memory. */
ENGRAM_API engram_status_t engram_backend_list_create(const engram_config_t *cfg, engram_group_t *group,
                                                      engram_backend_list_t **out);
ENGRAM_API void engram_backend_list_destroy(engram_backend_list_t *list);
ENGRAM_API int engram_backend_list_count(const engram_backend_list_t *list);
/* Backend i, 0 <= i < count. */
ENGRAM_API engram_status_t engram_backend_list_get(const engram_backend_list_t *list, int i,
                                                   engram_backend_info_t *out);
/* One line per configuration key the list's loaded backends declare (their
 * own keys), as engram_config_print does for the core keys: name,
 * effective value in cfg, source, accepted values, help. */
ENGRAM_API void engram_backend_list_print_keys(const engram_backend_list_t *list, const engram_config_t *cfg,
                                               FILE *out);

/* Where the modules that ship with this library are loaded from
 * (<libdir>/engram beside libengram.so.0); "" when it cannot be told. */
ENGRAM_API const char *engram_backend_module_dir(void);

#ifdef __cplusplus
}
#endif
#endif
