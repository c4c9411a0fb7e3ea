/* The stream-ordered hook's bookkeeping (a recv='cuda' table made with
 * stream_ordered): the hook hands out a fetch's rows without waiting (they
 * are valid in the order of the fetch's stream), so the table keeps every
 * such fetch the library has not yet seen complete, and learns its outcome
 * later:
 *
 *   - reap (no waiting): each fetch the library now reports complete is
 *     done with; a failure or bad indices become the table's deferred
 *     error, which the next engram_fetch, hook call or synchronize()
 *     raises;
 *   - drain (waiting, GIL released, bounded by timeout_ms): the same for
 *     every fetch (synchronize, write, destroy), or for the oldest one whose
 *     Python views are gone when a fetch finds every receive slot taken.
 *
 * A tracked fetch whose Fetch object (and so every view of its rows) is
 * gone is handed over to the table instead of being released by a wait:
 * the table releases it, and drops the index tensor the kernel reads, once
 * the library has seen it complete. Every function here runs with the GIL
 * held. */
#include <stdlib.h>
#include <string.h>

#include "ext.h"

struct eg_pending {
    engram_fetch_t *f;
    eg_fetch_t *owner; /* borrowed: the Fetch whose views may live; NULL once handed over */
    uint32_t view_entries; /* entries per token of its views (a flat table's bad rows name (token, entry)) */
    eg_dl_in_t indices; /* handed over: what the kernel reads on the stream */
    int has_indices;
    PyObject *keep;
};

int eg_stream_track(eg_fetch_t *fx)
{
    eg_table_t *t = fx->table;
    if (t->num_pending == t->cap_pending) {
        int cap = t->cap_pending ? 2 * t->cap_pending : 8;
        eg_pending_t *p = PyMem_Realloc(t->pending, (size_t)cap * sizeof(*p));
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->pending = p;
        t->cap_pending = cap;
    }
    t->pending[t->num_pending++] = (eg_pending_t){.f = fx->f, .owner = fx, .view_entries = fx->view_entries};
    fx->tracked = 1;
    return 0;
}

static int find_owner(const eg_table_t *t, const eg_fetch_t *fx)
{
    for (int i = 0; i < t->num_pending; i++)
        if (t->pending[i].owner == fx)
            return i;
    return -1;
}

/* The entry of f now: another thread may have moved or finished entries
 * while this one was without the GIL (a wait, or a contended table lock). */
static int find_fetch(const eg_table_t *t, const engram_fetch_t *f)
{
    for (int i = 0; i < t->num_pending; i++)
        if (t->pending[i].f == f)
            return i;
    return -1;
}

void eg_stream_hand_over(eg_fetch_t *fx)
{
    eg_table_t *t = fx->table;
    int i = find_owner(t, fx);
    fx->tracked = 0;
    if (i < 0)
        return;
    eg_pending_t *p = &t->pending[i];
    p->owner = NULL;
    p->indices = fx->indices;
    p->has_indices = fx->has_indices;
    p->keep = fx->keep; /* the reference moves */
    fx->f = NULL;
    fx->has_indices = 0;
    fx->keep = NULL;
}

/* The outcome of a complete fetch (st: engram_test's or engram_wait's
 * status, message: the library's) into the deferred error, when it is
 * the first; later ones are counted. */
static void note_outcome(eg_table_t *t, const eg_pending_t *p, engram_status_t st, const char *message)
{
    uint64_t count = 0;
    uint32_t token = 0, entry = 0;
    if (st == ENGRAM_OK || st == ENGRAM_ERR_BAD_INDEX) {
        (void)engram_fetch_bad_indices(p->f, &count, &token, &entry);
        if (count == 0)
            return;
        st = ENGRAM_ERR_BAD_INDEX;
        if (t->flat && p->view_entries > 0) { /* the library's token is a row */
            entry = token % p->view_entries;
            token /= p->view_entries;
        }
    }
    if (t->deferred_status != ENGRAM_OK) {
        t->deferred_more++;
        return;
    }
    t->deferred_status = st;
    t->deferred_bad = count;
    t->deferred_token = token;
    t->deferred_entry = entry;
    if (st == ENGRAM_ERR_BAD_INDEX)
        snprintf(t->deferred_message, sizeof(t->deferred_message),
                 "%llu indices out of range, first at token %u entry %u; those rows were zero-filled",
                 (unsigned long long)count, token, entry);
    else
        snprintf(t->deferred_message, sizeof(t->deferred_message), "%s", message);
}

/* Done with entry i: the owner releases its fetch itself (at once: the
 * library has seen it complete, or given up on it); a handed-over one is
 * released here. */
static void finish(eg_table_t *t, int i)
{
    eg_pending_t p = t->pending[i];
    t->pending[i] = t->pending[--t->num_pending];
    if (p.owner != NULL) {
        p.owner->tracked = 0;
        return;
    }
    eg_table_lock(t);
    (void)engram_fetch_release(p.f); /* a timed-out one is retired, as its wait already said */
    eg_table_unlock(t);
    if (p.has_indices)
        eg_dl_release(&p.indices);
    Py_XDECREF(p.keep);
}

void eg_stream_reap(eg_table_t *t)
{
    for (int i = 0; i < t->num_pending;) {
        char message[1024] = "";
        engram_fetch_t *f = t->pending[i].f;
        int mark = eg_log_mark();
        eg_table_lock(t);
        engram_status_t st = engram_test(f);
        if (st != ENGRAM_OK && st != ENGRAM_INPROGRESS)
            snprintf(message, sizeof(message), "%s", engram_last_error());
        eg_table_unlock(t);
        eg_log_discard_since(mark); /* the outcome is raised later (the deferred error), not logged now */
        int at = find_fetch(t, f);
        if (st == ENGRAM_INPROGRESS || at < 0) {
            i = at < 0 ? 0 : at + 1; /* entries moved: start over (a few, at most fetch_slots) */
            continue;
        }
        note_outcome(t, &t->pending[at], st, message);
        finish(t, at); /* moves the last entry into at */
        i = at;
    }
}

/* Waits for entry i (GIL released, bounded by the library's timeout_ms)
 * and finishes it. */
static void drain_one(eg_table_t *t, int i)
{
    char message[1024] = "";
    engram_fetch_t *f = t->pending[i].f;
    engram_status_t st;
    int mark = eg_log_mark();
    eg_table_lock(t);
    Py_BEGIN_ALLOW_THREADS
    st = engram_wait(f, NULL, NULL);
    if (st != ENGRAM_OK && st != ENGRAM_ERR_BAD_INDEX)
        snprintf(message, sizeof(message), "%s", engram_last_error());
    Py_END_ALLOW_THREADS
    eg_table_unlock(t);
    eg_log_discard_since(mark); /* raised later, as the deferred error */
    int at = find_fetch(t, f);
    if (at < 0)
        return; /* another thread saw it complete meanwhile, and finished it */
    note_outcome(t, &t->pending[at], st, message);
    finish(t, at);
}

void eg_stream_drain(eg_table_t *t)
{
    while (t->num_pending > 0)
        drain_one(t, t->num_pending - 1);
}

int eg_stream_drain_handed_over(eg_table_t *t)
{
    /* entries are unordered once finish() moved one; any handed-over one
     * frees a slot, and every one of them is older than the fetch asking */
    for (int i = 0; i < t->num_pending; i++)
        if (t->pending[i].owner == NULL) {
            drain_one(t, i);
            return 1;
        }
    return 0;
}

int eg_stream_raise_deferred(eg_table_t *t, const char *what)
{
    if (t->deferred_status == ENGRAM_OK)
        return 0;
    char more[96] = "";
    if (t->deferred_more > 0)
        snprintf(more, sizeof(more), " (and %llu later fetches failed or had bad indices)",
                 (unsigned long long)t->deferred_more);
    PyObject *msg = PyUnicode_FromFormat("an earlier stream-ordered fetch: %s%s", t->deferred_message, more);
    engram_status_t st = t->deferred_status;
    uint64_t count = t->deferred_bad;
    uint32_t token = t->deferred_token, entry = t->deferred_entry;
    t->deferred_status = ENGRAM_OK;
    t->deferred_more = 0;
    if (msg == NULL)
        return -1;
    eg_raise_status_msg(st, what, PyUnicode_AsUTF8(msg));
    Py_DECREF(msg);
    if (st == ENGRAM_ERR_BAD_INDEX) {
        PyObject *exc = eg_err_take();
        PyObject *c = PyLong_FromUnsignedLongLong(count), *ft = PyLong_FromUnsignedLong(token),
                 *fe = PyLong_FromUnsignedLong(entry);
        if (exc != NULL && c && ft && fe) {
            PyObject_SetAttrString(exc, "count", c);
            PyObject_SetAttrString(exc, "first_token", ft);
            PyObject_SetAttrString(exc, "first_entry", fe);
            PyObject_SetAttrString(exc, "rows", Py_None); /* their views were the caller's, long since */
            PyObject_SetAttrString(exc, "sf", Py_None);
        }
        Py_XDECREF(c);
        Py_XDECREF(ft);
        Py_XDECREF(fe);
        if (exc != NULL)
            eg_err_restore(exc);
    }
    return -1;
}

void eg_stream_free(eg_table_t *t)
{
    /* a table never destroyed: what its handed-over fetches hold stays
     * with them (a kernel may still read the indices) */
    PyMem_Free(t->pending);
    t->pending = NULL;
    t->num_pending = t->cap_pending = 0;
}
