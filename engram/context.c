/* Context: configuration, group and the opened transport.
 *
 * engram_context_create, step by step (collective):
 *   1. copy the configuration (or read defaults, file and env), gather
 *      where the ranks run (the group's host map, hal/host_id.h) and, in
 *      hybrid mode, check that each node's ranks share a host;
 *   2. select the transport (registry: explicit name, plugin, or auto);
 *   3. open it on the group (the transport exchanges its addresses);
 *   4. check the queue count against what it offers and, for a transport
 *      confined to one host, that the group is; agree on each outcome with
 *      every rank so that none is left waiting. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/internal.h"
#include "hal/log.h"
#include "hal/group.h"
#include "hal/registry.h"
#include "transports/builtins.h"

_Static_assert(ENGRAM_ROUTE_AGGREGATE == ENGRAM_GET_AGGREGATE, "routing.h mirrors the transport flag");

static engram_status_t load_config(const engram_config_t *cfg, engram_config_t *dst)
{
    if (cfg != NULL) {
        *dst = *cfg;
        return ENGRAM_OK;
    }
    engram_config_t *fresh;
    engram_status_t st = engram_config_create(&fresh);
    if (st != ENGRAM_OK)
        return st;
    *dst = *fresh;
    engram_config_destroy(fresh);
    return ENGRAM_OK;
}

static engram_status_t choose_queues(engram_context_t *ctx)
{
    int want = (int)ctx->cfg.num_qps;
    int have = ctx->caps.max_queues;
    if (have < 1)
        return ENGRAM_ERROR(ENGRAM_ERR_TRANSPORT, "transport %s offers no queues", ctx->ops->name);
    if (want > have)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "num_qps=%d exceeds the %d queues transport %s offers", want,
                            have, ctx->ops->name);
    ctx->num_queues = want == 0 ? have : want;
    return ENGRAM_OK;
}

/* A transport without ENGRAM_CAP_CROSS_HOST reaches only ranks on its own
 * host: a group spanning hosts is refused here, before any table. The
 * group's host map was gathered at step 1: local, the same on every rank. */
static engram_status_t check_hosts(engram_context_t *ctx)
{
    const engram_group_hosts_t *hosts;
    engram_status_t st = engram_group_hosts(ctx->group, &hosts);
    if (st != ENGRAM_OK)
        return st;
    if (!(ctx->caps.flags & ENGRAM_CAP_CROSS_HOST) && hosts->count > 1)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "transport %s reaches only ranks on its own host (no cross-host capability), and this "
                            "group's %d ranks run on %d hosts: %s",
                            ctx->ops->name, engram_group_size(ctx->group), hosts->count, hosts->spread);
    return ENGRAM_OK;
}

/* A queue holds at most caps.max_outstanding gets in flight to a peer, and
 * its get blocks while it is full: a batch held back (AGGREGATE) past that would
 * make the transport ring on its own or wait on gets it never sent, so the
 * doorbell rings at least that often. 0 states no bound. */
static uint32_t doorbell_depth(const engram_context_t *ctx)
{
    uint32_t depth = (uint32_t)ctx->cfg.flush_depth; /* 1..2^20: config_keys.h */
    int most = ctx->caps.max_outstanding;
    return most > 0 && (uint32_t)most < depth ? (uint32_t)most : depth;
}

bool engram_context_needs_progress(const engram_context_t *ctx)
{
    return ctx->progress_regions > 0;
}

const engram_gpu_launcher_ops_t *engram_context_gpu_launcher(const engram_context_t *ctx)
{
    if (!(ctx->caps.flags & ENGRAM_CAP_GPU_INITIATED))
        return NULL;
    return ctx->ops->gpu_launcher;
}

/* Group hook: while this rank waits in a collective, its transport keeps
 * serving the peers' gets (errors surface at the peers' waits). */
static void serve_peers(void *arg)
{
    engram_context_t *ctx = arg;
    (void)ctx->ops->progress(ctx->transport);
}

uint32_t engram_context_reg_flags(const engram_context_t *ctx)
{
    return ctx->caps.flags & ENGRAM_CAP_OWNER_PROGRESS ? ENGRAM_REGION_OWNER_PROGRESS : 0u;
}

void engram_context_hold_progress(engram_context_t *ctx, uint32_t region_flags, int delta)
{
    if (!(region_flags & ENGRAM_REGION_OWNER_PROGRESS) || ctx->ops->progress == NULL)
        return;
    int before = ctx->progress_regions;
    ctx->progress_regions += delta;
    /* Without such regions collectives block instead of busy-serving. */
    if (before == 0 && ctx->progress_regions > 0)
        engram_group_set_progress(ctx->group, serve_peers, ctx);
    else if (before > 0 && ctx->progress_regions == 0)
        engram_group_set_progress(ctx->group, NULL, NULL);
}

/* With transport=auto: a transport that opened but moves every get
 * through a host thread (ENGRAM_CAP_HOST_PROXIED) is closed again, with the
 * reason logged, so that a faster backend runs. The caps are the same on
 * every rank (open agrees on what it found). */
static bool pass_over_proxied(engram_context_t *ctx)
{
    engram_transport_caps_t caps;
    ctx->ops->caps(ctx->transport, &caps);
    if (!(caps.flags & ENGRAM_CAP_HOST_PROXIED))
        return false;
    char desc[512] = "";
    if (ctx->ops->describe != NULL)
        ctx->ops->describe(ctx->transport, desc, sizeof(desc));
    ENGRAM_INFO("transport=auto passes over %s: every get goes through a host proxy thread here%s%s%s, slower than "
                "the next backend; set transport=%s to run on it anyway",
                ctx->ops->name, desc[0] ? " (" : "", desc, desc[0] ? ")" : "", ctx->ops->name);
    ctx->ops->close(ctx->transport);
    ctx->transport = NULL;
    return true;
}

/* Steps 2 and 3. With transport=auto a backend that fails to open, or that
 * opens host-proxied, is passed over (logged) and the next one tried; open
 * is collective and a transport returns the same status on every rank, so
 * all ranks fall through together. */
static engram_status_t select_and_open(engram_context_t *ctx)
{
    enum { MAX_TRIES = 16 };
    const engram_transport_ops_t *failed[MAX_TRIES];
    bool fall_through = strcmp(ctx->cfg.transport, "auto") == 0;
    for (int tries = 0;; tries++) {
        engram_status_t st = engram_registry_select_excluding(ctx->group, &ctx->cfg, engram_transport_builtins(),
                                                              failed, tries, &ctx->ops);
        st = engram_group_agree(ctx->group, st);
        if (st != ENGRAM_OK)
            return st;
        st = engram_transport_open(ctx->ops, ctx->group, &ctx->cfg, &ctx->transport);
        if (st == ENGRAM_OK && fall_through && tries + 1 < MAX_TRIES && pass_over_proxied(ctx)) {
            failed[tries] = ctx->ops;
            continue;
        }
        if (st == ENGRAM_OK || !fall_through || tries + 1 == MAX_TRIES)
            return st;
        ENGRAM_WARN("transport=auto: %s failed to open (%s); trying the next backend", ctx->ops->name,
                    engram_status_str(st));
        failed[tries] = ctx->ops;
    }
}

engram_status_t engram_context_create(const engram_config_t *cfg, engram_group_t *group, engram_context_t **out)
{
    if (group == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_context_create: group and out must not be NULL");
    engram_context_t *ctx = calloc(1, sizeof(*ctx));
    engram_status_t st = ctx ? ENGRAM_OK : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate a context");
    if (st == ENGRAM_OK)
        st = load_config(cfg, &ctx->cfg);
    st = engram_group_agree(group, st);
    if (st != ENGRAM_OK)
        goto err_free_ctx;
    ctx->group = group;
    engram_group_set_timeout(group, (int)ctx->cfg.timeout_ms);
    /* Where the ranks run, gathered once: what the transports' checks
     * (available, open) and check_hosts read. Hybrid regions map a node's
     * memory in each of its ranks: a node spanning hosts is refused before
     * any transport is asked. */
    const engram_group_hosts_t *hosts;
    st = engram_group_agree(group, engram_group_hosts(group, &hosts));
    if (st == ENGRAM_OK && ctx->cfg.mode == ENGRAM_MODE_HYBRID)
        st = engram_group_agree(group, engram_group_check_nodes(group, "mode=hybrid"));
    if (st != ENGRAM_OK)
        goto err_free_ctx;

    st = select_and_open(ctx);
    if (st != ENGRAM_OK)
        goto err_free_ctx;
    ctx->ops->caps(ctx->transport, &ctx->caps);
    ctx->flush_depth = doorbell_depth(ctx);
    st = engram_group_agree(group, choose_queues(ctx));
    if (st == ENGRAM_OK)
        st = engram_group_agree(group, check_hosts(ctx));
    if (st != ENGRAM_OK)
        goto err_close_transport;
    ENGRAM_INFO("context on transport %s, %d queues, a doorbell every %u gets per (queue, peer)", ctx->ops->name,
                ctx->num_queues, ctx->flush_depth);
    *out = ctx;
    return ENGRAM_OK;

err_close_transport:
    ctx->ops->close(ctx->transport);
err_free_ctx:
    free(ctx);
    return st;
}

engram_status_t engram_context_torn_down_alone(const engram_context_t *ctx, const char *fn, engram_status_t st)
{
    const char *failure;
    if (engram_group_failed(ctx->group, &failure) == ENGRAM_OK || st == ENGRAM_ERR_BUSY)
        return st;
    /* st OK: the group failed after the agreement (a transport's barrier) */
    char cause[ENGRAM_LAST_ERROR_BYTES];
    snprintf(cause, sizeof(cause), "%s", st != ENGRAM_OK ? engram_last_error() : failure);
    return ENGRAM_ERROR(ENGRAM_ERR_PEER, "%s: torn down on this rank without the other ranks' agreement: %s", fn,
                        cause);
}

engram_status_t engram_context_destroy(engram_context_t *ctx)
{
    if (ctx == NULL)
        return ENGRAM_OK;
    engram_group_t *group = ctx->group;
    int64_t bound = engram_group_bound_begin(group);
    engram_status_t st = ENGRAM_OK;
    if (ctx->live_tables > 0)
        st = ENGRAM_ERROR(ENGRAM_ERR_BUSY, "engram_context_destroy: %d tables still exist; destroy them first",
                          ctx->live_tables);
    st = engram_group_agree(group, st);
    if (st == ENGRAM_ERR_BUSY) {
        engram_group_bound_end(group, bound);
        return st;
    }
    char why[ENGRAM_LAST_ERROR_BYTES] = "";
    st = engram_context_torn_down_alone(ctx, "engram_context_destroy", st);
    if (st != ENGRAM_OK)
        snprintf(why, sizeof(why), "%s", engram_last_error());
    ctx->ops->close(ctx->transport);
    free(ctx);
    engram_group_bound_end(group, bound);
    if (st != ENGRAM_OK)
        engram_last_error_restore(why);
    return st;
}

const char *engram_context_transport(const engram_context_t *ctx)
{
    return ctx ? ctx->ops->name : "";
}
