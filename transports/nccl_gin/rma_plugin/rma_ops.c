/* Contexts and one-sided operations. A context holds one CUDA stream per
 * NCCL context index, up to RMA_MAX_STREAMS, which further indices share;
 * iget/iput are cudaMemcpyAsync between this rank's registration and the
 * peer's, mapped here, on the index's stream; a request is
 * an event recorded after the copy, and test() queries it. A signal is
 * sent to the owner of the signal's memory once the copy before it has
 * completed, and the owner applies it (rma_region_apply_signal), so the
 * data is in place before any reader can see the signal move. */
#include <stdlib.h>
#include <string.h>

#include "transports/nccl_gin/rma_plugin/rma_internal.h"

typedef struct rma_request {
    rma_comm_t *comm;
    rma_stream_order_t *order; /* the stream's bookkeeping */
    uint64_t seq;              /* its place on that stream */
    cudaEvent_t done;
    int signal_peer; /* -1: no signal to send when the copy is done */
    rma_signal_msg_t signal;
} rma_request_t;

rma_result_t rma_ops_create_context(void *coll_comm, rma_config_t *config, void **rma_ctx)
{
    rma_comm_t *c = coll_comm;
    if (c == NULL || config == NULL || rma_ctx == NULL || config->n_contexts < 1) {
        RMA_WARN("createContext: bad arguments (%d contexts)", config != NULL ? config->n_contexts : -1);
        return RMA_ERR_ARGUMENT;
    }
    rma_result_t res = rma_use_device(c);
    if (res != RMA_SUCCESS)
        return res;
    int nstreams = config->n_contexts < RMA_MAX_STREAMS ? config->n_contexts : RMA_MAX_STREAMS;
    rma_context_t *x = calloc(1, sizeof(*x));
    if (x == NULL || (x->streams = calloc((size_t)nstreams, sizeof(*x->streams))) == NULL ||
        (x->order = calloc((size_t)nstreams, sizeof(*x->order))) == NULL) {
        if (x != NULL)
            free(x->streams);
        free(x);
        return RMA_ERR_SYSTEM;
    }
    x->comm = c;
    x->n = config->n_contexts;
    for (int i = 0; i < nstreams; i++)
        x->order[i] = (rma_stream_order_t)RMA_STREAM_ORDER_INIT;
    for (; x->nstreams < nstreams; x->nstreams++) {
        cudaError_t e = cudaStreamCreateWithFlags(&x->streams[x->nstreams], cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            RMA_WARN("createContext: cudaStreamCreate: %s", cudaGetErrorString(e));
            (void)rma_ops_destroy_context(x);
            return RMA_ERR_CUDA;
        }
    }
    pthread_mutex_lock(&c->lock);
    x->next = c->contexts;
    c->contexts = x;
    pthread_mutex_unlock(&c->lock);
    *rma_ctx = x;
    return RMA_SUCCESS;
}

rma_result_t rma_ops_destroy_context(void *rma_ctx)
{
    rma_context_t *x = rma_ctx;
    if (x == NULL)
        return RMA_SUCCESS;
    rma_comm_t *c = x->comm;
    pthread_mutex_lock(&c->lock);
    for (rma_context_t **p = &c->contexts; *p != NULL; p = &(*p)->next)
        if (*p == x) {
            *p = x->next;
            break;
        }
    pthread_mutex_unlock(&c->lock);
    rma_result_t res = rma_use_device(c);
    for (int i = 0; i < x->nstreams; i++) {
        if (res == RMA_SUCCESS && cudaStreamSynchronize(x->streams[i]) != cudaSuccess)
            res = RMA_ERR_CUDA;
        cudaStreamDestroy(x->streams[i]);
    }
    free(x->streams);
    free(x->order);
    free(x);
    return res;
}

rma_result_t rma_ops_quiesce(rma_comm_t *c)
{
    rma_result_t res = RMA_SUCCESS;
    pthread_mutex_lock(&c->lock);
    for (rma_context_t *x = c->contexts; x != NULL; x = x->next)
        for (int i = 0; i < x->nstreams; i++)
            if (cudaStreamSynchronize(x->streams[i]) != cudaSuccess)
                res = RMA_ERR_CUDA;
    pthread_mutex_unlock(&c->lock);
    if (cudaStreamSynchronize(c->signal_stream) != cudaSuccess)
        res = RMA_ERR_CUDA;
    if (res != RMA_SUCCESS)
        RMA_WARN("rank %d: waiting for outstanding copies: %s", c->rank, cudaGetErrorString(cudaGetLastError()));
    return res;
}

static bool span_ok(uint64_t off, uint64_t size, uint64_t limit)
{
    return off <= limit && size <= limit - off;
}

/* The context's stream for `context` and its bookkeeping, after the
 * common argument checks. */
static rma_result_t op_stream(rma_context_t *x, int context, uint32_t rank, cudaStream_t *out,
                              rma_stream_order_t **order)
{
    if (x == NULL || context < 0 || context >= x->n) {
        RMA_WARN("context index %d outside the %d contexts", context, x != NULL ? x->n : 0);
        return RMA_ERR_ARGUMENT;
    }
    if (rank >= (uint32_t)x->comm->nranks) {
        RMA_WARN("rank %u outside the %d ranks", rank, x->comm->nranks);
        return RMA_ERR_ARGUMENT;
    }
    *out = x->streams[context % x->nstreams];
    *order = &x->order[context % x->nstreams];
    return rma_use_device(x->comm);
}

/* Where `rank`'s registration `mh` holds [off, off + size), as seen here. */
static rma_result_t locate(rma_comm_t *c, void *mh, uint32_t rank, uint64_t off, uint64_t size, const char *what,
                           char **out)
{
    rma_region_t *g = mh;
    if (g == NULL || g->comm != c) {
        RMA_WARN("%s: not a registration of this communicator", what);
        return RMA_ERR_ARGUMENT;
    }
    const rma_view_t *v = &g->views[rank];
    if (!span_ok(off, size, v->size)) {
        RMA_WARN("%s: [%llu, +%llu) outside rank %u's %llu registered bytes", what, (unsigned long long)off,
                 (unsigned long long)size, rank, (unsigned long long)v->size);
        return RMA_ERR_ARGUMENT;
    }
    if (v->base == NULL && size > 0) {
        RMA_WARN("%s: rank %u's registration is not shared (not exportable cuMem memory)", what, rank);
        return RMA_ERR_USAGE;
    }
    *out = v->base + off;
    return RMA_SUCCESS;
}

/* Copies on the stream (when size > 0) and returns a request completing
 * after it. */
static rma_result_t copy_request(rma_comm_t *c, cudaStream_t s, rma_stream_order_t *order, char *dst,
                                 const char *src, size_t size, rma_request_t **out)
{
    rma_request_t *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return RMA_ERR_SYSTEM;
    q->comm = c;
    q->order = order;
    q->signal_peer = -1;
    cudaError_t e = size > 0 ? cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, s) : cudaSuccess;
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming);
    if (e == cudaSuccess) {
        e = cudaEventRecord(q->done, s);
        if (e != cudaSuccess)
            cudaEventDestroy(q->done);
    }
    if (e != cudaSuccess) {
        RMA_WARN("rank %d: issuing a %zu-byte copy: %s", c->rank, size, cudaGetErrorString(e));
        atomic_store(&c->failed, true);
        free(q);
        return RMA_ERR_CUDA;
    }
    q->seq = ++order->issued;
    *out = q;
    return RMA_SUCCESS;
}

rma_result_t rma_ops_iget(void *rma_ctx, int context, uint64_t remote_off, void *remote_mh, size_t size,
                          uint64_t local_off, void *local_mh, uint32_t rank, void **request)
{
    rma_context_t *x = rma_ctx;
    cudaStream_t s;
    rma_stream_order_t *order;
    char *src, *dst;
    rma_result_t res = op_stream(x, context, rank, &s, &order);
    if (res == RMA_SUCCESS)
        res = locate(x->comm, remote_mh, rank, remote_off, size, "iget source", &src);
    if (res == RMA_SUCCESS)
        res = locate(x->comm, local_mh, (uint32_t)x->comm->rank, local_off, size, "iget destination", &dst);
    if (res == RMA_SUCCESS)
        res = copy_request(x->comm, s, order, dst, src, size, (rma_request_t **)request);
    return res;
}

rma_result_t rma_ops_iput(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                          void *dst_mh, uint32_t rank, void **request)
{
    return rma_ops_iput_signal(rma_ctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, 0, NULL, 0, 0, true,
                               request);
}

rma_result_t rma_ops_iput_signal(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                 uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t signal_off, void *signal_mh,
                                 uint64_t signal_value, uint32_t signal_op, bool strong, void **request)
{
    (void)strong; /* every signal here follows its data */
    rma_context_t *x = rma_ctx;
    cudaStream_t s;
    rma_stream_order_t *order;
    char *src = NULL, *dst = NULL;
    rma_region_t *sig = NULL;
    rma_result_t res = op_stream(x, context, rank, &s, &order);
    bool data = size > 0;
    if (res == RMA_SUCCESS && data)
        res = locate(x->comm, src_mh, (uint32_t)x->comm->rank, src_off, size, "iput source", &src);
    if (res == RMA_SUCCESS && data)
        res = locate(x->comm, dst_mh, rank, dst_off, size, "iput destination", &dst);
    if (res == RMA_SUCCESS && signal_mh != NULL) {
        if (signal_op != RMA_SIGNAL_OP_INC && signal_op != RMA_SIGNAL_OP_ADD) {
            RMA_WARN("iputSignal: unknown signal op %u", signal_op);
            res = RMA_ERR_ARGUMENT;
        } else if (signal_off % sizeof(uint64_t) != 0) {
            RMA_WARN("iputSignal: signal offset %llu is not 8-byte aligned", (unsigned long long)signal_off);
            res = RMA_ERR_ARGUMENT;
        } else {
            /* Only the bounds: the owner applies it, shared or not. */
            sig = signal_mh;
            if (sig->comm != x->comm || !span_ok(signal_off, sizeof(uint64_t), sig->views[rank].size)) {
                RMA_WARN("iputSignal: signal offset %llu outside rank %u's registration",
                         (unsigned long long)signal_off, rank);
                res = RMA_ERR_ARGUMENT;
            }
        }
    }
    rma_request_t *q = NULL;
    if (res == RMA_SUCCESS)
        res = copy_request(x->comm, s, order, dst, src, size, &q);
    if (res != RMA_SUCCESS)
        return res;
    if (sig != NULL) {
        q->signal_peer = (int)rank;
        q->signal.region_id = sig->views[rank].id;
        q->signal.offset = signal_off;
        q->signal.value = signal_op == RMA_SIGNAL_OP_INC ? 1 : signal_value;
    }
    *request = q;
    return RMA_SUCCESS;
}

rma_result_t rma_ops_iflush(void *rma_ctx, int context, void *mhandle, uint32_t rank, void **request)
{
    (void)mhandle;
    rma_context_t *x = rma_ctx;
    cudaStream_t s;
    rma_stream_order_t *order;
    rma_result_t res = op_stream(x, context, rank, &s, &order);
    /* Copies land where they are going once their event completes, so a
     * flush only has to wait for the copies issued before it. */
    if (res == RMA_SUCCESS)
        res = copy_request(x->comm, s, order, NULL, NULL, 0, (rma_request_t **)request);
    return res;
}

rma_result_t rma_ops_test(void *coll_comm, void *request, int *done)
{
    rma_request_t *q = request;
    if (q == NULL || done == NULL) {
        RMA_WARN("test: NULL %s", q == NULL ? "request" : "done");
        return RMA_ERR_ARGUMENT;
    }
    rma_comm_t *c = coll_comm != NULL ? coll_comm : q->comm;
    *done = 0;
    rma_order_answer_t known = rma_order_lookup(q->order, q->seq);
    if (known == RMA_ORDER_PENDING)
        return RMA_SUCCESS; /* behind a pending copy on its stream */
    rma_result_t res = rma_use_device(c);
    if (res != RMA_SUCCESS)
        return res;
    cudaError_t e = known == RMA_ORDER_DONE ? cudaSuccess : cudaEventQuery(q->done);
    if (e == cudaErrorNotReady) {
        rma_order_found(q->order, q->seq, false);
        return rma_mesh_drain(c);
    }
    if (e != cudaSuccess) {
        RMA_WARN("rank %d: a copy failed: %s", c->rank, cudaGetErrorString(e));
        atomic_store(&c->failed, true);
        return RMA_ERR_CUDA;
    }
    if (q->signal_peer == c->rank)
        res = rma_region_apply_signal(c, &q->signal);
    else if (q->signal_peer >= 0)
        res = rma_mesh_send_signal(c, q->signal_peer, &q->signal);
    if (res != RMA_SUCCESS)
        return res; /* the request stays: NCCL treats the error as fatal */
    rma_order_found(q->order, q->seq, true);
    cudaEventDestroy(q->done);
    free(q);
    *done = 1;
    return RMA_SUCCESS;
}

rma_result_t rma_ops_progress(void *rma_ctx)
{
    rma_context_t *x = rma_ctx;
    if (x == NULL)
        return RMA_ERR_ARGUMENT;
    return rma_mesh_drain(x->comm);
}

rma_result_t rma_ops_query_last_error(void *rma_ctx, bool *has_error)
{
    rma_context_t *x = rma_ctx;
    if (x == NULL || has_error == NULL)
        return RMA_ERR_ARGUMENT;
    *has_error = atomic_load(&x->comm->failed);
    return RMA_SUCCESS;
}
