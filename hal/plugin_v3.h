/* Transport ABI version 3, frozen: the structs a plugin built against that
 * version's headers exports (version 2's are the same, under another
 * symbol), which the loader converts into the current ones
 * (<engram/plugin/plugin.h> says how versions work). Its ops and launcher
 * begin with their size, and fields were appended over time: a version 3
 * plugin has those of the optional ones its size covers. */
#ifndef ENGRAM_HAL_PLUGIN_V3_H
#define ENGRAM_HAL_PLUGIN_V3_H

#include <stddef.h>
#include <stdint.h>
#include "engram/plugin/transport.h"

#define ENGRAM_TRANSPORT_ABI_VERSION_V3 3u
#define ENGRAM_TRANSPORT_PLUGIN_SYMBOL_V3 "engram_transport_plugin_v3"
#define ENGRAM_TRANSPORT_ABI_VERSION_V2 2u
#define ENGRAM_TRANSPORT_PLUGIN_SYMBOL_V2 "engram_transport_plugin_v1"

typedef struct engram_gpu_launcher_ops_v3 {
    size_t size; /* sizeof(engram_gpu_launcher_ops_v3_t) at the time the backend was built */
    engram_status_t (*attach)(struct engram_transport *t, const engram_gpu_span_t *span, engram_gpu_launch_t **out);
    engram_status_t (*issue)(engram_gpu_launch_t *l, const engram_gpu_issue_t *fetch, void *stream);
    engram_status_t (*wait)(engram_gpu_launch_t *l, int slot, void *stream);
    void (*detach)(engram_gpu_launch_t *l);
} engram_gpu_launcher_ops_v3_t;

typedef struct engram_transport_ops_v3 {
    size_t size; /* sizeof(engram_transport_ops_v3_t) at the time the backend was built */
    const char *name;
    bool (*available)(engram_group_t *group, const char **why);
    engram_status_t (*open)(engram_group_t *group, const engram_config_view_t *config, engram_transport_t **out);
    void (*caps)(const engram_transport_t *t, engram_transport_caps_t *caps);
    engram_status_t (*reg_symmetric)(engram_transport_t *t, engram_segment_t *seg, engram_reg_span_t span,
                                     engram_region_t **out);
    engram_status_t (*reg_local)(engram_transport_t *t, engram_segment_t *seg, engram_region_t **out);
    void (*dereg)(engram_transport_t *t, engram_region_t *region);
    engram_status_t (*get)(engram_transport_t *t, int queue, int peer, engram_region_t *remote, uint64_t remote_off,
                           engram_region_t *local, uint64_t local_off, size_t len, unsigned flags);
    engram_status_t (*flush)(engram_transport_t *t, int queue, int peer, engram_request_t **req);
    engram_status_t (*test)(engram_transport_t *t, engram_request_t *req);
    void (*request_free)(engram_transport_t *t, engram_request_t *req);
    void (*describe)(const engram_transport_t *t, char *buf, size_t len);
    void (*close)(engram_transport_t *t);
    /* appended: present when size covers them */
    engram_status_t (*progress)(engram_transport_t *t);
    engram_status_t (*alloc_symmetric)(engram_transport_t *t, const engram_segment_params_t *params,
                                       engram_reg_span_t span, engram_region_t **out, void **addr,
                                       uint32_t *region_flags);
    const engram_gpu_launcher_ops_v3_t *gpu_launcher;
    const engram_config_key_decl_t *config_keys;
    int num_config_keys;
} engram_transport_ops_v3_t;

/* What engram_transport_plugin_v3 (and version 2's engram_transport_plugin_v1)
 * is: abi_version repeats the symbol's version. */
typedef struct engram_transport_plugin_v3 {
    uint32_t abi_version;
    const engram_transport_ops_v3_t *ops;
} engram_transport_plugin_v3_t;

/* The ops (and launcher) of `record`, exported by `file` under the symbol of
 * `version` (3 or 2), as the current version's structs in memory of their
 * own (*out, kept while the plugin is: never freed once handed out; free
 * with free() otherwise). Refused, with an error naming file and what is
 * wrong, when the record is not what that version's loader accepted: its
 * abi_version not the symbol's, no ops, an ops or launcher size that ends
 * before the last function every transport (launcher) provides. */
engram_status_t engram_plugin_from_v3(const engram_transport_plugin_v3_t *record, uint32_t version, const char *file,
                                      engram_transport_ops_t **out);

#endif
