/* Checked integer arguments for PyArg_Parse's "O&": the 'I' and 'K' formats
 * wrap a negative or too large integer silently (2**40 tokens became 0). */
#include "ext.h"

static int to_unsigned(PyObject *o, unsigned long long max, unsigned long long *out)
{
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        eg_raise(eg_InvalidArgumentError, "expected an integer, got %s", Py_TYPE(o)->tp_name);
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return 0;
    if (overflow == 0 && v >= 0 && (unsigned long long)v <= max) {
        *out = (unsigned long long)v;
        return 1;
    }
    eg_raise(eg_InvalidArgumentError, "integer %R is out of range [0, %llu]", o, max);
    return 0;
}

int eg_arg_u32(PyObject *o, void *out)
{
    unsigned long long v;
    if (!to_unsigned(o, UINT32_MAX, &v))
        return 0;
    *(uint32_t *)out = (uint32_t)v;
    return 1;
}

int eg_arg_u63(PyObject *o, void *out)
{
    unsigned long long v;
    if (!to_unsigned(o, INT64_MAX, &v))
        return 0;
    *(uint64_t *)out = v;
    return 1;
}
