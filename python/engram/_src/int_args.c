/* Checked integer arguments: PyArg_Parse's 'I' and 'K' formats wrap a
 * negative or too large integer silently (2**40 tokens became 0), and
 * PyLong_AsLong raises a bare OverflowError. */
#include "ext.h"

int eg_int_in(PyObject *o, const char *name, long long low, long long high, long long *out)
{
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow == 0 && v >= low && v <= high) {
            *out = v;
            return 0;
        }
    }
    eg_raise(eg_InvalidArgumentError, "%s: must be an integer in [%lld, %lld], got %R", name, low, high, o);
    return -1;
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
