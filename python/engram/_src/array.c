/* _engram.Array: a zero-copy 2-D view of a fetch's receive slot, handed
 * out through DLPack (__dlpack__ / __dlpack_device__), so torch.from_dlpack
 * and numpy.from_dlpack take it. Each Array and each exported tensor holds
 * the Fetch, so the slot lives until the last view is freed. */
#include <stdlib.h>

#include "ext.h"

typedef struct {
    PyObject_HEAD
    eg_fetch_t *owner;
    void *data;
    int64_t shape[2];
    int64_t strides[2]; /* in elements */
    DLDataType dtype;
    DLDevice device;
} eg_array_t;

typedef struct {
    DLManagedTensor mt;
    int64_t shape[2];
    int64_t strides[2];
} exported_t;

PyObject *eg_array_new(eg_fetch_t *owner, void *data, int64_t rows, int64_t cols, int64_t stride0, int64_t stride1,
                       DLDataType dtype, DLDevice device)
{
    eg_array_t *a = PyObject_New(eg_array_t, &eg_ArrayType);
    if (a == NULL)
        return NULL;
    a->owner = (eg_fetch_t *)Py_NewRef((PyObject *)owner);
    owner->views++;
    a->data = data;
    a->shape[0] = rows;
    a->shape[1] = cols;
    a->strides[0] = stride0;
    a->strides[1] = stride1;
    a->dtype = dtype;
    a->device = device;
    return (PyObject *)a;
}

static void array_dealloc(eg_array_t *a)
{
    a->owner->views--;
    Py_DECREF(a->owner);
    PyObject_Free(a);
}

/* DLManagedTensor.deleter: may run on any thread, with or without the GIL,
 * and after the interpreter has finalized (a consumer that frees its
 * tensors at exit): then no Python object may be touched, nor the GIL
 * taken, and the fetch is left to the process's end. */
static void exported_deleter(DLManagedTensor *mt)
{
    if (eg_finalizing()) {
        free(mt);
        return;
    }
    PyGILState_STATE gs = PyGILState_Ensure();
    eg_fetch_t *owner = mt->manager_ctx;
    owner->views--;
    Py_DECREF(owner);
    free(mt);
    PyGILState_Release(gs);
}

static void capsule_destructor(PyObject *capsule)
{
    /* a consumer renames the capsule when it takes the tensor; one never
     * taken is freed here */
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor *mt = PyCapsule_GetPointer(capsule, "dltensor");
        mt->deleter(mt);
    }
}

static PyObject *array_dlpack(eg_array_t *a, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO", kw, &stream, &max_version, &dl_device, &copy))
        return NULL;
    /* stream: the rows are complete on the device once the hook returned
     * (its wait saw the fetch complete), so any consumer stream may read them */
    (void)stream;
    (void)max_version; /* a legacy (unversioned) capsule is what we offer */
    if (copy != Py_None && PyObject_IsTrue(copy))
        return PyErr_Format(PyExc_BufferError, "engram arrays are zero-copy views; copy=True is not offered");
    if (dl_device != Py_None) {
        int type = -1, id = -1;
        if (!PyArg_ParseTuple(dl_device, "ii", &type, &id))
            return NULL;
        if (type != (int)a->device.device_type || id != a->device.device_id)
            return PyErr_Format(PyExc_BufferError, "engram arrays cannot move to another device");
    }
    return eg_export_capsule(a->owner, a->data, a->shape[0], a->shape[1], a->strides[0], a->strides[1], a->dtype,
                             a->device);
}

PyObject *eg_export_capsule(eg_fetch_t *owner, void *data, int64_t rows, int64_t cols, int64_t stride0,
                            int64_t stride1, DLDataType dtype, DLDevice device)
{
    exported_t *e = malloc(sizeof(*e));
    if (e == NULL)
        return PyErr_NoMemory();
    e->shape[0] = rows;
    e->shape[1] = cols;
    e->strides[0] = stride0;
    e->strides[1] = stride1;
    e->mt.dl_tensor = (DLTensor){
        .data = data,
        .device = device,
        .ndim = 2,
        .dtype = dtype,
        .shape = e->shape,
        .strides = e->strides,
        .byte_offset = 0,
    };
    e->mt.manager_ctx = owner;
    e->mt.deleter = exported_deleter;
    PyObject *capsule = PyCapsule_New(&e->mt, "dltensor", capsule_destructor);
    if (capsule == NULL) {
        free(e);
        return NULL;
    }
    Py_INCREF(owner);
    owner->views++;
    return capsule;
}

static PyObject *array_dlpack_device(eg_array_t *a, PyObject *noargs)
{
    (void)noargs;
    return Py_BuildValue("(ii)", (int)a->device.device_type, a->device.device_id);
}

static PyObject *array_view_bits(eg_array_t *a, PyObject *noargs)
{
    (void)noargs;
    DLDataType bits = {.code = kDLUInt, .bits = a->dtype.bits, .lanes = 1};
    return eg_array_new(a->owner, a->data, a->shape[0], a->shape[1], a->strides[0], a->strides[1], bits, a->device);
}

static PyObject *array_get_shape(eg_array_t *a, void *c)
{
    (void)c;
    return Py_BuildValue("(LL)", (long long)a->shape[0], (long long)a->shape[1]);
}
static PyObject *array_get_strides(eg_array_t *a, void *c)
{
    (void)c;
    return Py_BuildValue("(LL)", (long long)a->strides[0], (long long)a->strides[1]);
}
static PyObject *array_get_dtype(eg_array_t *a, void *c)
{
    (void)c;
    return Py_BuildValue("(ii)", (int)a->dtype.code, (int)a->dtype.bits);
}
static PyObject *array_get_ptr(eg_array_t *a, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(a->data);
}

static PyObject *array_repr(eg_array_t *a)
{
    return PyUnicode_FromFormat("<engram.Array %lld x %lld, DLPack type (%d, %d bits), device (%d, %d)>",
                                (long long)a->shape[0], (long long)a->shape[1], (int)a->dtype.code,
                                (int)a->dtype.bits, (int)a->device.device_type, a->device.device_id);
}

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\nA 'dltensor' capsule viewing "
     "the rows (zero-copy)."},
    {"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS, "(device_type, device_id)"},
    {"view_bits", (PyCFunction)array_view_bits, METH_NOARGS,
     "view_bits()\n--\n\nThe same memory as unsigned integers of the element width (for consumers without "
     "bfloat16 or float8 types)."},
    {NULL},
};

static PyGetSetDef array_getset[] = {
    {"shape", (getter)array_get_shape, NULL, "(rows, columns)", NULL},
    {"strides", (getter)array_get_strides, NULL, "strides in elements", NULL},
    {"dlpack_dtype", (getter)array_get_dtype, NULL, "(DLPack type code, bits)", NULL},
    {"data_ptr", (getter)array_get_ptr, NULL, "address of the first element", NULL},
    {NULL},
};

PyTypeObject eg_ArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "engram._engram.Array",
    .tp_basicsize = sizeof(eg_array_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A zero-copy view of fetched rows or scales; pass it to torch.from_dlpack or numpy.from_dlpack.",
    .tp_dealloc = (destructor)array_dealloc,
    .tp_repr = (reprfunc)array_repr,
    .tp_methods = array_methods,
    .tp_getset = array_getset,
};
