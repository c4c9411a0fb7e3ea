/* The library's log lines as Python logging records: _set_log_callback(fn)
 * installs a handler (engram_log_set_handler) that calls
 * fn(level, file, line, msg) with level already a `logging` level
 * (engram/_log.py makes the record). The library calls the handler from
 * whichever thread logs, with or without the GIL (a wait, a collective and
 * the transports' own threads run without it), so it takes the GIL with
 * PyGILState_Ensure and never runs Python while the interpreter finalizes:
 * a line logged then goes to stderr. The callback is read and replaced
 * only under the GIL, so replacing it never frees one in use. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <engram/log.h>

#include "ext.h"

static PyObject *log_callback; /* the GIL guards it */

/* logging's numbers; a level below debug (engram's finest) maps to debug. */
static int logging_level(engram_log_level_t level)
{
    switch (level) {
    case ENGRAM_LOG_LEVEL_ERROR:
        return 40;
    case ENGRAM_LOG_LEVEL_WARN:
        return 30;
    case ENGRAM_LOG_LEVEL_INFO:
        return 20;
    default:
        return 10;
    }
}

static int finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

static void to_stderr(int level, const char *file, int line, const char *msg)
{
    fprintf(stderr, "engram[%d] level %d %s:%d %s\n", (int)getpid(), level, file, line, msg);
}

static void call_back(int level, const char *file, int line, const char *msg)
{
    /* The thread may be inside a call that has already set an exception:
     * the callback must neither see nor clear it. */
    PyObject *pending = eg_err_take();
    PyObject *fn = Py_NewRef(log_callback);
    PyObject *pyfile = PyUnicode_DecodeUTF8(file, (Py_ssize_t)strlen(file), "backslashreplace");
    PyObject *pymsg = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "backslashreplace");
    PyObject *r = NULL;
    if (pyfile != NULL && pymsg != NULL)
        r = PyObject_CallFunction(fn, "iOiO", level, pyfile, line, pymsg);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        /* Ctrl-C's handler ran inside the logging call (Python runs pending
         * signal handlers at any bytecode): arm it again, so the wait or
         * call this line came from raises it at its next signal check
         * instead of the interrupt being lost. */
        PyErr_Clear();
        PyErr_SetInterrupt();
    } else if (r == NULL) {
        PyErr_WriteUnraisable(fn); /* nobody to raise to: the library's caller is C */
    }
    Py_XDECREF(r);
    Py_XDECREF(pymsg);
    Py_XDECREF(pyfile);
    Py_DECREF(fn);
    if (pending != NULL)
        eg_err_restore(pending);
}

static void handler(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg;
    int pylevel = logging_level(level);
    if (finalizing()) {
        to_stderr(pylevel, file, line, msg);
        return;
    }
    PyGILState_STATE gil = PyGILState_Ensure();
    if (log_callback != NULL)
        call_back(pylevel, file, line, msg);
    else
        to_stderr(pylevel, file, line, msg); /* uninstalled while this line waited for the GIL */
    PyGILState_Release(gil);
}

PyObject *eg_set_log_callback(PyObject *self, PyObject *fn)
{
    (void)self;
    if (fn != Py_None && !PyCallable_Check(fn))
        return eg_raise(eg_InvalidArgumentError, "_set_log_callback: fn must be callable or None");
    PyObject *old = log_callback;
    log_callback = fn == Py_None ? NULL : Py_NewRef(fn);
    engram_log_set_handler(log_callback != NULL ? handler : NULL, NULL);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}
