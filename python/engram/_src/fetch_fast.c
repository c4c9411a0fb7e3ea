/* Table._fetch_fast: engram.Buffer.engram_fetch's common recv='cuda' call
 * (contiguous int64 torch indices on the buffer's device, the fetch on
 * that device's current stream) asked of torch in the fewest questions,
 * from C: through torch.cuda's Python layers the questions cost more than
 * the fetch's launch. Which device is current does not matter (the library
 * queues the fetch on its table's), nor does graph capture where the buffer
 * allows it (the library says whether the fetch was captured); where it
 * does not (rows of other nodes through a host transport) torch is asked,
 * and a capturing stream takes the general path. Any other call gets None,
 * and engram.Buffer takes its general path, which refuses what it must by
 * name. */
#include "ext.h"

/* The attribute and method names the short path asks for, interned once. */
enum { N_IS_CUDA, N_DTYPE, N_LAYOUT, N_SHAPE, N_IS_CONTIGUOUS, N_GET_DEVICE, N_DATA_PTR, N_COUNT };
static PyObject *names[N_COUNT];

static int names_init(void)
{
    static const char *const text[N_COUNT] = {"is_cuda", "dtype", "layout", "shape", "is_contiguous",
                                              "get_device", "data_ptr"};
    for (int i = 0; i < N_COUNT; i++)
        if (names[i] == NULL && (names[i] = PyUnicode_InternFromString(text[i])) == NULL)
            return -1;
    return 0;
}

void eg_torch_clear(eg_torch_t *tc)
{
    Py_CLEAR(tc->tensor);
    Py_CLEAR(tc->int64);
    Py_CLEAR(tc->strided);
    Py_CLEAR(tc->device);
    Py_CLEAR(tc->stream);
    Py_CLEAR(tc->capturing);
    Py_CLEAR(tc->conv);
    Py_CLEAR(tc->on_device);
}

PyObject *eg_table_set_torch(PyObject *self, PyObject *args)
{
    PyObject *tensor, *int64, *strided, *device, *stream, *capturing, *conv, *on_device;
    if (names_init() < 0 || !PyArg_ParseTuple(args, "O!OOOOOO!O", &PyType_Type, &tensor, &int64, &strided, &device,
                                              &stream, &capturing, &PyTuple_Type, &conv, &on_device))
        return NULL;
    eg_torch_t *tc = &((eg_table_t *)self)->torch;
    eg_torch_clear(tc);
    *tc = (eg_torch_t){
        .tensor = Py_NewRef(tensor),
        .int64 = Py_NewRef(int64),
        .strided = Py_NewRef(strided),
        .device = Py_NewRef(device),
        .stream = Py_NewRef(stream),
        .capturing = Py_NewRef(capturing),
        .conv = Py_NewRef(conv),
        .on_device = Py_NewRef(on_device),
    };
    Py_RETURN_NONE;
}

/* 1 when obj is the long `want`, 0 when not, -1 with an exception set. */
static int long_is(PyObject *obj, long want)
{
    if (obj == NULL)
        return -1;
    long v = PyLong_AsLong(obj);
    Py_DECREF(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    return v == want;
}

int eg_torch_device_is(const eg_torch_t *tc, int device)
{
    return long_is(PyObject_CallNoArgs(tc->device), device);
}

/* 1 when obj.name is `want` (identity), 0 when not, -1 with an exception set. */
static int attr_is(PyObject *obj, int name, PyObject *want)
{
    PyObject *v = PyObject_GetAttr(obj, names[name]);
    if (v == NULL)
        return -1;
    Py_DECREF(v);
    return v == want;
}

/* 1 with rows and cols of a 2-D torch shape, 0 when not 2-D, -1 with an exception set. */
static int shape_2d(PyObject *indices, long long *rows, long long *cols)
{
    PyObject *shape = PyObject_GetAttr(indices, names[N_SHAPE]);
    if (shape == NULL)
        return -1;
    int ok = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 2;
    if (ok) {
        *rows = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, 0));
        *cols = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, 1));
        if (PyErr_Occurred())
            ok = -1;
    }
    Py_DECREF(shape);
    return ok;
}

/* 1 when the call is the common one (and *rows, *cols, *stream set), 0 when not, -1 with an exception set. */
static int common_call(const eg_table_t *t, PyObject *indices, long long *rows, long long *cols, PyObject **stream)
{
    const eg_torch_t *tc = &t->torch;
    if (tc->tensor == NULL || (PyObject *)Py_TYPE(indices) != tc->tensor)
        return 0;
    int ok = attr_is(indices, N_IS_CUDA, Py_True);
    if (ok == 1)
        ok = attr_is(indices, N_DTYPE, tc->int64);
    if (ok == 1)
        ok = attr_is(indices, N_LAYOUT, tc->strided);
    if (ok == 1)
        ok = shape_2d(indices, rows, cols);
    if (ok == 1) {
        PyObject *c = PyObject_CallMethodNoArgs(indices, names[N_IS_CONTIGUOUS]);
        ok = c == NULL ? -1 : c == Py_True;
        Py_XDECREF(c);
    }
    if (ok == 1)
        ok = long_is(PyObject_CallMethodNoArgs(indices, names[N_GET_DEVICE]), t->device_id);
    if (ok == 1 && tc->capturing != Py_None) {
        PyObject *c = PyObject_CallNoArgs(tc->capturing);
        ok = c == NULL ? -1 : c == Py_False;
        Py_XDECREF(c);
    }
    if (ok != 1)
        return ok;
    PyObject *dev = PyLong_FromLong(t->device_id);
    *stream = dev == NULL ? NULL : PyObject_CallOneArg(tc->stream, dev);
    Py_XDECREF(dev);
    return *stream == NULL ? -1 : 1;
}

PyObject *eg_fetch_fast(PyObject *self, PyObject *indices)
{
    eg_table_t *t = (eg_table_t *)self;
    if (t->table == NULL || t->params.recv != ENGRAM_RECV_CUDA)
        Py_RETURN_NONE; /* the general path says what is wrong */
    long long rows = 0, cols = 0;
    PyObject *stream = NULL;
    int common = common_call(t, indices, &rows, &cols, &stream);
    if (common <= 0)
        return common < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *ptr = PyObject_CallMethodNoArgs(indices, names[N_DATA_PTR]);
    void *data = ptr == NULL ? NULL : PyLong_AsVoidPtr(ptr);
    Py_XDECREF(ptr);
    if (PyErr_Occurred()) {
        Py_DECREF(stream);
        return NULL;
    }
    eg_log_hold();
    PyObject *fetch = eg_fetch_issue_addr(t, data, rows, cols, 64, kDLCUDA, 0, 0, stream, indices);
    eg_log_flush();
    Py_DECREF(stream);
    if (fetch == NULL)
        return NULL;
    PyObject *hook = eg_hook_new((eg_fetch_t *)fetch, t->torch.conv, t->device_id);
    Py_DECREF(fetch);
    return hook;
}
