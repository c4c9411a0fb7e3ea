/* engram.Group: who the ranks are. Built from Python callbacks (the
 * torch.distributed and mpi4py adapters in engram/_groups.py), a group of
 * one, or handed to the children of the fork launcher. Collectives run with
 * the GIL released; the callbacks take it back while they run. */
#include <string.h>

#include "ext.h"

struct eg_group_obj {
    PyObject_HEAD
    engram_group_t *g;
    int borrowed;         /* the fork launcher owns g */
    PyObject *allgather;  /* allgather(bytes) -> bytes of size * len */
    PyObject *barrier;    /* barrier() */
    PyObject *cb_error;   /* exception a callback raised, for chaining */
    PyObject *failure;    /* the first one: the group's failure, which every later collective reports */
};

static void save_callback_error(eg_group_obj_t *self)
{
    PyObject *exc = eg_err_take();
    if (self->failure == NULL && exc != NULL)
        self->failure = Py_NewRef(exc);
    Py_XSETREF(self->cb_error, exc);
}

/* The group whose callback this thread runs: Group._serve_progress serves
 * it (the callbacks get no group argument, and a closure over the Group
 * would be a reference cycle). */
static _Thread_local eg_group_obj_t *in_callback;

static int cb_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    eg_group_obj_t *self = ctx;
    PyGILState_STATE gs = PyGILState_Ensure();
    int rc = 1;
    PyObject *arg = PyBytes_FromStringAndSize(send, (Py_ssize_t)bytes);
    eg_group_obj_t *outer = in_callback;
    in_callback = self;
    PyObject *res = NULL;
    if (arg != NULL && self->allgather == NULL) /* cleared by the garbage collector (tp_clear) */
        eg_raise(eg_StateError, "engram group: its allgather callback is gone (the group was collected)");
    else if (arg != NULL)
        res = PyObject_CallOneArg(self->allgather, arg);
    in_callback = outer;
    Py_XDECREF(arg);
    if (res != NULL) {
        Py_buffer view;
        if (PyObject_GetBuffer(res, &view, PyBUF_SIMPLE) == 0) {
            int n = engram_group_size(self->g);
            if ((size_t)view.len == bytes * (size_t)n) {
                memcpy(recv, view.buf, (size_t)view.len);
                rc = 0;
            } else {
                PyErr_Format(PyExc_ValueError, "engram group allgather callback returned %zd bytes, expected %zu",
                             view.len, bytes * (size_t)n);
            }
            PyBuffer_Release(&view);
        }
        Py_DECREF(res);
    }
    if (rc != 0)
        save_callback_error(self);
    PyGILState_Release(gs);
    return rc;
}

static int cb_barrier(void *ctx)
{
    eg_group_obj_t *self = ctx;
    PyGILState_STATE gs = PyGILState_Ensure();
    eg_group_obj_t *outer = in_callback;
    in_callback = self;
    PyObject *res = self->barrier != NULL ? PyObject_CallNoArgs(self->barrier)
                                          : eg_raise(eg_StateError, "engram group: its barrier callback is gone (the "
                                                                    "group was collected)");
    in_callback = outer;
    int rc = res == NULL;
    if (rc)
        save_callback_error(self);
    Py_XDECREF(res);
    PyGILState_Release(gs);
    return rc;
}

static eg_group_obj_t *group_alloc(PyTypeObject *type)
{
    return (eg_group_obj_t *)type->tp_alloc(type, 0);
}

static PyObject *group_from_callbacks(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"rank", "size", "local_size", "allgather", "barrier", NULL};
    int rank, size, local_size;
    PyObject *allgather, *barrier;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iiiOO", kw, &rank, &size, &local_size, &allgather, &barrier))
        return NULL;
    if (!PyCallable_Check(allgather) || !PyCallable_Check(barrier))
        return eg_raise(eg_InvalidArgumentError, "Group: allgather and barrier must be callables");
    eg_group_obj_t *self = group_alloc((PyTypeObject *)cls);
    if (self == NULL)
        return NULL;
    self->allgather = Py_NewRef(allgather);
    self->barrier = Py_NewRef(barrier);
    engram_group_callbacks_t cb = {
        .size = sizeof(cb),
        .rank = rank,
        .nranks = size,
        .local_size = local_size,
        .ctx = self,
        .allgather = cb_allgather,
        .barrier = cb_barrier,
    };
    eg_log_hold();
    engram_status_t st = engram_group_callbacks_create(&cb, &self->g);
    if (st != ENGRAM_OK) {
        Py_DECREF(self);
        eg_raise_status(st, "Group");
        eg_log_flush();
        return NULL;
    }
    eg_log_flush();
    return (PyObject *)self;
}

static PyObject *group_solo(PyObject *cls, PyObject *noargs)
{
    (void)noargs;
    eg_group_obj_t *self = group_alloc((PyTypeObject *)cls);
    if (self == NULL)
        return NULL;
    eg_log_hold();
    engram_status_t st = engram_group_solo_create(&self->g);
    if (st != ENGRAM_OK) {
        Py_DECREF(self);
        eg_raise_status(st, "Group.solo");
        eg_log_flush();
        return NULL;
    }
    eg_log_flush();
    return (PyObject *)self;
}

PyObject *eg_group_wrap_borrowed(PyTypeObject *type, engram_group_t *g)
{
    eg_group_obj_t *self = group_alloc(type);
    if (self != NULL) {
        self->g = g;
        self->borrowed = 1;
    }
    return (PyObject *)self;
}

void eg_group_invalidate(PyObject *obj)
{
    ((eg_group_obj_t *)obj)->g = NULL;
}

engram_group_t *eg_group_get(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &eg_GroupType)) {
        eg_raise(eg_InvalidArgumentError, "group: expected an engram.Group, got %s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    eg_group_obj_t *self = (eg_group_obj_t *)obj;
    if (self->g == NULL)
        eg_raise(eg_StateError, "group: this group has ended (its launcher's rank function returned)");
    return self->g;
}

PyObject *eg_group_take_callback_error(PyObject *obj)
{
    eg_group_obj_t *self = (eg_group_obj_t *)obj;
    PyObject *exc = self->cb_error;
    self->cb_error = NULL;
    return exc;
}

void eg_group_chain_error(PyObject *group)
{
    PyObject *cause = eg_group_take_callback_error(group);
    eg_group_obj_t *self = (eg_group_obj_t *)group;
    if (cause == NULL && self->failure != NULL) /* refused: the group failed in an earlier callback */
        cause = Py_NewRef(self->failure);
    if (cause == NULL)
        return;
    PyObject *exc = eg_err_take();
    if (exc != NULL) {
        PyException_SetCause(exc, cause); /* steals cause */
        eg_err_restore(exc);
    } else {
        Py_DECREF(cause);
    }
}

/* The callbacks are Python objects that may refer back to the group (a
 * closure over it, a buffer holding it): the collector must see them. */
static int group_traverse(eg_group_obj_t *self, visitproc visit, void *arg)
{
    Py_VISIT(self->allgather);
    Py_VISIT(self->barrier);
    Py_VISIT(self->cb_error);
    Py_VISIT(self->failure);
    return 0;
}

static int group_clear(eg_group_obj_t *self)
{
    Py_CLEAR(self->allgather);
    Py_CLEAR(self->barrier);
    Py_CLEAR(self->cb_error);
    Py_CLEAR(self->failure);
    return 0;
}

static void group_dealloc(eg_group_obj_t *self)
{
    PyObject_GC_UnTrack(self);
    if (self->g != NULL && !self->borrowed)
        engram_group_destroy(self->g);
    group_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define GROUP_INT_GETTER(name, fn)                                                                                     \
    static PyObject *group_get_##name(eg_group_obj_t *self, void *closure)                                             \
    {                                                                                                                  \
        (void)closure;                                                                                                 \
        engram_group_t *g = eg_group_get((PyObject *)self);                                                            \
        return g ? PyLong_FromLong(fn(g)) : NULL;                                                                      \
    }
GROUP_INT_GETTER(rank, engram_group_rank)
GROUP_INT_GETTER(size, engram_group_size)
GROUP_INT_GETTER(local_rank, engram_group_local_rank)
GROUP_INT_GETTER(local_size, engram_group_local_size)
GROUP_INT_GETTER(timeout_ms, engram_group_timeout)

static int group_set_timeout_ms(eg_group_obj_t *self, PyObject *value, void *closure)
{
    (void)closure;
    engram_group_t *g = eg_group_get((PyObject *)self);
    if (g == NULL)
        return -1;
    long long ms;
    if (value == NULL) {
        eg_raise(eg_InvalidArgumentError, "Group.timeout_ms cannot be deleted");
        return -1;
    }
    if (eg_int_in(value, "Group.timeout_ms", 1, INT32_MAX, &ms) < 0)
        return -1;
    engram_group_set_timeout(g, (int)ms);
    return 0;
}

static PyObject *group_barrier(eg_group_obj_t *self, PyObject *noargs)
{
    (void)noargs;
    engram_group_t *g = eg_group_get((PyObject *)self);
    if (g == NULL)
        return NULL;
    engram_status_t st;
    eg_log_hold();
    Py_BEGIN_ALLOW_THREADS
    st = engram_group_barrier(g);
    Py_END_ALLOW_THREADS
    if (st != ENGRAM_OK) {
        eg_raise_status(st, "Group.barrier");
        eg_group_chain_error((PyObject *)self);
    }
    eg_log_flush();
    if (st != ENGRAM_OK)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *group_allgather(eg_group_obj_t *self, PyObject *arg)
{
    engram_group_t *g = eg_group_get((PyObject *)self);
    if (g == NULL)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t n = engram_group_size(g);
    PyObject *out = PyBytes_FromStringAndSize(NULL, view.len * n);
    engram_status_t st = ENGRAM_OK;
    eg_log_hold();
    if (out != NULL) {
        char *dst = PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        st = engram_group_allgather(g, view.buf, dst, (size_t)view.len);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (out != NULL && st != ENGRAM_OK) {
        Py_CLEAR(out);
        eg_raise_status(st, "Group.allgather");
        eg_group_chain_error((PyObject *)self);
    }
    eg_log_flush();
    return out;
}

static PyObject *group_repr(eg_group_obj_t *self)
{
    if (self->g == NULL)
        return PyUnicode_FromString("<engram.Group (ended)>");
    return PyUnicode_FromFormat("<engram.Group rank %d of %d, local %d of %d>", engram_group_rank(self->g),
                                engram_group_size(self->g), engram_group_local_rank(self->g),
                                engram_group_local_size(self->g));
}

static PyObject *group_serve_progress(PyObject *cls, PyObject *noargs)
{
    (void)cls;
    (void)noargs;
    engram_group_t *g = in_callback != NULL ? in_callback->g : NULL;
    int served;
    Py_BEGIN_ALLOW_THREADS
    served = engram_group_progress(g);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(served);
}

static PyMethodDef group_methods[] = {
    {"_from_callbacks", (PyCFunction)(void (*)(void))group_from_callbacks, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "_from_callbacks(rank, size, local_size, allgather, barrier)\n--\n\nA group whose collectives call "
     "allgather(bytes) -> bytes (every rank's contribution, rank-ordered) and barrier(). "
     "Use Group.from_torch / Group.from_mpi."},
    {"_serve_progress", (PyCFunction)group_serve_progress, METH_NOARGS | METH_STATIC,
     "_serve_progress() -> bool\n--\n\nFrom inside an allgather/barrier callback: serves the group's progress "
     "hook once (the transport's owner-side gets); False when it has none or outside a callback."},
    {"solo", (PyCFunction)group_solo, METH_NOARGS | METH_CLASS, "solo()\n--\n\nA group of this process alone."},
    {"barrier", (PyCFunction)group_barrier, METH_NOARGS, "barrier()\n--\n\nCollective; the GIL is released."},
    {"allgather", (PyCFunction)group_allgather, METH_O,
     "allgather(data)\n--\n\nCollective: every rank's bytes, rank-ordered (each rank passes the same length)."},
    {NULL},
};

static PyGetSetDef group_getset[] = {
    {"rank", (getter)group_get_rank, NULL, "This process's rank.", NULL},
    {"size", (getter)group_get_size, NULL, "Number of ranks.", NULL},
    {"local_rank", (getter)group_get_local_rank, NULL, "Rank within the node (rank % local_size).", NULL},
    {"local_size", (getter)group_get_local_size, NULL, "Ranks per node (the scale-up domain).", NULL},
    {"timeout_ms", (getter)group_get_timeout_ms, (setter)group_set_timeout_ms, "Bound on collectives (ms).", NULL},
    {NULL},
};

PyTypeObject eg_GroupType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "engram._engram.Group",
    .tp_basicsize = sizeof(eg_group_obj_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)group_traverse,
    .tp_clear = (inquiry)group_clear,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "The ranks of an engram buffer and their collectives. Make one with Group.from_torch(pg), "
              "Group.from_mpi(comm), Group.solo(), or receive one from engram.launch().",
    .tp_dealloc = (destructor)group_dealloc,
    .tp_repr = (reprfunc)group_repr,
    .tp_methods = group_methods,
    .tp_getset = group_getset,
};

/* ---- the fork launcher ---- */

static void flush_std_streams(void)
{
    const char *names[] = {"stdout", "stderr"};
    for (int i = 0; i < 2; i++) {
        PyObject *s = PySys_GetObject(names[i]);
        if (s != NULL && s != Py_None) {
            PyObject *r = PyObject_CallMethod(s, "flush", NULL);
            if (r == NULL)
                PyErr_Clear();
            Py_XDECREF(r);
        }
    }
}

/* The exit code a Python exception asks for: SystemExit's code, else 1. */
static int exit_code_of_exception(void)
{
    if (!PyErr_ExceptionMatches(PyExc_SystemExit)) {
        PyErr_Print();
        return 1;
    }
    PyObject *exc = eg_err_take();
    PyObject *code = PyObject_GetAttrString(exc, "code");
    int rc = 0;
    if (code == NULL) {
        PyErr_Clear();
        rc = 1;
    } else if (code == Py_None) {
        rc = 0;
    } else if (PyLong_Check(code)) {
        rc = (int)PyLong_AsLong(code);
    } else {
        PyObject_Print(code, stderr, Py_PRINT_RAW);
        fputc('\n', stderr);
        rc = 1;
    }
    Py_XDECREF(code);
    Py_DECREF(exc);
    return rc;
}

struct fork_arg {
    PyObject *fn;
    PyTypeObject *type;
};

static int fork_rank_main(engram_group_t *g, void *arg)
{
    /* A forked child of a Python process: the interpreter's locks and
     * thread states must be reset before any Python runs. The thread that
     * forked held the GIL, so this one does. */
    PyOS_AfterFork_Child();
    eg_log_forget(); /* launch() holds its lines while the ranks run */
    struct fork_arg *fa = arg;
    PyObject *fn = fa->fn;
    PyObject *group = eg_group_wrap_borrowed(fa->type, g);
    int rc = 1;
    if (group != NULL) {
        PyObject *res = PyObject_CallOneArg(fn, group);
        if (res == NULL)
            rc = exit_code_of_exception();
        else
            rc = PyLong_Check(res) ? (int)PyLong_AsLong(res) : 0;
        Py_XDECREF(res);
        eg_group_invalidate(group);
        Py_DECREF(group);
    } else {
        PyErr_Print();
    }
    flush_std_streams();
    return rc;
}

PyObject *eg_fork_run(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kw[] = {"nranks", "fn", "local_size", "group_type", NULL};
    int nranks, local_size = 0;
    PyObject *fn;
    PyTypeObject *type = &eg_GroupType;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iO|iO!", kw, &nranks, &fn, &local_size, &PyType_Type, &type))
        return NULL;
    if (!PyType_IsSubtype(type, &eg_GroupType))
        return eg_raise(eg_InvalidArgumentError, "launch: group_type must be a subclass of engram.Group");
    struct fork_arg fa = {fn, type};
    if (!PyCallable_Check(fn))
        return eg_raise(eg_InvalidArgumentError, "launch: fn must be callable");
    if (nranks < 1 || nranks > 4096)
        return eg_raise(eg_InvalidArgumentError, "launch: nranks must be in 1..4096, got %d", nranks);
    int *codes = PyMem_Calloc((size_t)nranks, sizeof(int));
    if (codes == NULL)
        return PyErr_NoMemory();
    flush_std_streams(); /* or the children would print the parent's buffered output again */
    /* The parent keeps the GIL while its children run: it only waits for
     * them, and a child starts as a copy of this (GIL-holding) thread. */
    PyOS_BeforeFork();
    eg_log_hold(); /* a refusal raised is not also logged */
    engram_status_t st = engram_group_fork_run(nranks, local_size, fork_rank_main, &fa, codes);
    PyOS_AfterFork_Parent();
    PyObject *list = NULL;
    if (st == ENGRAM_OK || st == ENGRAM_ERR_PEER || st == ENGRAM_ERR_IO) {
        list = PyList_New(nranks);
        for (int i = 0; list != NULL && i < nranks; i++)
            PyList_SET_ITEM(list, i, PyLong_FromLong(codes[i]));
    }
    PyMem_Free(codes);
    if (st != ENGRAM_OK && (st == ENGRAM_ERR_INVALID || list == NULL)) {
        Py_XDECREF(list);
        eg_raise_status(st, "launch");
        eg_log_flush();
        return NULL;
    }
    eg_log_flush(); /* a rank's failure: the library's lines say which, Python raises with the codes */
    if (PyErr_CheckSignals() < 0) {
        Py_XDECREF(list);
        return NULL;
    }
    return list;
}
