/* _engram.Fetch: one fetch in flight, then its rows. Waits run without the
 * GIL in slices, checking for signals between them (Ctrl-C interrupts a
 * wait); the receive slot is released when the Fetch and every view of its
 * rows are gone, or by release() once no view is left. On a stream-ordered
 * table the wait hands out the rows without waiting (stream_order.c). */
#include <sched.h>
#include <stdarg.h>
#include <string.h>

#include <stddef.h>

#include "ext.h"

#define WAIT_SLICE_NS (20 * 1000 * 1000) /* how long a wait runs between signal checks */
/* A wait polls engram_test this many times (a power of two) between a
 * sched_yield and a clock read: a poll (the table lock and a test) costs
 * about what a clock read does, and a yield is a system call, so doing
 * either every poll would slow the poll loop several-fold; 256 polls still
 * let an owner-progress peer sharing this core in within tens of
 * microseconds. */
#define WAIT_POLLS_PER_YIELD 256u

/* The indices of one fetch, from DLPack or from the torch fast path. */
typedef struct {
    const void *data;
    int ndim;
    int64_t rows, cols;
    int code, bits;
    int device_type;
    int contiguous;
} indices_t;

static int refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg != NULL) {
        eg_raise(eg_InvalidArgumentError, "%U", msg);
        Py_DECREF(msg);
    }
    return -1;
}

static int check_indices(const eg_table_t *t, const indices_t *x, int col_major)
{
    int cuda = t->params.recv == ENGRAM_RECV_CUDA;
    if (t->flat && x->ndim != 2)
        return refuse("engram_fetch: indices must have shape [num_tokens, num_entries_per_token], got %d dimensions",
                      x->ndim);
    if (x->ndim != 2)
        return refuse("engram_fetch: indices must have shape [num_tokens, num_entries_per_token=%u], got %d "
                      "dimensions",
                      t->params.entries_per_token, x->ndim);
    if (!t->flat && x->cols != (int64_t)t->params.entries_per_token)
        return refuse("engram_fetch: indices must have shape [num_tokens, num_entries_per_token=%u], got a last "
                      "dimension of %lld",
                      t->params.entries_per_token, (long long)x->cols);
    if (t->flat && (x->rows > UINT32_MAX || x->cols > UINT32_MAX ||
                    (uint64_t)x->rows * (uint64_t)x->cols > t->params.max_tokens))
        return refuse("engram_fetch: %lld x %lld entries exceed the receive buffer's %u entries", (long long)x->rows,
                      (long long)x->cols, t->params.max_tokens);
    if (t->flat && col_major)
        return refuse("engram_fetch: this table hands out row-major scales only");
    if (!t->flat && x->rows > (int64_t)t->params.max_tokens)
        return refuse("engram_fetch: %lld tokens exceed the buffer's num_max_tokens=%u", (long long)x->rows,
                      t->params.max_tokens);
    if (x->code != kDLInt || (x->bits != 64 && x->bits != 32))
        return refuse("engram_fetch: indices must be int32 or int64, got DLPack type code %d with %d bits", x->code,
                      x->bits);
    if (!x->contiguous)
        return refuse("engram_fetch: indices must be contiguous (row-major); call .contiguous() first");
    /* int32 indices are widened here, int64 ones read by the library: both
     * as whole elements (the library refuses misaligned int64 too) */
    if ((uintptr_t)x->data % (unsigned)(x->bits / 8) != 0)
        return refuse("engram_fetch: indices must be aligned to their %d-byte elements (data at %p); copy them",
                      x->bits / 8, x->data);
    char name[48];
    const char *device = eg_dl_device_name(x->device_type, name, sizeof(name));
    if (cuda && x->device_type != kDLCUDA && x->device_type != kDLCUDAManaged)
        return refuse("engram_fetch: a recv='cuda' buffer takes indices in CUDA GPU memory, got %s memory", device);
    if (cuda && x->bits != 64)
        return refuse("engram_fetch: GPU indices must be int64 (got int32; engram.Buffer converts torch tensors)");
    if (!cuda && x->device_type != kDLCPU && x->device_type != kDLCUDAHost)
        return refuse("engram_fetch: a recv='host' buffer takes indices in host (CPU) memory, got %s memory", device);
    if (x->data == NULL && x->rows > 0 && x->cols > 0)
        return refuse("engram_fetch: indices have no data (a NULL data pointer with %lld x %lld elements)",
                      (long long)x->rows, (long long)x->cols);
    return 0;
}

/* Validates and issues; the new Fetch, or NULL with an exception set. */
static eg_fetch_t *issue(eg_table_t *t, const indices_t *x, int num_qps, int col_major, PyObject *stream)
{
    int cuda = t->params.recv == ENGRAM_RECV_CUDA;
    if (num_qps < 0)
        return (eg_fetch_t *)eg_raise(eg_InvalidArgumentError, "engram_fetch: num_qps must be >= 0 (0 = all), got %d",
                                      num_qps);
    void *cuda_stream = NULL;
    if (cuda && stream != Py_None) {
        cuda_stream = PyLong_AsVoidPtr(stream);
        if (cuda_stream == NULL && PyErr_Occurred())
            return NULL;
    }
    if (check_indices(t, x, col_major) < 0)
        return NULL;
    /* checked: within max_tokens (a flat table's rows * cols too) */
    uint32_t num_tokens = t->flat ? (uint32_t)(x->rows * x->cols) : (uint32_t)x->rows;
    const int64_t *idx = x->data;
    int64_t *wide = NULL;
    if (x->bits == 32) {
        size_t n = (size_t)num_tokens * t->params.entries_per_token; /* <= max_tokens * per_token, checked above */
        wide = PyMem_Malloc(n ? n * sizeof(int64_t) : 1);
        if (wide == NULL)
            return (eg_fetch_t *)PyErr_NoMemory();
        const int32_t *narrow = x->data;
        for (size_t i = 0; i < n; i++)
            wide[i] = narrow[i];
        idx = wide;
    }
    eg_fetch_t *self = PyObject_New(eg_fetch_t, &eg_FetchType);
    if (self == NULL) {
        PyMem_Free(wide);
        return NULL;
    }
    self->table = (eg_table_t *)Py_NewRef((PyObject *)t);
    self->live_prev = NULL;
    self->live_next = t->live;
    if (t->live != NULL)
        t->live->live_prev = self;
    t->live = self;
    self->f = NULL;
    self->num_tokens = num_tokens;
    self->view_tokens = (uint32_t)x->rows;
    self->view_entries = t->flat ? (uint32_t)x->cols : t->params.entries_per_token;
    /* the hook hands out rows only after engram_wait or engram_fetch_buffers */
    self->flags = (col_major ? ENGRAM_FETCH_SCALES_COL_MAJOR : 0u) | (cuda ? ENGRAM_FETCH_ORDER_AT_WAIT : 0u);
    self->waited = 0;
    self->waiting = 0;
    self->captured = 0;
    self->views = 0;
    self->failed = ENGRAM_OK;
    self->fail_message = NULL;
    self->has_indices = 0;
    self->keep = NULL;
    memset(&self->indices, 0, sizeof(self->indices));
    self->tracked = 0;
    int queues = num_qps > 0 && num_qps < t->queues ? num_qps : t->queues;
    /* a flat table's fetch spreads its rows over the queues as the tokens
     * they belong to would be: a token's rows on one queue (each queue a
     * fetch uses costs a flush) */
    if (t->flat && (uint32_t)queues > self->view_tokens)
        queues = self->view_tokens > 0 ? (int)self->view_tokens : 1;
    engram_status_t st;
    for (;;) {
        /* stream-ordered: an earlier fetch's error first (this one is then not issued) */
        if (t->stream_ordered) {
            eg_stream_reap(t);
            if (eg_stream_raise_deferred(t, "engram_fetch") < 0) {
                PyMem_Free(wide);
                Py_DECREF(self);
                return NULL;
            }
        }
        eg_table_lock(t);
        if (t->table == NULL) { /* destroyed by another thread since the caller looked */
            eg_table_unlock(t);
            PyMem_Free(wide);
            Py_DECREF(self);
            return (eg_fetch_t *)eg_raise(eg_StateError, "engram_fetch: the buffer has been destroyed");
        }
        int mark = eg_log_mark();
        Py_BEGIN_ALLOW_THREADS
        if (cuda)
            st = engram_fetch_on_stream(t->table, idx, num_tokens, self->flags, cuda_stream, &self->f);
        else
            st = engram_fetch_on_queues(t->table, 0, queues, idx, num_tokens, self->flags, &self->f);
        Py_END_ALLOW_THREADS
        if (st != ENGRAM_OK)
            eg_raise_status(st, "engram_fetch");
        else if (cuda) /* the library saw whether the stream captures: the hook then hands out the graph's rows */
            (void)engram_fetch_captured(self->f, &self->captured);
        eg_table_unlock(t);
        /* every slot taken, some by fetches whose views are gone: the one
         * wait of the stream-ordered hook, for the GPU to finish one */
        if (st == ENGRAM_ERR_BUSY && t->stream_ordered) {
            PyObject *busy = eg_err_take();
            int drained = eg_stream_drain_handed_over(t);
            if (drained) {
                Py_XDECREF(busy);
                eg_log_discard_since(mark);
                continue;
            }
            eg_err_restore(busy);
        }
        break;
    }
    PyMem_Free(wide);
    if (st != ENGRAM_OK) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

PyObject *eg_fetch_issue(eg_table_t *t, PyObject *indices, int num_qps, int col_major, PyObject *stream)
{
    int cuda = t->params.recv == ENGRAM_RECV_CUDA;
    eg_dl_in_t in = {0};
    if (eg_dl_import(indices, cuda ? stream : NULL, "engram_fetch: indices", &in) < 0)
        return NULL;
    const DLTensor *d = &in.mt->dl_tensor;
    indices_t x = {
        .data = in.data,
        .ndim = d->ndim,
        .rows = d->ndim >= 1 ? d->shape[0] : 0,
        .cols = d->ndim >= 2 ? d->shape[1] : 0,
        .code = d->dtype.code,
        .bits = d->dtype.lanes == 1 ? d->dtype.bits : 0,
        .device_type = d->device.device_type,
        .contiguous = 1, /* eg_dl_import refuses others */
    };
    eg_fetch_t *f = issue(t, &x, num_qps, col_major, stream);
    if (f != NULL && cuda) { /* the kernel reads them on the stream: keep them until release */
        f->indices = in;
        f->has_indices = 1;
    } else {
        eg_dl_release(&in);
    }
    return (PyObject *)f;
}

PyObject *eg_fetch_issue_addr(eg_table_t *t, const void *data, long long rows, long long cols, int bits,
                              int device_type, int num_qps, int col_major, PyObject *stream, PyObject *keep)
{
    if (rows < 0 || cols < 0)
        return eg_raise(eg_InvalidArgumentError, "engram_fetch: negative dimensions");
    indices_t x = {
        .data = data,
        .ndim = 2,
        .rows = rows,
        .cols = cols,
        .code = kDLInt,
        .bits = bits,
        .device_type = device_type,
        .contiguous = 1,
    };
    eg_fetch_t *f = issue(t, &x, num_qps, col_major, stream);
    if (f != NULL && t->params.recv == ENGRAM_RECV_CUDA)
        f->keep = Py_NewRef(keep); /* the kernel reads the indices on the stream */
    return (PyObject *)f;
}

PyObject *eg_fetch_issue_ptr(eg_table_t *t, PyObject *args)
{
    unsigned long long ptr;
    long long rows, cols;
    int bits, device_type, num_qps, col_major;
    PyObject *stream, *keep;
    if (!PyArg_ParseTuple(args, "KLLiiipOO", &ptr, &rows, &cols, &bits, &device_type, &num_qps, &col_major, &stream,
                          &keep))
        return NULL;
    return eg_fetch_issue_addr(t, (const void *)(uintptr_t)ptr, rows, cols, bits, device_type, num_qps, col_major,
                               stream, keep);
}

/* engram_test until done, without the GIL, checking signals every slice.
 * Returns the final test status, or ENGRAM_INPROGRESS with an exception set
 * (interrupt, or the timeout). */
static engram_status_t sliced_wait(eg_fetch_t *self)
{
    eg_table_t *t = self->table;
    if (pthread_mutex_trylock(&t->lock) == 0) { /* often done already: no GIL round trip then */
        engram_status_t st = engram_test(self->f);
        pthread_mutex_unlock(&t->lock);
        if (st != ENGRAM_INPROGRESS)
            return st;
    }
    int64_t deadline = eg_now_ns() + t->timeout_ns;
    for (;;) {
        engram_status_t st;
        int64_t now;
        Py_BEGIN_ALLOW_THREADS
        int64_t slice_end = eg_now_ns() + WAIT_SLICE_NS;
        for (unsigned i = 1;; i++) {
            pthread_mutex_lock(&t->lock);
            st = engram_test(self->f);
            pthread_mutex_unlock(&t->lock);
            if (st != ENGRAM_INPROGRESS)
                break;
            if (i % WAIT_POLLS_PER_YIELD == 0) {
                sched_yield(); /* let an owner-progress peer on this core serve us */
                if (eg_now_ns() > slice_end)
                    break;
            }
        }
        now = eg_now_ns();
        Py_END_ALLOW_THREADS
        if (st != ENGRAM_INPROGRESS)
            return st;
        if (PyErr_CheckSignals() < 0)
            return ENGRAM_INPROGRESS;
        if (now > deadline) {
            eg_raise(eg_TimeoutError, "engram_fetch hook: the rows were not complete after timeout_ms=%lld ms",
                     (long long)(t->timeout_ns / 1000000));
            return ENGRAM_INPROGRESS;
        }
    }
}

/* The column stride of column-major scales: tokens rounded up to 4 (TMA). */
static int64_t col_major_stride(int64_t tokens)
{
    return (tokens + 3) / 4 * 4;
}

/* Scale packs per token of the views. */
static int64_t view_scales(const eg_fetch_t *self)
{
    return (int64_t)self->view_entries * self->table->params.scale_packs;
}

/* (rows, sf) as Arrays, or (as_capsules) as DLPack capsules */
static PyObject *make_views(eg_fetch_t *self, const void *rows, const uint32_t *sf, int as_capsules)
{
    PyObject *(*make)(eg_fetch_t *, void *, int64_t, int64_t, int64_t, int64_t, DLDataType, DLDevice) =
        as_capsules ? eg_export_capsule : eg_array_new;
    eg_table_t *t = self->table;
    DLDevice dev = {.device_type = t->params.recv == ENGRAM_RECV_CUDA ? kDLCUDA : kDLCPU,
                    .device_id = t->params.recv == ENGRAM_RECV_CUDA ? t->device_id : 0};
    int64_t T = self->view_tokens, cols = (int64_t)self->view_entries * t->hidden;
    PyObject *r = make(self, (void *)rows, T, cols, cols, 1, t->row_dtype, dev);
    if (r == NULL)
        return NULL;
    PyObject *s = Py_None;
    if (t->params.scale_packs > 0) {
        int64_t sc = view_scales(self);
        DLDataType i32 = {.code = kDLInt, .bits = 32, .lanes = 1};
        if (self->flags & ENGRAM_FETCH_SCALES_COL_MAJOR)
            s = make(self, (void *)sf, T, sc, 1, col_major_stride(T), i32, dev);
        else
            s = make(self, (void *)sf, T, sc, sc, 1, i32, dev);
        if (s == NULL) {
            Py_DECREF(r);
            return NULL;
        }
    } else {
        Py_INCREF(s);
    }
    PyObject *pair = PyTuple_Pack(2, r, s);
    Py_DECREF(r);
    Py_DECREF(s);
    return pair;
}

static PyObject *raise_bad_index(eg_fetch_t *self, const char *message, PyObject *views)
{
    uint64_t count;
    uint32_t token, entry;
    engram_fetch_bad_indices(self->f, &count, &token, &entry);
    char flat_message[256];
    if (self->table->flat) { /* the library's token is a row here */
        entry = self->view_entries ? token % self->view_entries : 0;
        token = self->view_entries ? token / self->view_entries : 0;
        snprintf(flat_message, sizeof(flat_message),
                 "%llu indices out of range, first at token %u entry %u; those rows are zero-filled",
                 (unsigned long long)count, token, entry);
        eg_log_drop_raised(message); /* the library's line, with its row numbers, is raised in these words */
        message = flat_message;
    }
    eg_raise_status_msg(ENGRAM_ERR_BAD_INDEX, "engram_fetch hook", message);
    PyObject *exc = eg_err_take();
    if (exc == NULL)
        return NULL;
    PyObject *c = PyLong_FromUnsignedLongLong(count), *ft = PyLong_FromUnsignedLong(token),
             *fe = PyLong_FromUnsignedLong(entry);
    if (c && ft && fe) {
        PyObject_SetAttrString(exc, "count", c);
        PyObject_SetAttrString(exc, "first_token", ft);
        PyObject_SetAttrString(exc, "first_entry", fe);
        PyObject_SetAttrString(exc, "rows", PyTuple_GET_ITEM(views, 0));
        PyObject_SetAttrString(exc, "sf", PyTuple_GET_ITEM(views, 1));
    }
    Py_XDECREF(c);
    Py_XDECREF(ft);
    Py_XDECREF(fe);
    eg_err_restore(exc);
    return NULL;
}

PyObject *eg_fetch_bad_indices(eg_fetch_t *self)
{
    if (self->f == NULL)
        return eg_raise(eg_StateError, "bad_indices: the fetch has been released");
    uint64_t count = 0;
    uint32_t token = 0, entry = 0;
    engram_status_t st = engram_fetch_bad_indices(self->f, &count, &token, &entry);
    if (st != ENGRAM_OK)
        return eg_raise_status(st, "bad_indices");
    if (self->table->flat && count > 0) { /* the library's token is a row here */
        entry = self->view_entries ? token % self->view_entries : 0;
        token = self->view_entries ? token / self->view_entries : 0;
    }
    return Py_BuildValue("(KII)", (unsigned long long)count, (unsigned int)token, (unsigned int)entry);
}

/* The hook's one rule: a call that hands out no rows (interrupted, timed
 * out here, or the fetch failed in the library) leaves the hook callable
 * again, which waits again or, for a fetch the library ended, raises the
 * same error again; once rows were handed out (also inside a
 * BadIndexError) the hook is spent. */
PyObject *eg_fetch_wait_views(eg_fetch_t *self, int as_capsules)
{
    if (self->f == NULL)
        return eg_raise(eg_StateError, "engram_fetch hook: the fetch has been released");
    if (self->waited)
        return eg_raise(eg_StateError, "engram_fetch hook: already called (a hook returns its rows once; "
                                       "keep the tensors it returned)");
    if (self->waiting)
        return eg_raise(eg_BusyError, "engram_fetch hook: another thread is waiting on this fetch");
    engram_status_t st = ENGRAM_OK;
    eg_table_t *t = self->table;
    int in_order = 0; /* stream-ordered and not complete yet: the pointers, and the table tracks it */
    const void *rows = NULL;
    const uint32_t *sf = NULL;
    engram_status_t handed = ENGRAM_ERR_STATE; /* engram_fetch_buffers' status once called */
    if (t->stream_ordered && !self->captured) {
        eg_stream_reap(t);
        if (eg_stream_raise_deferred(t, "engram_fetch hook") < 0)
            return NULL; /* an earlier fetch's error: this hook may be called again */
    }
    self->waiting = 1;
    if (t->stream_ordered && !self->captured) {
        eg_table_lock(t);
        st = engram_test(self->f); /* never waits; queues what the stream still needs (a launcher's wait) */
        in_order = st == ENGRAM_INPROGRESS;
        if (in_order)
            handed = engram_fetch_buffers(self->f, &rows, &sf);
        eg_table_unlock(t);
    } else if (!self->captured) {
        st = sliced_wait(self);
        if (st == ENGRAM_INPROGRESS) {
            self->waiting = 0; /* interrupted or timed out here: the hook may be called again */
            return NULL;
        }
    }
    char message[1024];
    message[0] = '\0';
    if (in_order) {
        st = handed;
        if (st != ENGRAM_OK)
            snprintf(message, sizeof(message), "%s", engram_last_error());
    } else if (st == ENGRAM_OK || st == ENGRAM_ERR_BAD_INDEX) {
        eg_table_lock(t);
        /* under capture nothing waits on the host: the pointers only */
        st = self->captured ? engram_fetch_buffers(self->f, &rows, &sf) : engram_wait(self->f, &rows, &sf);
        if (st != ENGRAM_OK)
            snprintf(message, sizeof(message), "%s", engram_last_error());
        eg_table_unlock(t);
    } else {
        snprintf(message, sizeof(message), "%s", engram_last_error());
    }
    self->waiting = 0;
    if (in_order && st == ENGRAM_OK) {
        PyObject *views = make_views(self, rows, sf, as_capsules);
        if (views == NULL)
            return NULL;
        if (eg_stream_track(self) < 0) {
            Py_DECREF(views);
            return NULL;
        }
        self->waited = 1;
        return views;
    }
    if (st != ENGRAM_OK && st != ENGRAM_ERR_BAD_INDEX) {
        if (self->captured)
            return eg_raise(eg_StateError,
                            "engram_fetch hook under CUDA graph capture: the library could not hand out the "
                            "rows without waiting on the host (%s)", message);
        /* The library's status is the fetch's own from here on, but its
         * message is logged (and kept as engram_last_error) only when it
         * first fails: keep it for the calls that raise it again. */
        if (self->failed == st && self->fail_message != NULL)
            return eg_raise_status_msg(st, "engram_fetch hook", PyUnicode_AsUTF8(self->fail_message));
        PyObject *m = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "backslashreplace");
        if (m == NULL)
            return NULL;
        Py_XSETREF(self->fail_message, m);
        self->failed = st;
        return eg_raise_status_msg(st, "engram_fetch hook", message);
    }
    /* the exception carries Arrays: its rows go through the caller's converters */
    PyObject *views = make_views(self, rows, sf, as_capsules && st == ENGRAM_OK);
    if (views == NULL)
        return NULL;
    self->waited = 1; /* rows handed out */
    if (st == ENGRAM_ERR_BAD_INDEX) {
        raise_bad_index(self, message, views);
        Py_DECREF(views);
        return NULL;
    }
    return views;
}

static PyObject *fetch_wait(eg_fetch_t *self, PyObject *noargs)
{
    (void)noargs;
    eg_log_hold();
    PyObject *r = eg_fetch_wait_views(self, 0);
    eg_log_flush();
    return r;
}

static PyObject *fetch_wait_capsules(eg_fetch_t *self, PyObject *noargs)
{
    (void)noargs;
    eg_log_hold();
    PyObject *r = eg_fetch_wait_views(self, 1);
    eg_log_flush();
    return r;
}

/* Ends the fetch (if not yet) and drops what it keeps; the library's
 * status: ENGRAM_ERR_TIMEOUT when its gets had not completed (the slot is
 * retired until they do). */
static engram_status_t fetch_release_slot(eg_fetch_t *self)
{
    engram_status_t st = ENGRAM_OK;
    /* A stream-ordered fetch whose hook handed out nothing is ended in
     * stream order as well: dropping or releasing it never waits for the
     * GPU, and its outcome is the table's, as any other's. */
    if (!self->tracked && self->f != NULL && self->table->stream_ordered && !self->captured && !self->waited &&
        self->failed == ENGRAM_OK && eg_stream_track(self) < 0)
        PyErr_Clear(); /* no memory to track it: released below, waiting */
    if (self->tracked)
        eg_stream_hand_over(self); /* released by the table once complete: no wait here */
    if (self->f != NULL) {
        eg_table_lock(self->table);
        Py_BEGIN_ALLOW_THREADS
        st = engram_fetch_release(self->f);
        Py_END_ALLOW_THREADS
        eg_table_unlock(self->table);
        self->f = NULL;
    }
    if (self->has_indices) {
        eg_dl_release(&self->indices);
        self->has_indices = 0;
    }
    Py_CLEAR(self->keep);
    return st;
}

static PyObject *fetch_release(eg_fetch_t *self, PyObject *noargs)
{
    (void)noargs;
    if (self->waiting)
        return eg_raise(eg_BusyError, "release: another thread is waiting on this fetch");
    if (self->views > 0)
        return eg_raise(eg_BusyError,
                        "release: %zd tensors still view this fetch's rows; drop them first (the slot is "
                        "released by itself when the last one goes)", self->views);
    eg_log_hold();
    engram_status_t st = fetch_release_slot(self);
    /* released either way; a timeout is the caller's to know (the slot is retired, not free) */
    if (st != ENGRAM_OK)
        eg_raise_status(st, "release");
    eg_log_flush();
    if (st != ENGRAM_OK)
        return NULL;
    Py_RETURN_NONE;
}

/* Notes the receive memory the fetch's views span (orphan.c): they
 * outlive it once the buffer is destroyed. A host-receive fetch has views
 * only once its wait saw it complete, so its buffers are there to ask. */
static void note_views(eg_fetch_t *self)
{
    eg_table_t *t = self->table;
    if (t->params.recv != ENGRAM_RECV_HOST)
        return;
    const void *rows = NULL;
    const uint32_t *sf = NULL;
    int mark = eg_log_mark();
    eg_table_lock(t);
    engram_status_t st = engram_fetch_buffers(self->f, &rows, &sf);
    eg_table_unlock(t);
    eg_log_discard_since(mark); /* a failed fetch hands out no views: nothing to note */
    if (st != ENGRAM_OK)
        return;
    int64_t T = self->view_tokens;
    int64_t scale_rows = self->flags & ENGRAM_FETCH_SCALES_COL_MAJOR ? col_major_stride(T) : T;
    eg_orphan_note(t, EG_ORPHAN_ROWS, rows, (size_t)T * self->view_entries * t->hidden * (t->row_dtype.bits / 8u));
    eg_orphan_note(t, EG_ORPHAN_SCALES, sf, (size_t)(4 * view_scales(self) * scale_rows));
}

/* DeepEP's lifetime for engram.ElasticBuffer's destroy: the slot goes
 * though tensors still view it (they must not be used after). */
static PyObject *fetch_detach(eg_fetch_t *self, PyObject *noargs)
{
    (void)noargs;
    if (self->waiting)
        return eg_raise(eg_BusyError, "detach: another thread is waiting on this fetch");
    eg_log_hold();
    if (self->views > 0)
        note_views(self);
    engram_status_t st = fetch_release_slot(self);
    if (st != ENGRAM_OK)
        eg_raise_status(st, "detach");
    eg_log_flush();
    if (st != ENGRAM_OK)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *eg_table_detach_fetches(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    eg_table_t *t = (eg_table_t *)self;
    PyObject *held = PyList_New(0); /* strong: a detach may run code that ends other fetches */
    if (held == NULL)
        return NULL;
    for (eg_fetch_t *fx = t->live; fx != NULL; fx = fx->live_next)
        if (fx->f != NULL && PyList_Append(held, (PyObject *)fx) < 0) {
            Py_DECREF(held);
            return NULL;
        }
    int ok = 1;
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(held); i++) {
        eg_fetch_t *fx = (eg_fetch_t *)PyList_GET_ITEM(held, i);
        if (fx->f == NULL) /* ended by an earlier one's detach */
            continue;
        PyObject *r = fetch_detach(fx, NULL);
        ok = r != NULL;
        Py_XDECREF(r);
    }
    Py_DECREF(held);
    return ok ? Py_NewRef(Py_None) : NULL;
}

static void fetch_dealloc(eg_fetch_t *self)
{
    eg_table_t *t = self->table;
    if (self->live_prev != NULL)
        self->live_prev->live_next = self->live_next;
    else
        t->live = self->live_next;
    if (self->live_next != NULL)
        self->live_next->live_prev = self->live_prev;
    /* a release nobody sees: the library's line about a timed-out one is logged */
    PyObject *pending = eg_err_take();
    (void)fetch_release_slot(self);
    if (pending != NULL)
        eg_err_restore(pending);
    Py_XDECREF(self->fail_message);
    Py_XDECREF(self->table);
    PyObject_Free(self);
}

static PyObject *fetch_get_released(eg_fetch_t *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->f == NULL);
}
static PyObject *fetch_get_views(eg_fetch_t *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(self->views);
}
static PyObject *fetch_get_num_tokens(eg_fetch_t *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLong(self->view_tokens);
}

static PyMethodDef fetch_methods[] = {
    {"wait", (PyCFunction)fetch_wait, METH_NOARGS,
     "wait()\n--\n\nWaits for the rows (GIL released, Ctrl-C interrupts) and returns (rows, sf) as DLPack "
     "arrays viewing the receive slot; sf is None without scales. Rows are handed out once; a call that raised "
     "without them may be repeated."},
    {"wait_capsules", (PyCFunction)fetch_wait_capsules, METH_NOARGS,
     "wait_capsules()\n--\n\nAs wait(), the views as 'dltensor' capsules (for torch._C._from_dlpack); a "
     "BadIndexError still carries Arrays."},
    {"release", (PyCFunction)fetch_release, METH_NOARGS,
     "release()\n--\n\nFrees the receive slot now (BusyError while tensors still view it; TimeoutError when "
     "its gets had not completed: released, the slot retired until they do). Stream-ordered: freed in stream "
     "order, without waiting."},
    {"detach", (PyCFunction)fetch_detach, METH_NOARGS,
     "detach()\n--\n\nAs release(), though tensors still view the slot: they see what the next fetch into it "
     "writes, and zeros once the buffer is destroyed (host receive; recv='cuda': freed device memory). DeepEP's "
     "lifetime, for ElasticBuffer.destroy."},
    {NULL},
};

static PyGetSetDef fetch_getset[] = {
    {"released", (getter)fetch_get_released, NULL, "Whether the receive slot has been freed.", NULL},
    {"views", (getter)fetch_get_views, NULL, "Live arrays and tensors viewing the rows.", NULL},
    {"num_tokens", (getter)fetch_get_num_tokens, NULL, "Tokens of this fetch.", NULL},
    {NULL},
};

PyTypeObject eg_FetchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "engram._engram.Fetch",
    .tp_basicsize = sizeof(eg_fetch_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A fetch in flight (made by Table.fetch); wait() returns its rows.",
    .tp_dealloc = (destructor)fetch_dealloc,
    .tp_methods = fetch_methods,
    .tp_getset = fetch_getset,
};
