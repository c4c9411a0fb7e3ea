/* The built-in transport table, handed to hal/registry.c by its callers
 * (hal includes no transport; this is the layer above it that knows them
 * all).
 *
 * An absent backend keeps its row with the reason, so transport=<name> and
 * transport=auto can say why: the ENGRAM_*_ABSENT_REASON strings are
 * computed by transports/BUILD.bazel from the system-library markers
 * (missing library, NCCL too old, or the backend not written yet). A backend
 * listed in LINKED_BACKENDS there gets its ENGRAM_HAVE_* define here: in
 * the library (//transports:builtins) as ENGRAM_MODULE_* (a module row,
 * loaded from <libdir>/engram), in test programs
 * (//transports:builtins_static) linked in. */
#include "transports/builtins.h"
#include "transports/loopback/loopback.h"
#ifdef ENGRAM_HAVE_UCX
#include "transports/ucx/ucx.h"
#endif
#ifdef ENGRAM_HAVE_MLX5DV
#include "transports/mlx5dv/mlx5dv.h"
#endif
#ifdef ENGRAM_HAVE_NCCL_GIN
#include "transports/nccl_gin/nccl_gin.h"
#endif

#if !defined(ENGRAM_UCX_ABSENT_REASON) || !defined(ENGRAM_NCCL_GIN_ABSENT_REASON) || \
    !defined(ENGRAM_MLX5DV_ABSENT_REASON)
#error "the ENGRAM_*_ABSENT_REASON defines come from transports/BUILD.bazel"
#endif

/* transport=auto order: GPU-initiated gets first, then direct verbs, then
 * the single-host copy, then UCX, which reaches any host but costs CPU. */
enum { PRIO_NCCL_GIN = 40, PRIO_MLX5DV = 30, PRIO_LOOPBACK = 20, PRIO_UCX = 10 };

static const engram_builtin_t builtins[] = {
    {"loopback", &engram_loopback_ops, NULL, PRIO_LOOPBACK, false},
#if defined(ENGRAM_HAVE_UCX)
    {"ucx", &engram_ucx_ops, NULL, PRIO_UCX, false},
#elif defined(ENGRAM_MODULE_UCX)
    {"ucx", NULL, NULL, PRIO_UCX, true},
#else
    {"ucx", NULL, ENGRAM_UCX_ABSENT_REASON, PRIO_UCX, false},
#endif
#if defined(ENGRAM_HAVE_NCCL_GIN)
    {"nccl_gin", &engram_nccl_gin_ops, NULL, PRIO_NCCL_GIN, false},
#elif defined(ENGRAM_MODULE_NCCL_GIN)
    {"nccl_gin", NULL, NULL, PRIO_NCCL_GIN, true},
#else
    {"nccl_gin", NULL, ENGRAM_NCCL_GIN_ABSENT_REASON, PRIO_NCCL_GIN, false},
#endif
#if defined(ENGRAM_HAVE_MLX5DV)
    {"mlx5dv", &engram_mlx5dv_ops, NULL, PRIO_MLX5DV, false},
#elif defined(ENGRAM_MODULE_MLX5DV)
    {"mlx5dv", NULL, NULL, PRIO_MLX5DV, true},
#else
    {"mlx5dv", NULL, ENGRAM_MLX5DV_ABSENT_REASON, PRIO_MLX5DV, false},
#endif
};

static const engram_builtin_table_t table = {builtins, (int)(sizeof(builtins) / sizeof(builtins[0]))};

const engram_builtin_table_t *engram_transport_builtins(void)
{
    return &table;
}
