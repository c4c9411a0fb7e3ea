/* gpu_path's choice of a table's local path (design in path_choice.h). */
#include "engram/gpu/path_choice.h"

#include <stdio.h>
#include <string.h>

#include "engram/gpu/fetch_path.h"
#include "hal/config_keys.h"

static const char uva[] = "uva", host_gather[] = "host_gather";

void engram_gpu_probe_reach(engram_gpu_probe_t *p)
{
    p->reach_bytes = p->probed_bytes = 0;
    p->share_past = p->gbps_first = 0;
    if (p->windows <= 0)
        return;
    const double first = p->window[0].uva_gbps;
    p->gbps_first = first;
    p->probed_bytes = p->window[p->windows - 1].bytes;
    p->reach_bytes = p->window[0].bytes;
    for (int i = 1; i < p->windows; i++) {
        if (p->window[i].uva_gbps < ENGRAM_GPU_REACH_SHARE * first) {
            p->share_past = p->window[i].uva_gbps / first;
            return;
        }
        p->reach_bytes = p->window[i].bytes;
    }
}

bool engram_gpu_path_needs_probe(const engram_gpu_path_ask_t *ask)
{
    return ask->gpu_path == ENGRAM_GPU_PATH_AUTO && ask->lacks == 0 && ask->node_bytes > ENGRAM_GPU_REACH_MIN_BYTES;
}

/* The probe's measurements into r, and the window whose rates apply to
 * the node's rows: the smallest that holds them, else the largest
 * (*beyond). */
static const engram_gpu_path_window_t *window_for(const engram_gpu_probe_t *p, uint64_t node_bytes,
                                                  engram_gpu_path_report_t *r, bool *beyond)
{
    r->reach_bytes = p->reach_bytes;
    r->probed_bytes = p->probed_bytes;
    r->share_past = p->share_past;
    r->gbps_first = p->gbps_first;
    r->gather_threads = p->gather_threads;
    r->probe_ms = p->probe_ms;
    r->windows = p->windows < ENGRAM_GPU_PATH_WINDOWS_MAX ? p->windows : ENGRAM_GPU_PATH_WINDOWS_MAX;
    memcpy(r->window, p->window, (size_t)r->windows * sizeof(r->window[0]));
    int w = 0;
    while (w < r->windows - 1 && r->window[w].bytes < node_bytes)
        w++;
    *beyond = r->window[w].bytes < node_bytes;
    return &r->window[w];
}

engram_gpu_pick_t engram_gpu_path_decide(const engram_gpu_path_ask_t *ask, const engram_gpu_probe_t *probe,
                                         engram_gpu_path_report_t *r)
{
    memset((char *)r + sizeof(r->size), 0, sizeof(*r) - sizeof(r->size));
    r->path = uva;
    if (ask->gpu_path == ENGRAM_GPU_PATH_UVA) {
        r->reason = "gpu_path=uva";
        return ENGRAM_GPU_PICK_UVA;
    }
    if (ask->lacks != 0) {
        r->reason = engram_gpu_cap_reason(ask->lacks);
        return ask->gpu_path == ENGRAM_GPU_PATH_HOST_GATHER ? ENGRAM_GPU_PICK_REFUSED : ENGRAM_GPU_PICK_UVA;
    }
    if (ask->gpu_path == ENGRAM_GPU_PATH_HOST_GATHER) {
        r->path = host_gather;
        r->reason = "gpu_path=host_gather";
        return ENGRAM_GPU_PICK_HOST_GATHER;
    }
    if (!engram_gpu_path_needs_probe(ask)) {
        r->reason = "gpu_path=auto: the node's rows fit the first probe window (64 MiB): uva, with no probe";
        return ENGRAM_GPU_PICK_UVA;
    }
    if (probe == NULL || probe->windows <= 0) {
        r->reason = "gpu_path=auto: nothing was measured";
        return ENGRAM_GPU_PICK_UVA;
    }
    bool beyond;
    const engram_gpu_path_window_t *w = window_for(probe, ask->node_bytes, r, &beyond);
    r->window_bytes = w->bytes;
    r->h2d_gbps = w->h2d_gbps > 0 ? w->h2d_gbps : 0;
    /* past the largest window, uva's rate is known only where it had
     * fallen there already: beyond its reach it only falls further */
    const double u = w->uva_gbps > 0 && (!beyond || w->bytes > probe->reach_bytes) ? w->uva_gbps : 0;
    const double h = w->host_gather_gbps > 0 ? w->host_gather_gbps : 0;
    r->uva_gbps = u;
    r->host_gather_gbps = h;
    if (h == 0) {
        if (ask->node_bytes > probe->reach_bytes) {
            r->path = host_gather;
            r->reason = "gpu_path=auto: host_gather's rate was not measured (its probe failed, logged), and the "
                        "node's rows pass the GPU's measured reach into host memory";
            return ENGRAM_GPU_PICK_HOST_GATHER;
        }
        r->reason = "gpu_path=auto: host_gather's rate was not measured (its probe failed, logged), and the "
                    "node's rows are within the GPU's measured reach into host memory";
        return ENGRAM_GPU_PICK_UVA;
    }
    if (u == 0) {
        r->path = host_gather;
        r->reason = beyond && w->uva_gbps > 0 ? "gpu_path=auto: the node's rows pass the largest window probed, "
                                                "where uva still held its rate: its rate beyond is not measured"
                                              : "gpu_path=auto: uva's rate was not measured";
        return ENGRAM_GPU_PICK_HOST_GATHER;
    }
    if (u >= h * (1 + ENGRAM_GPU_AUTO_MARGIN)) {
        r->reason = "gpu_path=auto: uva's measured rate is at least host_gather's and the margin host_gather is "
                    "given for holding no SM";
        return ENGRAM_GPU_PICK_UVA;
    }
    r->path = host_gather;
    r->reason = "gpu_path=auto: host_gather's measured rate, with the margin it is given for holding no SM, is "
                "above uva's";
    return ENGRAM_GPU_PICK_HOST_GATHER;
}

/* "12.3 GB/s", or "not measured". */
static const char *rate(char *buf, size_t len, double gbps)
{
    if (gbps > 0)
        snprintf(buf, len, "%.1f GB/s", gbps);
    else
        snprintf(buf, len, "not measured");
    return buf;
}

void engram_gpu_path_explain(const engram_gpu_path_report_t *r, uint64_t node_bytes, char *buf, size_t len)
{
    const double gib = (double)node_bytes / (double)(1u << 30);
    if (r->window_bytes == 0) {
        snprintf(buf, len, "%s for %.2f GiB of rows per node (%s)", r->path, gib, r->reason);
        return;
    }
    char u[32], h[32], c[32];
    snprintf(buf, len,
             "%s for %.2f GiB of rows per node (%s; rates from the %llu MiB window: uva %s, host_gather %s, "
             "host-to-device copy %s; uva's reach into host memory %llu MiB)",
             r->path, gib, r->reason, (unsigned long long)(r->window_bytes >> 20), rate(u, sizeof(u), r->uva_gbps),
             rate(h, sizeof(h), r->host_gather_gbps), rate(c, sizeof(c), r->h2d_gbps),
             (unsigned long long)(r->reach_bytes >> 20));
}
