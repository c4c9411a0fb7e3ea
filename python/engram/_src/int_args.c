/* Checked integer arguments: PyArg_Parse's 'I' and 'K' formats wrap a
 * negative or too large integer silently (2**40 tokens became 0), and
 * PyLong_AsLong raises a bare OverflowError. Integers are what
 * operator.index() takes (numpy's integer scalars too), never a bool. */
#include <string.h>

#include "ext.h"

/* A bool is never an integer here: Python's, numpy's bool_ (which still
 * converts through __index__, with a DeprecationWarning), a one-element
 * bool tensor (anything whose dtype prints as bool). */
static int is_bool(PyObject *o)
{
    if (PyBool_Check(o))
        return 1;
    if (PyLong_CheckExact(o))
        return 0;
    PyObject *dtype = PyObject_GetAttrString(o, "dtype");
    if (dtype == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *s = PyObject_Str(dtype);
    Py_DECREF(dtype);
    const char *name = s != NULL ? PyUnicode_AsUTF8(s) : NULL;
    int b = name != NULL && (strcmp(name, "bool") == 0 || strcmp(name, "torch.bool") == 0);
    Py_XDECREF(s);
    PyErr_Clear();
    return b;
}

int eg_int_in(PyObject *o, const char *name, long long low, long long high, long long *out)
{
    /* what operator.index() takes: int, numpy's integer scalars, ... */
    if (!is_bool(o) && PyIndex_Check(o)) {
        PyObject *i = PyNumber_Index(o);
        if (i == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError))
                return -1;
            PyErr_Clear();
        } else {
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
            Py_DECREF(i);
            if (v == -1 && PyErr_Occurred())
                return -1;
            if (overflow == 0 && v >= low && v <= high) {
                *out = v;
                return 0;
            }
        }
    }
    eg_raise(eg_InvalidArgumentError, "%s: must be an integer in [%lld, %lld], got %R", name, low, high, o);
    return -1;
}

PyObject *eg_check_int(PyObject *self, PyObject *args)
{
    (void)self;
    const char *name;
    PyObject *value;
    long long low, high, v;
    if (!PyArg_ParseTuple(args, "sOLL", &name, &value, &low, &high))
        return NULL;
    return eg_int_in(value, name, low, high, &v) < 0 ? NULL : PyLong_FromLongLong(v);
}

int eg_arg_u32(PyObject *o, void *out)
{
    long long v;
    if (eg_int_in(o, "argument", 0, UINT32_MAX, &v) < 0)
        return 0;
    *(uint32_t *)out = (uint32_t)v;
    return 1;
}

int eg_arg_u63(PyObject *o, void *out)
{
    long long v;
    if (eg_int_in(o, "argument", 0, INT64_MAX, &v) < 0)
        return 0;
    *(uint64_t *)out = (uint64_t)v;
    return 1;
}
