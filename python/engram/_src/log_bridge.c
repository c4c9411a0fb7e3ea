/* The library's log lines as Python logging records: _set_log_callback(fn)
 * installs a handler (engram_log_set_handler) that calls
 * fn(level, file, line, msg) with level already a `logging` level
 * (engram/_log.py makes the record). The library calls the handler from
 * whichever thread logs, with or without the GIL (a wait, a collective and
 * the transports' own threads run without it), so it takes the GIL with
 * PyGILState_Ensure and never runs Python while the interpreter finalizes:
 * a line logged then goes to stderr. The callback is read and replaced
 * only under the GIL, so replacing it never frees one in use.
 *
 * Log what the caller cannot see, raise what it can: the library logs an
 * error line where it detects the error and returns its status, which the
 * extension raises with the same text. While a call into the library is
 * held (eg_log_hold .. eg_log_flush, on this thread), its ERROR lines wait;
 * the exception raised for the call drops those its message carries
 * (eg_log_drop_raised, from errors.c), and the rest are logged when the
 * outermost hold ends. Other threads' lines (a transport's own) and the
 * other levels pass at once. */
#include <stdio.h>
#include <stdlib.h>
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

/* ---- lines held while a call runs ---- */

enum { HELD_MAX = 32 };

typedef struct held_line {
    int level, line, dropped;
    char *file, *msg;
} held_line_t;

static _Thread_local struct {
    int depth;
    int n;
    held_line_t lines[HELD_MAX];
} held;

void eg_log_hold(void)
{
    held.depth++;
}

int eg_log_mark(void)
{
    return held.n;
}

void eg_log_discard_since(int mark)
{
    for (int i = mark; i < held.n; i++)
        held.lines[i].dropped = 1;
}

/* The line's text without the " (<status>)" the library appends to an
 * error line, as engram_last_error() (the raised message's detail) has it. */
static size_t text_len(const char *msg)
{
    size_t n = strlen(msg);
    if (n > 0 && msg[n - 1] == ')') {
        const char *open = strrchr(msg, '(');
        if (open != NULL && open > msg + 1 && open[-1] == ' ')
            return (size_t)(open - 1 - msg);
    }
    return n;
}

static int contains(const char *hay, const char *needle, size_t n)
{
    if (n == 0)
        return 0;
    for (const char *p = strchr(hay, needle[0]); p != NULL; p = strchr(p + 1, needle[0]))
        if (strncmp(p, needle, n) == 0)
            return 1;
    return 0;
}

void eg_log_drop_raised(const char *message)
{
    if (message == NULL)
        return;
    for (int i = 0; i < held.n; i++)
        if (!held.lines[i].dropped && contains(message, held.lines[i].msg, text_len(held.lines[i].msg)))
            held.lines[i].dropped = 1;
}

static void emit(int pylevel, const char *file, int line, const char *msg);

void eg_log_flush(void)
{
    if (held.depth > 0 && --held.depth > 0)
        return;
    /* emitting runs Python (the logging call), which may log and hold anew:
     * take the lines out first */
    int n = held.n;
    held_line_t lines[HELD_MAX];
    memcpy(lines, held.lines, (size_t)n * sizeof(lines[0]));
    held.n = 0;
    for (int i = 0; i < n; i++) {
        if (!lines[i].dropped)
            emit(lines[i].level, lines[i].file, lines[i].line, lines[i].msg);
        free(lines[i].file);
        free(lines[i].msg);
    }
}

void eg_log_forget(void)
{
    for (int i = 0; i < held.n; i++) {
        free(held.lines[i].file);
        free(held.lines[i].msg);
    }
    held.n = 0;
    held.depth = 0;
}

/* Keeps the line for the call's end; 0 when it is not to be held (then
 * the caller logs it now). */
static int hold_line(int pylevel, const char *file, int line, const char *msg)
{
    if (held.depth == 0 || pylevel < 40 || held.n == HELD_MAX)
        return 0;
    char *f = strdup(file), *m = strdup(msg);
    if (f == NULL || m == NULL) {
        free(f);
        free(m);
        return 0;
    }
    held.lines[held.n++] = (held_line_t){.level = pylevel, .line = line, .file = f, .msg = m};
    return 1;
}

static void emit(int pylevel, const char *file, int line, const char *msg)
{
    if (log_callback != NULL && !eg_finalizing())
        call_back(pylevel, file, line, msg);
    else
        to_stderr(pylevel, file, line, msg);
}

static void handler(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg;
    int pylevel = logging_level(level);
    if (hold_line(pylevel, file, line, msg))
        return; /* this thread's call is held: no GIL needed */
    if (eg_finalizing()) {
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
