/* The callbacks provider: a framework's own process group, wrapped. Its
 * collectives are only as bounded as the callbacks the caller supplies. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/group_provider.h"
#include "hal/log.h"
#include "hal/struct_import.h"

/* A callback's call with engram_last_error() empty, so that what a failed
 * one left there (a callback over another engram group says which rank did
 * not answer) can be told from older text, which a callback that succeeds
 * gets back. Returns the callback's result; *said gets ": <text>" or "". */
typedef struct callback_call {
    char saved[ENGRAM_LAST_ERROR_BYTES];
    char said[ENGRAM_LAST_ERROR_BYTES + 2];
} callback_call_t;

static void call_begin(callback_call_t *c)
{
    snprintf(c->saved, sizeof(c->saved), "%s", engram_last_error());
    engram_last_error_restore("");
}

static int call_end(callback_call_t *c, int rc)
{
    const char *text = engram_last_error();
    snprintf(c->said, sizeof(c->said), "%s%s", rc != 0 && text[0] ? ": " : "", rc != 0 ? text : "");
    if (rc == 0)
        engram_last_error_restore(c->saved);
    return rc;
}

static engram_status_t callbacks_allgather(engram_group_t *g, const void *send, void *recv, size_t bytes)
{
    const engram_group_callbacks_t *cb = g->provider;
    callback_call_t c;
    call_begin(&c);
    int rc = call_end(&c, cb->allgather(cb->ctx, send, recv, bytes));
    if (rc == 0)
        return ENGRAM_OK;
    return ENGRAM_ERROR(ENGRAM_ERR_PEER, "rank %d: the caller's allgather callback (%zu bytes) returned %d%s",
                        g->rank, bytes, rc, c.said);
}

static engram_status_t callbacks_barrier(engram_group_t *g)
{
    const engram_group_callbacks_t *cb = g->provider;
    callback_call_t c;
    call_begin(&c);
    int rc = call_end(&c, cb->barrier(cb->ctx));
    if (rc == 0)
        return ENGRAM_OK;
    return ENGRAM_ERROR(ENGRAM_ERR_PEER, "rank %d: the caller's barrier callback returned %d%s", g->rank, rc, c.said);
}

static void callbacks_destroy(engram_group_t *g)
{
    engram_group_callbacks_t *cb = g->provider;
    if (cb->destroy != NULL)
        cb->destroy(cb->ctx);
    free(cb);
}

static const engram_group_ops_t callbacks_ops = {
    .size = sizeof(engram_group_ops_t),
    .name = "callbacks",
    .allgather = callbacks_allgather,
    .barrier = callbacks_barrier,
    .destroy = callbacks_destroy,
};

engram_status_t engram_group_callbacks_create(const engram_group_callbacks_t *cb, engram_group_t **out)
{
    if (cb == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "group from callbacks: NULL %s", cb == NULL ? "callbacks" : "out");
    /* Fields after barrier have defaults (destroy: none). */
    engram_group_callbacks_t in = {.size = sizeof(in), .destroy = NULL};
    engram_status_t ist = engram_struct_import(&in, sizeof(in), _Alignof(engram_group_callbacks_t), cb,
                                              ENGRAM_GROUP_CALLBACKS_MIN_SIZE, "group callbacks");
    if (ist != ENGRAM_OK)
        return ist;
    cb = &in;
    if (cb->allgather == NULL || cb->barrier == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "group callbacks: the %s callback is NULL",
                            cb->allgather == NULL ? "allgather" : "barrier");
    engram_group_t *g = calloc(1, sizeof(*g));
    engram_group_callbacks_t *copy = malloc(sizeof(*copy));
    if (g == NULL || copy == NULL) {
        free(g);
        free(copy);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "no memory for a callbacks group");
    }
    *copy = *cb;
    engram_status_t st = engram_group_init(g, &callbacks_ops, copy, cb->rank, cb->nranks, cb->local_size);
    if (st != ENGRAM_OK) {
        free(copy);
        free(g);
        return st;
    }
    *out = g;
    return ENGRAM_OK;
}

static int solo_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    (void)ctx;
    memcpy(recv, send, bytes);
    return 0;
}

static int solo_barrier(void *ctx)
{
    (void)ctx;
    return 0;
}

engram_status_t engram_group_solo_create(engram_group_t **out)
{
    engram_group_callbacks_t cb = {.size = sizeof(cb), .rank = 0, .nranks = 1, .local_size = 1,
                                   .allgather = solo_allgather, .barrier = solo_barrier};
    return engram_group_callbacks_create(&cb, out);
}
