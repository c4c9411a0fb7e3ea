/* The configuration table (X-macro) and the typed struct it generates.
 * Internal header: the library reads typed fields, users go through
 * engram_config_set/get.
 *
 * X(name, type, default, accepted, help)
 *   type: INT (accepted = "min..max", or "auto|min..max": "auto" is stored as
 *   ENGRAM_CONFIG_INT_AUTO), ENUM (accepted = "a|b|c", stored as
 *   the index), STRING (accepted describes it; stored in char[ENGRAM_CONFIG_STRING_MAX]). */
#ifndef ENGRAM_HAL_CONFIG_KEYS_H
#define ENGRAM_HAL_CONFIG_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include "hal/config.h"

#define ENGRAM_CONFIG_KEYS(X)                                                                         \
    X(transport, STRING, "auto", "auto|loopback|ucx|nccl_gin|mlx5dv|<plugin name>",                   \
      "Transport backend; auto picks the best available and logs why others were passed over")        \
    X(mode, ENUM, "direct", "direct|hybrid",                                                          \
      "direct: one connection per rank; hybrid: one per node through the rail rank")                  \
    X(num_qps, INT, "0", "0..1024", "Queues per transport; 0 = all the transport offers")             \
    X(flush_depth, INT, "768", "1..1048576", "Every flush_depth-th get per (queue, peer) rings the doorbell") \
    X(fetch_slots, INT, "4", "1..64", "Receive slots per table = fetches that may be in flight at once") \
    X(numa_node, INT, "-1", "-1..1023", "NUMA node of host segments; -1 = the calling thread's node")  \
    X(huge_pages, ENUM, "auto", "auto|on|off",                                                        \
      "Back host segments by huge pages: auto falls back with one log line, on fails without them")   \
    X(timeout_ms, INT, "30000", "1..86400000", "Bound on waits, barriers and collective setup")        \
    X(plugin_path, STRING, "", "colon-separated absolute directories",                                \
      "Where external transports (libengram_transport_<name>.so) are looked for")                     \
    X(ucx_window, INT, "256", "1..65536", "UCX: outstanding gets per worker before progress is forced") \
    X(mlx5_device, STRING, "", "an RDMA device name (mlx5_0, ...)",                                   \
      "mlx5dv: the device to open; empty = the first mlx5 device") \
    X(gpu_sms, INT, "auto", "auto|0..4096",                                                          \
      "recv=cuda: SMs the fetch kernel occupies (one block each); 0 = all; auto = the fewest reaching 0.9 of all") \
    X(gpu_table, ENUM, "host_numa", "host_numa|device",                                               \
      "recv=cuda: table shards in host memory on the GPU's NUMA node, or in GPU memory (peers over NVLink)") \
    X(gin_queue_depth, INT, "0", "0..65536", "nccl_gin: GIN queue depth per context and peer; 0 = NCCL's default") \
    X(dedup, ENUM, "auto", "off|on|auto", "Fetch each distinct row of a batch once; auto: only where its distinct fraction pays")

#define ENGRAM_CONFIG_FIELD_INT(name) int64_t name;
#define ENGRAM_CONFIG_FIELD_ENUM(name) int name;
/* Room for a few absolute directories in plugin_path. */
#define ENGRAM_CONFIG_STRING_MAX 1024
#define ENGRAM_CONFIG_FIELD_STRING(name) char name[ENGRAM_CONFIG_STRING_MAX];
#define ENGRAM_CONFIG_FIELD(name, type, def, accepted, help) ENGRAM_CONFIG_FIELD_##type(name)
#define ENGRAM_CONFIG_COUNT_ONE(name, type, def, accepted, help) +1

enum { ENGRAM_CONFIG_NUM_KEYS = 0 ENGRAM_CONFIG_KEYS(ENGRAM_CONFIG_COUNT_ONE) };

/* Enum values, in the order of their `accepted` lists. */
enum { ENGRAM_MODE_DIRECT = 0, ENGRAM_MODE_HYBRID = 1 };
enum { ENGRAM_HUGE_AUTO = 0, ENGRAM_HUGE_ON = 1, ENGRAM_HUGE_OFF = 2 };
enum { ENGRAM_GPU_TABLE_HOST_NUMA = 0, ENGRAM_GPU_TABLE_DEVICE = 1 };
enum { ENGRAM_DEDUP_OFF = 0, ENGRAM_DEDUP_ON = 1, ENGRAM_DEDUP_AUTO = 2 };
/* An INT key's "auto" (accepted "auto|min..max"): below every range's min. */
#define ENGRAM_CONFIG_INT_AUTO (-1)

struct engram_config {
    ENGRAM_CONFIG_KEYS(ENGRAM_CONFIG_FIELD)
    engram_config_source_t source[ENGRAM_CONFIG_NUM_KEYS];
};

/* Iteration for tools: key i's name/type/default/accepted/help, or NULL. */
typedef struct engram_config_key_info {
    const char *name;
    const char *type; /* "INT", "ENUM", "STRING" */
    const char *def;
    const char *accepted;
    const char *help;
} engram_config_key_info_t;
const engram_config_key_info_t *engram_config_key(int i);

/* Applies `key = value` text (the ENGRAM_CONFIG_FILE syntax) to cfg as the
 * file source; `name` prefixes error messages as the file path does. The
 * file reader and the config fuzz target share this parser. */
engram_status_t engram_config_read_text(engram_config_t *cfg, const char *name, const char *text, size_t len);

#endif
