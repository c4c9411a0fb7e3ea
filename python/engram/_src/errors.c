/* engram.Error and its subclasses, one per status a caller handles
 * differently; every failed library call becomes one of them. */
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "ext.h"

PyObject *eg_Error, *eg_InvalidArgumentError, *eg_BadIndexError, *eg_BusyError, *eg_PeerError, *eg_TimeoutError,
    *eg_StateError;

static PyObject *new_error(PyObject *module, const char *name, PyObject *bases, const char *doc)
{
    char qualified[64];
    snprintf(qualified, sizeof(qualified), "engram.%s", name);
    PyObject *type = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
    if (type == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, name, type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    return type;
}

static PyObject *bases2(PyObject *a, PyObject *b)
{
    return PyTuple_Pack(2, a, b);
}

int eg_errors_init(PyObject *module)
{
    eg_Error = new_error(module, "Error", NULL,
                         "A failed engram call. `status` is the library's status code, `status_name` its name.");
    if (eg_Error == NULL)
        return -1;
    PyObject *b = bases2(eg_Error, PyExc_ValueError);
    eg_InvalidArgumentError = b ? new_error(module, "InvalidArgumentError", b, "A bad argument (named in the message).")
                                : NULL;
    Py_XDECREF(b);
    eg_BadIndexError = new_error(module, "BadIndexError", eg_Error,
                                 "Some fetch indices were out of range: those rows (and scales) are zero-filled, "
                                 "the others are valid. Attributes: count, first_token, first_entry, rows, sf.");
    eg_BusyError = new_error(module, "BusyError", eg_Error,
                             "A resource is in use: all receive slots taken, or fetches (or tensors viewing "
                             "their rows) still alive.");
    eg_PeerError = new_error(module, "PeerError", eg_Error, "A peer process failed or disconnected.");
    b = bases2(eg_Error, PyExc_TimeoutError);
    eg_TimeoutError = b ? new_error(module, "TimeoutError", b, "A wait or collective passed timeout_ms.") : NULL;
    Py_XDECREF(b);
    eg_StateError = new_error(module, "StateError", eg_Error,
                              "A call out of order: fetch before write, a hook called twice, a destroyed buffer.");
    if (!eg_InvalidArgumentError || !eg_BadIndexError || !eg_BusyError || !eg_PeerError || !eg_TimeoutError ||
        !eg_StateError)
        return -1;
    return 0;
}

static PyObject *error_type(engram_status_t st)
{
    switch (st) {
    case ENGRAM_ERR_INVALID:
    case ENGRAM_ERR_OVERFLOW:
        return eg_InvalidArgumentError;
    case ENGRAM_ERR_BAD_INDEX:
        return eg_BadIndexError;
    case ENGRAM_ERR_BUSY:
        return eg_BusyError;
    case ENGRAM_ERR_PEER:
        return eg_PeerError;
    case ENGRAM_ERR_TIMEOUT:
        return eg_TimeoutError;
    case ENGRAM_ERR_STATE:
        return eg_StateError;
    default:
        return eg_Error;
    }
}

/* Sets `type(message)` with status attributes. The library's error lines
 * the message carries are not logged as well (eg_log_drop_raised). */
static void set_error(PyObject *type, engram_status_t st, PyObject *message)
{
    const char *text = PyUnicode_AsUTF8(message);
    if (text != NULL)
        eg_log_drop_raised(text);
    else
        PyErr_Clear();
    PyObject *exc = PyObject_CallOneArg(type, message);
    if (exc == NULL)
        return;
    PyObject *code = PyLong_FromLong((long)st);
    PyObject *name = PyUnicode_FromString(engram_status_str(st));
    if (code && name) {
        PyObject_SetAttrString(exc, "status", code);
        PyObject_SetAttrString(exc, "status_name", name);
    }
    Py_XDECREF(code);
    Py_XDECREF(name);
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
}

PyObject *eg_raise_status(engram_status_t st, const char *what)
{
    return eg_raise_status_msg(st, what, engram_last_error());
}

PyObject *eg_raise_status_msg(engram_status_t st, const char *what, const char *detail)
{
    if (detail == NULL || detail[0] == '\0')
        detail = engram_status_str(st);
    /* the library's message that already begins with the call's name is not named twice */
    size_t n = strlen(what);
    PyObject *msg = strncmp(detail, what, n) == 0 && detail[n] == ':' ? PyUnicode_FromString(detail)
                                                                       : PyUnicode_FromFormat("%s: %s", what, detail);
    if (msg != NULL) {
        set_error(error_type(st), st, msg);
        Py_DECREF(msg);
    }
    return NULL;
}

PyObject *eg_raise(PyObject *type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg != NULL) {
        engram_status_t st = type == eg_InvalidArgumentError ? ENGRAM_ERR_INVALID
                             : type == eg_BusyError          ? ENGRAM_ERR_BUSY
                             : type == eg_StateError         ? ENGRAM_ERR_STATE
                             : type == eg_TimeoutError       ? ENGRAM_ERR_TIMEOUT
                                                             : ENGRAM_ERR_INVALID;
        set_error(type, st, msg);
        Py_DECREF(msg);
    }
    return NULL;
}

int64_t eg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
