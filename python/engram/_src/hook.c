/* engram.Hook: what engram_fetch returns; calling it hands out the rows.
 * In C because it runs once per fetch, and a Python frame around the
 * fetch's wait cost as much as the wait itself on a stream-ordered buffer. */
#include <stddef.h>

#include "ext.h"

typedef struct eg_hook {
    PyObject_HEAD
    eg_fetch_t *fetch; /* strong */
    PyObject *conv;    /* a Converter (_convert.py): capsules, rows, sf, array_rows, array_sf */
    int device;        /* recv='cuda': the buffer's CUDA device, current while the library waits; -1: none */
} eg_hook_t;

enum { CONV_CAPSULES, CONV_ROWS, CONV_SF, CONV_ARRAY_ROWS, CONV_ARRAY_SF, CONV_FIELDS };

PyObject *eg_hook_new(eg_fetch_t *fetch, PyObject *conv, int device)
{
    eg_hook_t *h = PyObject_New(eg_hook_t, &eg_HookType);
    if (h == NULL)
        return NULL;
    h->fetch = (eg_fetch_t *)Py_NewRef((PyObject *)fetch);
    h->conv = Py_NewRef(conv);
    h->device = device;
    return (PyObject *)h;
}

static PyObject *hook_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)type;
    static char *kw[] = {"fetch", "conv", "device", NULL};
    PyObject *fetch, *conv, *device = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O|O", kw, &eg_FetchType, &fetch, &conv, &device))
        return NULL;
    if (!PyTuple_Check(conv) || PyTuple_GET_SIZE(conv) != CONV_FIELDS)
        return eg_raise(eg_InvalidArgumentError, "Hook: conv must be a Converter");
    long long d = -1;
    if (device != Py_None && eg_int_in(device, "device", 0, INT32_MAX, &d) < 0)
        return NULL;
    return eg_hook_new((eg_fetch_t *)fetch, conv, (int)d);
}

/* 1 when the hook's call must run under its device, which is not the
 * current one, 0 when not, -1 with an exception set. A stream-ordered
 * hook, or a captured fetch's, never waits: the work it may queue on the
 * fetch's stream the library queues on its table's device, whichever is
 * current; a hook that may wait runs under the buffer's. */
static int off_device(const eg_hook_t *h)
{
    const eg_torch_t *tc = &h->fetch->table->torch;
    if (h->device < 0 || tc->device == NULL || h->fetch->table->stream_ordered || h->fetch->captured)
        return 0;
    int on = eg_torch_device_is(tc, h->device);
    return on < 0 ? -1 : !on;
}

static PyObject *on_device(const eg_hook_t *h, PyObject *fn)
{
    PyObject *dev = PyLong_FromLong(h->device);
    if (dev == NULL)
        return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(h->fetch->table->torch.on_device, dev, fn, NULL);
    Py_DECREF(dev);
    return r;
}

static PyObject *convert(PyObject *fn, PyObject *v)
{
    return v == Py_None ? Py_NewRef(v) : PyObject_CallOneArg(fn, v);
}

/* The BadIndexError now set, its rows and sf through the converters. */
static void convert_bad_index(const eg_hook_t *h)
{
    PyObject *exc = eg_err_take();
    if (exc == NULL)
        return;
    static const char *const names[2] = {"rows", "sf"};
    for (int i = 0; i < 2; i++) {
        PyObject *a = PyObject_GetAttrString(exc, names[i]);
        PyObject *v = a == NULL ? NULL : convert(PyTuple_GET_ITEM(h->conv, CONV_ARRAY_ROWS + i), a);
        Py_XDECREF(a);
        if (v == NULL || PyObject_SetAttrString(exc, names[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(exc);
            return; /* that failure is the exception now */
        }
        Py_DECREF(v);
    }
    eg_err_restore(exc);
}

static PyObject *hook_call(eg_hook_t *self, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0))
        return eg_raise(PyExc_TypeError, "engram_fetch hook: takes no arguments");
    int off = off_device(self);
    if (off != 0)
        return off < 0 ? NULL : on_device(self, (PyObject *)self);
    int capsules = PyObject_IsTrue(PyTuple_GET_ITEM(self->conv, CONV_CAPSULES));
    if (capsules < 0)
        return NULL;
    eg_log_hold();
    PyObject *views = eg_fetch_wait_views(self->fetch, capsules);
    eg_log_flush();
    if (views == NULL) {
        if (PyErr_ExceptionMatches(eg_BadIndexError))
            convert_bad_index(self);
        return NULL;
    }
    PyObject *rows = PyObject_CallOneArg(PyTuple_GET_ITEM(self->conv, CONV_ROWS), PyTuple_GET_ITEM(views, 0));
    PyObject *sf = rows == NULL ? NULL : convert(PyTuple_GET_ITEM(self->conv, CONV_SF), PyTuple_GET_ITEM(views, 1));
    Py_DECREF(views);
    if (sf == NULL) {
        Py_XDECREF(rows);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, rows, sf);
    Py_DECREF(rows);
    Py_DECREF(sf);
    return pair;
}

static PyObject *hook_release(eg_hook_t *self, PyObject *noargs)
{
    (void)noargs;
    int off = off_device(self);
    if (off != 0) {
        if (off < 0)
            return NULL;
        PyObject *fn = PyObject_GetAttrString((PyObject *)self->fetch, "release");
        PyObject *r = fn == NULL ? NULL : on_device(self, fn);
        Py_XDECREF(fn);
        return r;
    }
    return PyObject_CallMethod((PyObject *)self->fetch, "release", NULL);
}

static PyObject *hook_get_released(eg_hook_t *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->fetch->f == NULL);
}

static PyObject *hook_get_fetch(eg_hook_t *self, void *c)
{
    (void)c;
    return Py_NewRef((PyObject *)self->fetch);
}

static void hook_dealloc(eg_hook_t *self)
{
    Py_DECREF(self->conv);
    Py_DECREF((PyObject *)self->fetch);
    PyObject_Free(self);
}

static PyObject *hook_bad_indices(eg_hook_t *self, PyObject *noargs)
{
    (void)noargs;
    return eg_fetch_bad_indices(self->fetch);
}

static PyMethodDef hook_methods[] = {
    {"bad_indices", (PyCFunction)hook_bad_indices, METH_NOARGS,
     "bad_indices()\n--\n\n(count, first_token, first_entry) of the fetch's out-of-range indices, whose rows are "
     "zero-filled, once its rows were handed out; for a fetch captured in a CUDA graph, those of the graph's last "
     "replay to complete (gpu_path=host_gather; (0, 0, 0) on uva, which tallies none per replay)."},
    {"release", (PyCFunction)hook_release, METH_NOARGS,
     "release()\n--\n\nFrees the receive slot now (BusyError while tensors still view it). engram.TimeoutError: "
     "the fetch's gets had not completed within timeout_ms; it is released all the same, and its receive slot is "
     "retired until they complete (or the buffer is destroyed). On a stream-ordered buffer it never waits: the "
     "slot is freed in stream order, and the fetch's error is raised later, as every stream-ordered fetch's."},
    {NULL},
};

static PyGetSetDef hook_getset[] = {
    {"released", (getter)hook_get_released, NULL, "Whether the receive slot has been freed.", NULL},
    {"_fetch", (getter)hook_get_fetch, NULL, "The Fetch behind the hook (engram.ElasticBuffer detaches it).", NULL},
    {NULL},
};

PyTypeObject eg_HookType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "engram.Hook",
    .tp_basicsize = sizeof(eg_hook_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Hook(fetch, conv, device=None)\n--\n\n"
              "Returned by engram_fetch; call it for (rows, sf), zero-copy views of the receive slot: rows "
              "[num_tokens, num_entries_per_token * hidden] and sf [num_tokens, num_entries_per_token * "
              "num_sf_packs] int32 (None without scales). On a buffer made with stream_ordered=True the hook does "
              "not wait: the rows are valid for work queued on the fetch's stream after it (see Buffer). A call "
              "that raises without handing out rows (Ctrl-C, engram.TimeoutError, engram.PeerError, ...) may be "
              "repeated: it waits again while the fetch is in flight, and raises the fetch's error again once the "
              "library has ended it. Once rows were handed out (also inside a BadIndexError) a further call is a "
              "StateError. The slot is released when the hook and every view of it are gone, or by release() "
              "once no view is left. Out-of-range indices raise engram.BadIndexError, whose rows/sf hold the "
              "(zero-filled for those rows) result.",
    .tp_new = hook_tp_new,
    .tp_call = (ternaryfunc)hook_call,
    .tp_dealloc = (destructor)hook_dealloc,
    .tp_methods = hook_methods,
    .tp_getset = hook_getset,
};
