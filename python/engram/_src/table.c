/* _engram.Table: a context and one table over a Group (engram.Buffer in
 * engram/_buffer.py is the DeepEP-shaped front). Collectives release the
 * GIL; every library call on the table holds the table lock. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ext.h"

void eg_table_lock(eg_table_t *t)
{
    if (pthread_mutex_trylock(&t->lock) == 0)
        return;
    /* another thread holds it, maybe waiting without the GIL: never block
     * on the lock while holding the GIL */
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&t->lock);
    Py_END_ALLOW_THREADS
}

void eg_table_unlock(eg_table_t *t)
{
    pthread_mutex_unlock(&t->lock);
}

/* s's UTF-8 text, or NULL with an exception set: a NUL inside would end
 * the text the library reads there ("loopback\0junk" read as loopback). */
static const char *config_text(PyObject *s, const char *what)
{
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(s, &n);
    if (text != NULL && strlen(text) != (size_t)n) {
        eg_raise(eg_InvalidArgumentError, "config: %s %R holds a NUL character", what, s);
        return NULL;
    }
    return text;
}

static int apply_config(engram_config_t *cfg, PyObject *config)
{
    if (config == NULL || config == Py_None)
        return 0;
    if (!PyDict_Check(config)) {
        eg_raise(eg_InvalidArgumentError, "config: expected a dict of key -> value, got %s",
                 Py_TYPE(config)->tp_name);
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(config, &pos, &key, &value)) {
        PyObject *ks = PyObject_Str(key), *vs = PyObject_Str(value);
        const char *k = ks ? config_text(ks, "key") : NULL;
        const char *v = k && vs ? config_text(vs, k) : NULL;
        engram_status_t st = k && v ? engram_config_set(cfg, k, v) : ENGRAM_OK;
        int failed = k == NULL || v == NULL || st != ENGRAM_OK;
        if (k && v && st != ENGRAM_OK)
            eg_raise_status(st, "config");
        Py_XDECREF(ks);
        Py_XDECREF(vs);
        if (failed)
            return -1;
    }
    return 0;
}

static int config_timeout_ms(const engram_config_t *cfg)
{
    char buf[32] = "";
    if (engram_config_get(cfg, "timeout_ms", buf, sizeof(buf)) != ENGRAM_OK)
        return ENGRAM_DEFAULT_TIMEOUT_MS;
    int ms = atoi(buf);
    return ms > 0 ? ms : ENGRAM_DEFAULT_TIMEOUT_MS;
}

static int init_impl(eg_table_t *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"group",       "entries_per_rank", "row_bytes", "entries_per_token", "max_tokens",
                         "scale_packs", "recv_cuda",        "config",    "dl_code",           "dl_bits",
                         "hidden",      "device_id",        "stream_ordered",    "flat",
                         NULL};
    PyObject *group, *config = Py_None;
    uint64_t entries;
    uint32_t row_bytes, per_token, max_tokens, packs, dl_code, dl_bits, hidden;
    int recv_cuda, device_id, stream_ordered = 0, flat = 0;
    if (self->group != NULL)
        return eg_raise(eg_StateError, "Table: already initialised"), -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO&O&O&O&O&pOO&O&O&i|pp", kw, &group, eg_arg_u63, &entries,
                                     eg_arg_u32, &row_bytes, eg_arg_u32, &per_token, eg_arg_u32, &max_tokens,
                                     eg_arg_u32, &packs, &recv_cuda, &config, eg_arg_u32, &dl_code, eg_arg_u32,
                                     &dl_bits, eg_arg_u32, &hidden, &device_id, &stream_ordered, &flat))
        return -1;
    if (stream_ordered && !recv_cuda)
        return eg_raise(eg_InvalidArgumentError, "stream_ordered: a recv='host' buffer's rows are written by the "
                                                 "host transport, with no stream to order them; its hook waits"), -1;
    if (flat && per_token != 1)
        return eg_raise(eg_InvalidArgumentError, "flat: the table's entries_per_token must be 1, got %u",
                        per_token), -1;
    engram_group_t *g = eg_group_get(group);
    if (g == NULL)
        return -1;
    engram_config_t *cfg;
    engram_status_t st = engram_config_create(&cfg);
    if (st != ENGRAM_OK)
        return eg_raise_status(st, "Buffer: configuration"), -1;
    if (apply_config(cfg, config) < 0) {
        engram_config_destroy(cfg);
        return -1;
    }
    self->params = (engram_table_params_t){
        .size = sizeof(engram_table_params_t),
        .entries_per_rank = entries,
        .row_bytes = row_bytes,
        .entries_per_token = per_token,
        .max_tokens = max_tokens,
        .scale_packs = packs,
        .recv = recv_cuda ? ENGRAM_RECV_CUDA : ENGRAM_RECV_HOST,
    };
    int timeout_ms = config_timeout_ms(cfg);
    engram_context_t *ctx = NULL;
    engram_table_t *table = NULL;
    const char *what = "Buffer: engram_context_create";
    char msg[1024] = "";
    Py_BEGIN_ALLOW_THREADS
    st = engram_context_create(cfg, g, &ctx);
    if (st == ENGRAM_OK) {
        what = "Buffer: engram_table_create";
        st = engram_table_create(ctx, &self->params, &table);
        if (st != ENGRAM_OK) {
            /* keep the table's message: the context teardown may log its own */
            snprintf(msg, sizeof(msg), "%s", engram_last_error());
            (void)engram_context_destroy(ctx);
            ctx = NULL;
        }
    } else {
        snprintf(msg, sizeof(msg), "%s", engram_last_error());
    }
    Py_END_ALLOW_THREADS
    if (st != ENGRAM_OK) {
        eg_raise_status_msg(st, what, msg);
        engram_config_destroy(cfg);
        eg_group_chain_error(group);
        return -1;
    }
    engram_config_destroy(cfg);
    self->ctx = ctx;
    self->table = table;
    self->group = Py_NewRef(group);
    self->row_dtype = (DLDataType){.code = (uint8_t)dl_code, .bits = (uint8_t)dl_bits, .lanes = 1};
    self->hidden = hidden;
    self->device_id = device_id;
    self->timeout_ns = (int64_t)timeout_ms * 1000000;
    self->queues = engram_table_queues(table);
    self->nranks = engram_group_size(g);
    self->local_size = engram_group_local_size(g);
    /* rows of other nodes through the host transport reach the GPU only
     * once the host has seen their gets complete (engram.h,
     * engram_fetch_on_stream): there the hook waits */
    self->flat = flat;
    self->stream_ordered = stream_ordered && (self->local_size == self->nranks ||
                                              strcmp(engram_context_transport(ctx), "nccl_gin") == 0);
    return 0;
}

static int table_init(eg_table_t *self, PyObject *args, PyObject *kwargs)
{
    eg_log_hold();
    int r = init_impl(self, args, kwargs);
    eg_log_flush();
    return r;
}

static PyObject *table_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    eg_table_t *self = (eg_table_t *)type->tp_alloc(type, 0);
    if (self != NULL)
        pthread_mutex_init(&self->lock, NULL);
    return (PyObject *)self;
}

static int table_check_live(eg_table_t *self, const char *what)
{
    if (self->table == NULL) {
        eg_raise(eg_StateError, "%s: the buffer has been destroyed", what);
        return -1;
    }
    return 0;
}

/* dtype codes that carry the same bits: raw uint/int views of bf16/fp8/...
 * (torch 1.13 and numpy have no float8, numpy no bfloat16) */
static int dtype_compatible(DLDataType have, DLDataType want)
{
    if (have.bits != want.bits || have.lanes != 1)
        return 0;
    return have.code == want.code || have.code == kDLUInt || have.code == kDLInt;
}

/* eg_raise's NULL turned into the mark that this rank refused its arguments */
static PyObject *refused(PyObject *null)
{
    (void)null;
    return Py_None;
}

static PyObject *host_refusal(const char *param, const DLTensor *t)
{
    char name[48];
    return refused(eg_raise(eg_InvalidArgumentError, "%s must be in host (CPU) memory (call .cpu()), got %s memory",
                            param, eg_dl_device_name(t->device.device_type, name, sizeof(name))));
}

/* Collective: the shard's rows from fd at offset (engram_write_begin,
 * engram_write_rows_fd, engram_write_end); fd -1 fails the write on every
 * rank (this rank's refusal). */
static engram_status_t write_from_file(eg_table_t *self, int fd, uint64_t offset, const uint32_t *scales,
                                       char *why, size_t why_len)
{
    engram_status_t st = engram_write_begin(self->table);
    if (st != ENGRAM_OK)
        return st;
    engram_status_t rows_st = engram_write_rows_fd(self->table, fd, offset, 0, self->params.entries_per_rank);
    if (rows_st != ENGRAM_OK) /* this rank's own cause, which the closing agreement's message replaces */
        snprintf(why, why_len, "%s", engram_last_error());
    int mark = eg_log_mark(); /* this thread's held lines: no Python runs here */
    st = engram_write_end(self->table, scales);
    if (rows_st != ENGRAM_OK) /* the end's line only repeats the cause raised */
        eg_log_discard_since(mark);
    return rows_st != ENGRAM_OK ? rows_st : st;
}

static PyObject *write_impl(eg_table_t *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"storage", "sf", "refused", "fd", "offset", NULL};
    PyObject *storage, *sf = Py_None, *refusal = Py_None;
    int fd = -1;
    unsigned long long offset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOiK", kw, &storage, &sf, &refusal, &fd, &offset))
        return NULL;
    const int from_file = storage == Py_None; /* the shard's rows from fd at offset (-1: this rank refused) */
    if (table_check_live(self, "engram_write") < 0)
        return NULL;
    /* the write needs no fetch in flight: stream-ordered ones are waited
     * for (their errors stay deferred, for the next fetch, hook or synchronize) */
    eg_stream_drain(self);
    eg_dl_in_t rows = {0}, scales = {0};
    uint64_t entries = self->params.entries_per_rank;
    PyObject *fail = NULL; /* set (an exception raised) when this rank refuses its arguments */
    const DLTensor *t = NULL;
    if (refusal != Py_None) /* the Python layer's own refusal (a tensor it cannot pass on) */
        fail = refused(eg_raise(eg_InvalidArgumentError, "%S", refusal));
    else if (from_file)
        ; /* the library reads and checks the file */
    else if (eg_dl_import(storage, NULL, "engram_write: storage", &rows) < 0)
        fail = Py_None;
    else if (t = &rows.mt->dl_tensor, !eg_dl_is_host(t))
        fail = host_refusal("engram_write: storage", t);
    else if (t->ndim != 2)
        fail = refused(eg_raise(eg_InvalidArgumentError,
                        "engram_write: storage must have shape [num_entries=%llu, hidden=%u] (this rank's shard), "
                        "got %d dimensions",
                        (unsigned long long)entries, self->hidden, t->ndim));
    else if ((uint64_t)t->shape[0] != entries || (uint64_t)t->shape[1] != self->hidden)
        fail = refused(eg_raise(eg_InvalidArgumentError,
                        "engram_write: storage must have shape [num_entries=%llu, hidden=%u] (this rank's shard), "
                        "got [%lld, %lld]",
                        (unsigned long long)entries, self->hidden, (long long)t->shape[0], (long long)t->shape[1]));
    else if (!dtype_compatible(t->dtype, self->row_dtype))
        fail = refused(eg_raise(eg_InvalidArgumentError,
                        "engram_write: storage has %u-bit elements of DLPack type code %u; the buffer holds "
                        "%u-bit elements (code %u, or raw bits of that width)",
                        t->dtype.bits, t->dtype.code, self->row_dtype.bits, self->row_dtype.code));
    else if (rows.data == NULL && entries > 0)
        fail = refused(eg_raise(eg_InvalidArgumentError, "engram_write: storage has no data (a NULL data pointer)"));
    if (fail == NULL && self->params.scale_packs > 0) {
        if (sf == Py_None) {
            fail = refused(eg_raise(eg_InvalidArgumentError,
                            "engram_write: sf is required: the buffer has num_sf_packs=%u scale packs per entry",
                            self->params.scale_packs));
        } else if (eg_dl_import(sf, NULL, "engram_write: sf", &scales) < 0) {
            fail = Py_None; /* exception set */
        } else {
            const DLTensor *s = &scales.mt->dl_tensor;
            uint64_t total = entries * (uint64_t)self->nranks;
            if (!eg_dl_is_host(s))
                fail = host_refusal("engram_write: sf", s);
            else if (s->ndim != 2 || (uint64_t)s->shape[0] != total || (uint64_t)s->shape[1] != self->params.scale_packs)
                fail = refused(eg_raise(eg_InvalidArgumentError,
                                "engram_write: sf must have shape [num_ranks * num_entries=%llu, num_sf_packs=%u] "
                                "(the replicated global table)",
                                (unsigned long long)total, self->params.scale_packs));
            else if (s->dtype.bits != 32 || s->dtype.lanes != 1)
                fail = refused(eg_raise(eg_InvalidArgumentError,
                                "engram_write: sf elements must be 4-byte packs (int32, uint32 or float32), got %u bits",
                                s->dtype.bits));
            else if (scales.data == NULL)
                fail = refused(eg_raise(eg_InvalidArgumentError, "engram_write: sf has no data (a NULL data pointer)"));
        }
    } else if (fail == NULL && sf != Py_None) {
        fail = refused(eg_raise(eg_InvalidArgumentError, "engram_write: sf given but the buffer has num_sf_packs=0"));
    }
    engram_status_t st = ENGRAM_OK;
    char why[1024] = ""; /* from a file: the read's own failure */
    eg_table_lock(self);
    int live = self->table != NULL; /* another thread may have destroyed it meanwhile */
    if (!live) {
        if (fail != NULL)
            PyErr_Clear();
        fail = NULL;
        eg_raise(eg_StateError, "engram_write: the buffer has been destroyed");
    } else if (fail == NULL) {
        Py_BEGIN_ALLOW_THREADS
        st = from_file ? write_from_file(self, fd, offset, scales.data, why, sizeof(why))
                       : engram_write(self->table, rows.data, self->params.row_bytes, scales.data);
        Py_END_ALLOW_THREADS
        if (st != ENGRAM_OK && why[0] != '\0')
            eg_raise_status_msg(st, "engram_write", why);
        else if (st != ENGRAM_OK)
            eg_raise_status(st, "engram_write");
    } else if (from_file) {
        /* refused here: the write begins and ends on every rank, failed */
        PyObject *exc = eg_err_take();
        int mark = eg_log_mark();
        Py_BEGIN_ALLOW_THREADS
        (void)write_from_file(self, -1, 0, NULL, why, sizeof(why));
        Py_END_ALLOW_THREADS
        eg_log_discard_since(mark);
        eg_err_restore(exc);
    } else {
        /* refused here: still join the collective's agreement (with rows the
         * library refuses), so the other ranks fail now instead of waiting;
         * what the library says of those rows is not this rank's error */
        PyObject *exc = eg_err_take();
        int mark = eg_log_mark();
        Py_BEGIN_ALLOW_THREADS
        (void)engram_write(self->table, NULL, 0, NULL);
        Py_END_ALLOW_THREADS
        eg_log_discard_since(mark);
        eg_err_restore(exc);
    }
    eg_table_unlock(self);
    eg_dl_release(&rows);
    eg_dl_release(&scales);
    if (!live)
        return NULL;
    if (fail != NULL || st != ENGRAM_OK) {
        eg_group_chain_error(self->group);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *table_write(eg_table_t *self, PyObject *args, PyObject *kwargs)
{
    eg_log_hold();
    PyObject *r = write_impl(self, args, kwargs);
    eg_log_flush();
    return r;
}

static PyObject *table_fetch(eg_table_t *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"indices", "num_qps", "col_major", "stream", NULL};
    PyObject *indices, *stream = Py_None;
    int num_qps = 0, col_major = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|ipO", kw, &indices, &num_qps, &col_major, &stream))
        return NULL;
    if (table_check_live(self, "engram_fetch") < 0)
        return NULL;
    eg_log_hold();
    PyObject *r = eg_fetch_issue(self, indices, num_qps, col_major, stream);
    eg_log_flush();
    return r;
}

static PyObject *table_fetch_ptr(eg_table_t *self, PyObject *args)
{
    if (table_check_live(self, "engram_fetch") < 0)
        return NULL;
    eg_log_hold();
    PyObject *r = eg_fetch_issue_ptr(self, args);
    eg_log_flush();
    return r;
}

static PyObject *destroy_impl(eg_table_t *self)
{
    if (self->table == NULL)
        Py_RETURN_NONE; /* destroying twice is harmless */
    eg_stream_drain(self); /* the stream-ordered fetches handed over are released */
    eg_table_lock(self);
    if (self->table == NULL) { /* another thread destroyed it while this one waited for the lock */
        eg_table_unlock(self);
        Py_RETURN_NONE;
    }
    engram_status_t st, cst = ENGRAM_OK;
    /* The table's teardown and the context's share one timeout_ms: the
     * context's gets what the table's left of it. */
    engram_group_t *g = eg_group_get(self->group);
    if (g == NULL)
        PyErr_Clear(); /* its launcher's rank function returned: the context holds it still */
    int timeout_ms = g != NULL ? engram_group_timeout(g) : 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    Py_BEGIN_ALLOW_THREADS
    st = engram_table_destroy(self->table);
    Py_END_ALLOW_THREADS
    if (st == ENGRAM_ERR_BUSY) {
        eg_raise_status(st, "destroy (fetches, or tensors viewing their rows, are still alive on some rank: "
                            "drop them and retry)");
        eg_table_unlock(self);
        return NULL;
    }
    eg_orphan_remap(self); /* the memory detached views span, freed just now */
    PyObject *exc = NULL;
    if (st != ENGRAM_OK) { /* a dead peer: torn down here all the same */
        eg_raise_status(st, "destroy");
        exc = eg_err_take();
    }
    self->table = NULL;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long spent_ms = (long long)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (g != NULL)
        engram_group_set_timeout(g, spent_ms < timeout_ms ? (int)(timeout_ms - spent_ms) : 1);
    Py_BEGIN_ALLOW_THREADS
    cst = engram_context_destroy(self->ctx);
    Py_END_ALLOW_THREADS
    if (g != NULL)
        engram_group_set_timeout(g, timeout_ms);
    if (cst != ENGRAM_OK && exc == NULL) {
        eg_raise_status(cst, "destroy");
        exc = eg_err_take();
    }
    self->ctx = NULL;
    eg_table_unlock(self);
    if (exc != NULL) {
        eg_err_restore(exc);
        eg_group_chain_error(self->group);
        return NULL;
    }
    /* torn down on every rank: a stream-ordered fetch's error is this rank's to raise now */
    if (eg_stream_raise_deferred(self, "destroy") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *table_synchronize(eg_table_t *self, PyObject *noargs)
{
    (void)noargs;
    eg_log_hold();
    eg_stream_drain(self);
    int r = eg_stream_raise_deferred(self, "synchronize");
    eg_log_flush();
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *table_destroy(eg_table_t *self, PyObject *noargs)
{
    (void)noargs;
    eg_log_hold();
    PyObject *r = destroy_impl(self);
    eg_log_flush();
    return r;
}

static int table_traverse(eg_table_t *self, visitproc visit, void *arg)
{
    Py_VISIT(self->group);
    const eg_torch_t *tc = &self->torch;
    Py_VISIT(tc->tensor);
    Py_VISIT(tc->int64);
    Py_VISIT(tc->strided);
    Py_VISIT(tc->device);
    Py_VISIT(tc->stream);
    Py_VISIT(tc->capturing);
    Py_VISIT(tc->conv);
    Py_VISIT(tc->on_device);
    return 0;
}

static int table_clear(eg_table_t *self)
{
    eg_torch_clear(&self->torch);
    /* a table never destroyed keeps its group: the leaked context borrows it */
    if (self->table == NULL)
        Py_CLEAR(self->group);
    return 0;
}

static void table_dealloc(eg_table_t *self)
{
    PyObject_GC_UnTrack(self);
    /* freed while an exception propagates (a frame unwinding): the warning
     * machinery must neither see nor replace it */
    PyObject *pending = eg_err_take();
    if (self->table != NULL) {
        /* destroy is collective: running it from the garbage collector at a
         * moment the other ranks do not share would hang them. Leak instead,
         * with the group the context borrows. */
        if (PyErr_WarnEx(PyExc_ResourceWarning,
                         "engram.Buffer was not destroyed (call destroy() or use it as a context manager); "
                         "its memory stays allocated until the process exits",
                         1) < 0)
            /* (a warning filter made it an error) not the table itself: the
             * hook would take a reference to an object being freed, and
             * freeing it again would warn again, for ever */
            PyErr_WriteUnraisable((PyObject *)Py_TYPE(self));
        self->group = NULL;
    }
    Py_XDECREF(self->group);
    eg_torch_clear(&self->torch);
    eg_stream_free(self);
    eg_orphan_free(self);
    pthread_mutex_destroy(&self->lock);
    if (pending != NULL)
        eg_err_restore(pending);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _config_values(config, keys): what the library will read for each key
 * (config over ENGRAM_<KEY> over the file over the default), as text. */
PyObject *eg_config_values(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *config, *keys;
    if (!PyArg_ParseTuple(args, "OO", &config, &keys))
        return NULL;
    PyObject *seq = PySequence_Fast(keys, "_config_values: keys must be a sequence of str");
    if (seq == NULL)
        return NULL;
    eg_log_hold();
    engram_config_t *cfg = NULL;
    PyObject *out = NULL;
    engram_status_t st = engram_config_create(&cfg);
    if (st != ENGRAM_OK) {
        eg_raise_status(st, "Buffer: configuration");
        goto done;
    }
    if (apply_config(cfg, config) < 0)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        const char *key = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
        char buf[1100] = ""; /* a STRING key holds up to 1024 bytes */
        if (key == NULL || (st = engram_config_get(cfg, key, buf, sizeof(buf))) != ENGRAM_OK) {
            if (key != NULL)
                eg_raise_status(st, "Buffer: configuration");
            Py_CLEAR(out);
            break;
        }
        PyObject *v = PyUnicode_FromString(buf);
        if (v == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, i, v);
    }
done:
    engram_config_destroy(cfg);
    Py_DECREF(seq);
    eg_log_flush();
    return out;
}

static PyObject *table_get_destroyed(eg_table_t *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->table == NULL);
}
static PyObject *table_get_c_table(eg_table_t *self, void *c)
{
    (void)c;
    if (self->table == NULL)
        return eg_raise(eg_StateError, "_c_table: the buffer has been destroyed");
    return PyLong_FromVoidPtr(self->table);
}
static PyObject *table_get_transport(eg_table_t *self, void *c)
{
    (void)c;
    if (table_check_live(self, "transport") < 0)
        return NULL;
    return PyUnicode_FromString(engram_context_transport(self->ctx));
}
static PyObject *table_get_queues(eg_table_t *self, void *c)
{
    (void)c;
    return PyLong_FromLong(self->queues);
}
static PyObject *table_get_timeout_ms(eg_table_t *self, void *c)
{
    (void)c;
    return PyLong_FromLongLong(self->timeout_ns / 1000000);
}

static PyObject *table_get_stream_ordered(eg_table_t *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->stream_ordered);
}
static PyObject *table_get_pending(eg_table_t *self, void *c)
{
    (void)c;
    return PyLong_FromLong(self->num_pending);
}

static PyMethodDef table_methods[] = {
    {"detach_fetches", eg_table_detach_fetches, METH_NOARGS,
     "detach_fetches()\n--\n\nDetaches every fetch not released yet (Fetch.detach): their slots go though tensors "
     "still view them."},
    {"write", (PyCFunction)(void (*)(void))table_write, METH_VARARGS | METH_KEYWORDS,
     "write(storage, sf=None, refused=None, fd=-1, offset=0)\n--\n\nCollective: this rank's shard [entries, hidden] "
     "(+ the global scales), or with storage None its rows read from fd at offset. refused: this rank's own "
     "refusal (a message), raised after joining the write's agreement."},
    {"fetch", (PyCFunction)(void (*)(void))table_fetch, METH_VARARGS | METH_KEYWORDS,
     "fetch(indices, num_qps=0, col_major=False, stream=None)\n--\n\nIssues a fetch; returns a Fetch."},
    {"_fetch_ptr", (PyCFunction)table_fetch_ptr, METH_VARARGS,
     "_fetch_ptr(data_ptr, rows, cols, bits, device_type, num_qps, col_major, stream, keep)\n--\n\n"
     "fetch() for a contiguous 2-D integer tensor given by its attributes (the torch fast path). Private: it "
     "reads whatever address it is given (engram.Buffer passes a dense CPU or CUDA tensor's only)."},
    {"_fetch_fast", eg_fetch_fast, METH_O,
     "_fetch_fast(indices)\n--\n\nThe Hook of a recv='cuda' fetch of contiguous int64 torch indices on the "
     "buffer's device, on that device's current stream (not capturing, where _set_torch was given a capture "
     "question); None for any other call (engram.Buffer then takes its general path). Needs _set_torch first."},
    {"_set_torch", eg_table_set_torch, METH_VARARGS,
     "_set_torch(tensor_type, int64, strided, device, stream, capturing, conv, on_device)\n--\n\ntorch's "
     "entry points _fetch_fast and the hooks ask (engram/_torch_cuda.py); capturing None where the buffer "
     "may be captured (the library then says whether a fetch was)."},
    {"destroy", (PyCFunction)table_destroy, METH_NOARGS,
     "destroy()\n--\n\nCollective teardown (waits for the stream-ordered fetches first, and raises the error of "
     "one after tearing down)."},
    {"synchronize", (PyCFunction)table_synchronize, METH_NOARGS,
     "synchronize()\n--\n\nWaits (GIL released, bounded by timeout_ms) until the library has seen every "
     "stream-ordered fetch complete, then raises the first error of one not raised yet (BadIndexError, "
     "TimeoutError, ...). A no-op on a table whose hook waits."},
    {"stats", eg_table_stats, METH_NOARGS, "stats()\n--\n\nThis rank's counters (engram_table_stats) as a dict."},
    {"cache_rows", eg_table_cache_rows, METH_VARARGS,
     "cache_rows(rows)\n--\n\nThe hot-row cache of these rows (contiguous int64 buffer); empty drops it."},
    {"cache_profile", eg_table_cache_profile, METH_VARARGS,
     "cache_profile(indices, max_rows)\n--\n\nThe hot-row cache of a profile's max_rows most frequent rows."},
    {NULL},
};

static PyGetSetDef table_getset[] = {
    {"destroyed", (getter)table_get_destroyed, NULL, "Whether destroy() has run.", NULL},
    {"_c_table", (getter)table_get_c_table, NULL,
     "The engram_table_t * behind the buffer, as an int, for C code in this process that calls the C API on it "
     "(valid until destroy; no call of it may overlap one of the buffer's).", NULL},
    {"transport", (getter)table_get_transport, NULL, "Name of the transport the buffer runs on.", NULL},
    {"queues", (getter)table_get_queues, NULL, "Queues (QPs) the buffer's fetches are spread over.", NULL},
    {"timeout_ms", (getter)table_get_timeout_ms, NULL, "The bound on a fetch wait.", NULL},
    {"stream_ordered", (getter)table_get_stream_ordered, NULL,
     "Whether the hook hands out rows in stream order, without waiting.", NULL},
    {"pending", (getter)table_get_pending, NULL, "Stream-ordered fetches the library has not yet seen complete.",
     NULL},
    {NULL},
};

PyTypeObject eg_TableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "engram._engram.Table",
    .tp_basicsize = sizeof(eg_table_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A context and one table (the C object behind engram.Buffer).",
    .tp_traverse = (traverseproc)table_traverse,
    .tp_clear = (inquiry)table_clear,
    .tp_free = PyObject_GC_Del,
    .tp_new = table_new,
    .tp_init = (initproc)table_init,
    .tp_dealloc = (destructor)table_dealloc,
    .tp_methods = table_methods,
    .tp_getset = table_getset,
};
