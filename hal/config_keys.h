/* The core configuration table (X-macro) and the typed struct it generates.
 * Internal header: the library reads typed fields, users go through
 * engram_config_set/get, transports through the view of config_view.h.
 * A transport's own keys are declared by that transport (ops->config_keys),
 * each named <transport name>_<rest>, not here; this table names no backend.
 *
 * X(name, type, default, accepted, help)
 *   type: INT (accepted = "min..max", or "auto|min..max": "auto" is stored as
 *   ENGRAM_CONFIG_INT_AUTO), ENUM (accepted = "a|b|c", stored as the index),
 *   STRING (accepted describes it; stored in char[ENGRAM_CONFIG_STRING_MAX]),
 *   PATHS (a STRING of ':'-separated absolute directories, checked when set). */
#ifndef ENGRAM_HAL_CONFIG_KEYS_H
#define ENGRAM_HAL_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hal/config.h"
#include "engram/plugin/config.h"

/* num_qps counts queues (the word the code and the transports use); the
 * key keeps DeepEP's name (Buffer(num_qps=)).
 * flush_depth's default, 768, is not derived from a measurement. What it bounds: the gets
 * per (queue, peer) a transport may hold back (AGGREGATE) before one rings
 * the doorbell. Why any value in range is safe: the engram layer caps it
 * by the transport's caps.max_outstanding, its bound per (queue, peer)
 * (engram/context.c), and a fetch's
 * flushes ring whatever is still held; the value only trades doorbells
 * (MMIO writes, progress calls) against how soon the first gets of a large
 * batch leave. */
#define ENGRAM_CONFIG_KEYS(X)                                                                         \
    X(transport, STRING, "auto", "auto|<backend name>",                                               \
      "Transport backend (engram_info lists the built-ins and plugins found); auto picks the best "    \
      "available and logs why others were passed over")                                                \
    X(mode, ENUM, "direct", "direct|hybrid",                                                          \
      "direct: one connection per rank; hybrid: a node's rows from its shards, other nodes' through "  \
      "one rank each (or from each row's owner, on a backend whose ranks cannot serve their node's "  \
      "other shards)")                                                                                  \
    X(num_qps, INT, "0", "0..1024", "Queues per transport; 0 = all the transport offers")             \
    X(flush_depth, INT, "768", "1..1048576", "Every flush_depth-th get per (queue, peer) rings the doorbell") \
    X(fetch_slots, INT, "4", "1..64", "Receive slots per table = fetches that may be in flight at once") \
    X(numa_node, INT, "-1", "-1..1023", "NUMA node of host segments; -1 = the calling thread's node")  \
    X(huge_pages, ENUM, "auto", "auto|on|off",                                                        \
      "Back host segments by huge pages: auto falls back with one log line, on fails without them")   \
    X(timeout_ms, INT, ENGRAM_CONFIG_STR(ENGRAM_DEFAULT_TIMEOUT_MS), "1..86400000", "Bound on waits, barriers and collective setup")        \
    X(plugin_path, PATHS, "", "colon-separated absolute directories",                                 \
      "Where external transports (libengram_transport_<name>.so) are looked for")                     \
    X(gpu_sms, INT, "auto", "auto|0..4096",                                                          \
      "recv=cuda: SMs the fetch kernel occupies (one block each); 0 = all; auto = the fewest reaching 0.9 of all") \
    X(gpu_table, ENUM, "host_numa", "host_numa|device",                                               \
      "recv=cuda: table shards in host memory on the GPU's NUMA node, or in GPU memory (peers over NVLink)") \
    X(dedup, ENUM, "auto", "off|on|auto", "Fetch each distinct row of a batch once; auto: only where its distinct fraction pays") \
    X(gpu_path, ENUM, "auto", "auto|uva|host_gather",                                                 \
      "recv=cuda, host_numa tables: uva = the GPU kernel reads host rows; host_gather = host threads "   \
      "gather them into pinned staging and the copy engine moves it (0 SMs); auto = uva only for tables " \
      "within the GPU's measured reach into host memory")                                               \
    X(gather_threads, INT, "auto", "auto|1..1024",                                                    \
      "host_gather: threads of the table's pool; auto = the cores of the shard's NUMA node over its local ranks, less one") \
    X(gather_chunk_kib, INT, "512", "4..65536", "host_gather: KiB of rows the copy engine moves per copy") \
    X(gather_wake, ENUM, "host_node", "host_node|watch",                                              \
      "host_gather, captured fetches: host_node = each replay wakes the pool by a host function, "     \
      "watch = the pool's watcher alone finds it (every gather_watch_us)")                             \
    X(gather_watch_us, INT, "1000", "1..10000",                                                       \
      "host_gather: microseconds between an idle pool's looks at its captured fetches' words")

#define ENGRAM_CONFIG_FIELD_INT(name) int64_t name;
#define ENGRAM_CONFIG_FIELD_ENUM(name) int name;
/* Room for a few absolute directories in plugin_path. */
#define ENGRAM_CONFIG_STRING_MAX 1024
#define ENGRAM_CONFIG_FIELD_STRING(name) char name[ENGRAM_CONFIG_STRING_MAX];
#define ENGRAM_CONFIG_FIELD_PATHS(name) char name[ENGRAM_CONFIG_STRING_MAX];
#define ENGRAM_CONFIG_FIELD(name, type, def, accepted, help) ENGRAM_CONFIG_FIELD_##type(name)
#define ENGRAM_CONFIG_COUNT_ONE(name, type, def, accepted, help) +1

enum { ENGRAM_CONFIG_NUM_KEYS = 0 ENGRAM_CONFIG_KEYS(ENGRAM_CONFIG_COUNT_ONE) };

/* Enum values, in the order of their `accepted` lists (mode's and
 * huge_pages' are in config_view.h, which transports see). */
enum { ENGRAM_GPU_TABLE_HOST_NUMA = 0, ENGRAM_GPU_TABLE_DEVICE = 1 };
enum { ENGRAM_DEDUP_OFF = 0, ENGRAM_DEDUP_ON = 1, ENGRAM_DEDUP_AUTO = 2 };
enum { ENGRAM_GPU_PATH_AUTO = 0, ENGRAM_GPU_PATH_UVA = 1, ENGRAM_GPU_PATH_HOST_GATHER = 2 };
enum { ENGRAM_GATHER_WAKE_HOST_NODE = 0, ENGRAM_GATHER_WAKE_WATCH = 1 };
/* An INT key's "auto" (accepted "auto|min..max"): below every range's min. */
#define ENGRAM_CONFIG_INT_AUTO (-1)

/* A value set (file, env or API) for a key that is not a core key: kept as
 * text with where it was set, until the transport that declares the key
 * parses it (engram_config_check_keys, the view). */
#define ENGRAM_CONFIG_EXTRA_MAX 16
typedef struct engram_config_extra {
    char name[ENGRAM_CONFIG_NAME_MAX + 1];
    char value[ENGRAM_CONFIG_STRING_MAX];
    char where[160]; /* "ENGRAM_UCX_WINDOW", "<file>:3", "engram_config_set" */
    engram_config_source_t source;
} engram_config_extra_t;

/* Plain data: copying the struct copies the configuration. */
struct engram_config {
    ENGRAM_CONFIG_KEYS(ENGRAM_CONFIG_FIELD)
    engram_config_source_t source[ENGRAM_CONFIG_NUM_KEYS];
    int num_extra;
    engram_config_extra_t extra[ENGRAM_CONFIG_EXTRA_MAX];
};

/* Core key i's declaration, or NULL. */
const engram_config_key_decl_t *engram_config_key(int i);
const char *engram_config_type_str(engram_config_type_t type);
/* Core key i's value: an INT, an ENUM's index, or a STRING/PATHS field. */
int64_t engram_config_core_int(const engram_config_t *cfg, int i);
const char *engram_config_core_string(const engram_config_t *cfg, int i);

/* Applies `key = value` text (the ENGRAM_CONFIG_FILE syntax) to cfg as the
 * file source; `name` prefixes error messages as the file path does. The
 * file reader and the config fuzz target share this parser. */
engram_status_t engram_config_read_text(engram_config_t *cfg, const char *name, const char *text, size_t len);
/* Reads the file named by ENGRAM_CONFIG_FILE (config_file.c). */
engram_status_t engram_config_read_file(engram_config_t *cfg, const char *path);

/* Stores a value for a non-core key (checked later against its declaration). */
engram_status_t engram_config_set_extra(engram_config_t *cfg, const char *name, const char *value,
                                        engram_config_source_t src, const char *where);

/* Typed parsing shared by core and transport keys (config_parse.c). `where`
 * prefixes the message ("file:line: ", "ENGRAM_X: ", ""). */
/* Whether an INT key also takes "auto" (accepted "auto|min..max"). */
bool engram_config_int_takes_auto(const engram_config_key_decl_t *k);
engram_status_t engram_config_parse_int(const engram_config_key_decl_t *k, const char *value, const char *where,
                                        int64_t *out);
engram_status_t engram_config_parse_enum(const engram_config_key_decl_t *k, const char *value, const char *where,
                                         int *out);
/* Every entry of a ':'-separated path list absolute (an empty or relative
 * one would make the loader depend on the working directory). */
engram_status_t engram_config_check_paths(const char *where, const char *key, const char *value);
/* Any type: the value checked (and for INT/ENUM parsed into *num). */
engram_status_t engram_config_parse_value(const engram_config_key_decl_t *k, const char *value, const char *where,
                                          int64_t *num);
/* The name at `index` of an ENUM's "a|b|c". */
void engram_config_enum_name(const char *accepted, int index, char *buf, size_t len);

/* The keys one transport declares: `transport` is its name (every key is
 * <transport>_<rest>), `owner` names it in messages ("ucx", "plugin
 * /path/libengram_transport_x.so"). */
typedef struct engram_config_keyset {
    const char *owner;
    const engram_config_key_decl_t *keys;
    int count;
    const char *transport;
} engram_config_keyset_t;

/* A transport's own declarations must be sound before their values are
 * read: valid distinct names, each its transport's name, '_' and more (so
 * never a core key), known types, parsing defaults. */
engram_status_t engram_config_check_decls(const engram_config_keyset_t *set);

/* Which of names[0..n) a transport key belongs to: the longest name that,
 * followed by '_', begins the key; -1 when none does. */
int engram_config_key_transport(const char *key, const char *const *names, int n);

/* The keys of transport names[index] into *set; false with the reason in
 * why (the transport cannot be loaded) otherwise. */
typedef bool (*engram_config_find_keys_t)(void *ctx, int index, engram_config_keyset_t *set, char *why,
                                          size_t len);

/* Every non-core value set in cfg is checked against the one transport its
 * name names (engram_config_key_transport over names[0..n); only those
 * transports are looked up through find, once each): it must declare the
 * key, soundly (engram_config_check_decls), and the value must parse there.
 * Else an error naming the key and where it was set, and: the transports
 * known when no name fits, the transport's reason when it cannot be
 * loaded, its keys when it does not declare this one. */
engram_status_t engram_config_check_keys(const engram_config_t *cfg, const char *const *names, int n,
                                         engram_config_find_keys_t find, void *ctx);
/* One line per key of `set`, as engram_config_print does for the core. */
void engram_config_print_keyset(const engram_config_t *cfg, const engram_config_keyset_t *set, FILE *out);

/* The view handed to a transport's open: core keys and the ones in `keys`.
 * `impl` holds the state and must outlive the view's use. */
typedef struct engram_config_view_impl {
    const engram_config_t *cfg;
    engram_config_keyset_t keys;
} engram_config_view_impl_t;
void engram_config_view_init(engram_config_view_t *view, engram_config_view_impl_t *impl, const engram_config_t *cfg,
                             const engram_config_keyset_t *keys);

#endif
