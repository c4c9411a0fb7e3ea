/* Table.cache_rows() / Table.cache_profile(): the hot-row cache
 * (engram_table_cache_rows / engram_table_cache_profile) from a contiguous
 * int64 buffer. */
#include <stdbool.h>
#include <string.h>

#include "ext.h"

/* A C-contiguous buffer of 8-byte signed integers, or an exception. */
static int int64_view(PyObject *obj, Py_buffer *view, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (view->itemsize != 8 || (strcmp(f, "q") != 0 && strcmp(f, "l") != 0)) {
        PyBuffer_Release(view);
        eg_raise(eg_InvalidArgumentError, "%s: needs int64 values (buffer format '%s', %zd-byte items)", what,
                 view->format ? view->format : "B", view->itemsize);
        return -1;
    }
    return 0;
}

static PyObject *call(eg_table_t *self, PyObject *rows, unsigned long long max_rows, bool profile)
{
    const char *what = profile ? "cache_profile" : "cache_rows";
    if (self->table == NULL)
        return eg_raise(eg_StateError, "%s: the buffer has been destroyed", what);
    Py_buffer view;
    if (int64_view(rows, &view, what) != 0)
        return NULL;
    const uint64_t n = (uint64_t)(view.len / 8);
    engram_status_t st;
    eg_table_lock(self);
    Py_BEGIN_ALLOW_THREADS
    st = profile ? engram_table_cache_profile(self->table, view.buf, n, max_rows)
                 : engram_table_cache_rows(self->table, view.buf, n);
    Py_END_ALLOW_THREADS
    eg_table_unlock(self);
    PyBuffer_Release(&view);
    if (st != ENGRAM_OK)
        return eg_raise_status(st, what);
    Py_RETURN_NONE;
}

/* call() with the library's error lines held: the one raised is not also logged. */
static PyObject *held_call(eg_table_t *self, PyObject *rows, unsigned long long max_rows, bool profile)
{
    eg_log_hold();
    PyObject *r = call(self, rows, max_rows, profile);
    eg_log_flush();
    return r;
}

PyObject *eg_table_cache_rows(PyObject *self, PyObject *args)
{
    PyObject *rows;
    if (!PyArg_ParseTuple(args, "O", &rows))
        return NULL;
    return held_call((eg_table_t *)self, rows, 0, false);
}

PyObject *eg_table_cache_profile(PyObject *self, PyObject *args)
{
    PyObject *indices;
    unsigned long long max_rows;
    if (!PyArg_ParseTuple(args, "OK", &indices, &max_rows))
        return NULL;
    return held_call((eg_table_t *)self, indices, max_rows, true);
}
