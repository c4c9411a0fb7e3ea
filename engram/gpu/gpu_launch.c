/* The launcher path (fetch_path.h): a GPU-initiated transport's fetch
 * launcher (engram/plugin/gpu_launcher.h) gets the rows of every routed
 * peer outside the local path's. Its issue kernel goes first on the
 * fetch's stream, so its gets fly while the local path's kernel loads the
 * local rows, gathers the scales and applies the bad-index rule; its wait
 * is queued by the fetch's first test, wait, engram_fetch_buffers or
 * engram_fetch_release_ordered (it lacks ORDER_AT_CALL), so work the
 * caller queues in between overlaps the transfer; a captured fetch's is
 * queued at the call. */
#include <stdlib.h>

#include "engram/gpu/gpu_state.h"
#include "hal/log.h"

typedef struct engram_gpu_launcher_state {
    const engram_gpu_launcher_ops_t *ops;
    engram_gpu_launch_t *launch;
} engram_gpu_launcher_state_t;

/* Collective: the launcher takes the span (every rank's has the same
 * layout); the status is agreed. */
static engram_status_t launcher_create(engram_table_t *t, engram_gpu_table_t *g, void **state)
{
    engram_context_t *ctx = t->ctx;
    engram_gpu_launcher_state_t *l = calloc(1, sizeof(*l));
    *state = l;
    /* attach is collective: every rank reaches it, or none */
    engram_status_t st = engram_group_agree(
        ctx->group, l != NULL ? ENGRAM_OK : ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: out of memory"));
    if (st != ENGRAM_OK)
        return st;
    l->ops = engram_context_gpu_launcher(ctx);
    /* the receive region and the shard as allocated (not the span's
     * mappings of them, which are imports) */
    engram_gpu_span_t span = {
        .size = sizeof(span),
        .recv = g->recv_own->addr,
        .recv_bytes = g->recv_bytes,
        .shard = t->shard->addr,
        .shard_bytes = t->shard->size,
        .hybrid = t->shape.hybrid != 0,
        .num_slots = t->num_slots,
        .max_rows = (uint32_t)t->sizes.slot_rows, /* at most UINT32_MAX: engram_gpu_table_check */
    };
    return engram_group_agree(ctx->group, l->ops->attach(ctx->transport, &span, &l->launch));
}

/* Collective. */
static void launcher_destroy(engram_table_t *t, engram_gpu_table_t *g, void *state)
{
    (void)t;
    (void)g;
    engram_gpu_launcher_state_t *l = state;
    if (l == NULL)
        return;
    if (l->launch != NULL)
        l->ops->detach(l->launch);
    free(l);
}

static engram_status_t launcher_issue(void *state, engram_gpu_table_t *g, const engram_gpu_fetch_t *fx, bool *wait_due)
{
    engram_gpu_launcher_state_t *l = state;
    const engram_fetch_slot_t *f = fx->f;
    const engram_table_t *t = f->table;
    *wait_due = false;
    if (f->num_tokens == 0)
        return ENGRAM_OK;
    engram_gpu_issue_t is = {
        .size = sizeof(is),
        .shape = &t->shape,
        .indices = fx->indices,
        .num_tokens = f->num_tokens,
        .entries_per_token = t->params.entries_per_token,
        .row_bytes = t->params.row_bytes,
        .rows_off = (uint64_t)((char *)f->rows - g->recv), /* the slot's place in the receive region */
        .first_local_peer = g->first_peer,
        .local_peers = g->local_peers,
        .flush_depth = t->ctx->flush_depth,
        .first_queue = f->first_queue,
        .num_queues = f->num_queues,
        .slot = fx->slot,
    };
    engram_status_t st = l->ops->issue(l->launch, &is, fx->stream);
    *wait_due = st == ENGRAM_OK;
    return st;
}

static engram_status_t launcher_queue_wait(void *state, int slot, void *stream)
{
    engram_gpu_launcher_state_t *l = state;
    return l->ops->wait(l->launch, slot, stream);
}

const engram_gpu_path_ops_t engram_gpu_launcher_path = {
    .name = "launcher",
    .how = "the transport's kernels get its rows",
    .caps = ENGRAM_GPU_LAUNCHER_CAPS,
    .create = launcher_create,
    .destroy = launcher_destroy,
    .issue = launcher_issue,
    .queue_wait = launcher_queue_wait,
};
