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
 * the library ends it in stream order (engram_fetch_release_ordered), so
 * its slot serves the next fetch on the stream at once, and the table
 * drops the index tensor the kernel reads when engram_table_poll_released
 * reports it; where the library refuses that (rows that need the host),
 * the table releases it once the library has seen it complete. Every
 * function here runs with the GIL held. */
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

struct eg_released {
    uint32_t view_entries;
    eg_dl_in_t indices;
    int has_indices;
    PyObject *keep;
    int next_free; /* index + 1 of the next free entry; 0: none */
};

/* A free entry's index (its cookie), or -1 without memory. */
static int released_take(eg_table_t *t)
{
    if (t->free_released == 0) {
        int cap = t->cap_released ? 2 * t->cap_released : 16;
        eg_released_t *r = PyMem_Realloc(t->released, (size_t)cap * sizeof(*r));
        if (r == NULL)
            return -1;
        for (int i = cap - 1; i >= t->cap_released; i--)
            r[i].next_free = i == cap - 1 ? 0 : i + 2;
        t->free_released = t->cap_released + 1;
        t->released = r;
        t->cap_released = cap;
    }
    int i = t->free_released - 1;
    t->free_released = t->released[i].next_free;
    t->num_released++;
    return i;
}

static void released_put(eg_table_t *t, int i)
{
    eg_released_t *r = &t->released[i];
    if (r->has_indices)
        eg_dl_release(&r->indices);
    r->has_indices = 0;
    Py_CLEAR(r->keep);
    r->next_free = t->free_released;
    t->free_released = i + 1;
    t->num_released--;
}

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

/* Ends the handed-over entry of f in stream order, its kernel's inputs
 * moving to a released entry; left pending where the library refuses. */
static void release_ordered(eg_table_t *t, engram_fetch_t *f)
{
    int r = released_take(t);
    if (r < 0)
        return;
    int mark = eg_log_mark();
    eg_table_lock(t); /* may let other threads run: entries may move */
    engram_status_t st = t->table != NULL ? engram_fetch_release_ordered(f, (uint64_t)r) : ENGRAM_ERR_STATE;
    eg_table_unlock(t);
    eg_log_discard_since(mark); /* a refusal keeps the entry pending: nothing to report */
    int i = find_fetch(t, f);
    if (st != ENGRAM_OK || i < 0) {
        t->released[r].has_indices = 0;
        t->released[r].keep = NULL;
        released_put(t, r);
        return;
    }
    eg_pending_t p = t->pending[i];
    t->pending[i] = t->pending[--t->num_pending];
    t->released[r].view_entries = p.view_entries;
    t->released[r].indices = p.indices;
    t->released[r].has_indices = p.has_indices;
    t->released[r].keep = p.keep; /* the reference moves */
}

void eg_stream_hand_over(eg_fetch_t *fx)
{
    eg_table_t *t = fx->table;
    int i = find_owner(t, fx);
    fx->tracked = 0;
    if (i < 0)
        return;
    eg_pending_t *p = &t->pending[i];
    engram_fetch_t *f = p->f;
    p->owner = NULL;
    p->indices = fx->indices;
    p->has_indices = fx->has_indices;
    p->keep = fx->keep; /* the reference moves */
    fx->f = NULL;
    fx->has_indices = 0;
    fx->keep = NULL;
    release_ordered(t, f);
}

/* A complete fetch's outcome (st OK or BAD_INDEX with its bad-index
 * report, or the failure and the library's message) into the deferred
 * error, when it is the first; later ones are counted. */
static void note(eg_table_t *t, engram_status_t st, uint64_t count, uint32_t token, uint32_t entry,
                 uint32_t view_entries, const char *message)
{
    if (st == ENGRAM_OK || st == ENGRAM_ERR_BAD_INDEX) {
        if (count == 0)
            return;
        st = ENGRAM_ERR_BAD_INDEX;
        if (t->flat && view_entries > 0) { /* the library's token is a row */
            entry = token % view_entries;
            token /= view_entries;
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

/* The same for a tracked fetch: st is engram_test's or engram_wait's. */
static void note_outcome(eg_table_t *t, const eg_pending_t *p, engram_status_t st, const char *message)
{
    uint64_t count = 0;
    uint32_t token = 0, entry = 0;
    if (st == ENGRAM_OK || st == ENGRAM_ERR_BAD_INDEX)
        (void)engram_fetch_bad_indices(p->f, &count, &token, &entry);
    note(t, st, count, token, entry, p->view_entries, message);
}

enum { POLL, WAIT_ONE, WAIT_ALL };

/* The released fetches the library reports complete: their outcomes
 * noted, their inputs dropped. WAIT_ONE / WAIT_ALL wait (GIL released,
 * bounded by timeout_ms) for one / every one still running; a timeout
 * becomes the deferred error. */
static void reap_released(eg_table_t *t, int mode)
{
    int waited = 0;
    while (t->num_released > 0) {
        engram_fetch_completion_t c[64];
        uint32_t n = 0;
        int wait = mode == WAIT_ALL || (mode == WAIT_ONE && !waited);
        char message[1024] = "";
        int mark = eg_log_mark();
        eg_table_lock(t);
        engram_status_t st = ENGRAM_ERR_STATE;
        if (t->table != NULL && !wait) { /* returns at once: no GIL round trip */
            st = engram_table_poll_released(t->table, c, 64, 0, &n, NULL);
        } else if (t->table != NULL) {
            Py_BEGIN_ALLOW_THREADS
            st = engram_table_poll_released(t->table, c, 64, 1, &n, NULL);
            Py_END_ALLOW_THREADS
            if (st != ENGRAM_OK)
                snprintf(message, sizeof(message), "%s", engram_last_error());
        }
        eg_table_unlock(t);
        eg_log_discard_since(mark); /* raised later, as the deferred error */
        if (st != ENGRAM_OK) {
            if (st == ENGRAM_ERR_TIMEOUT)
                note(t, st, 0, 0, 0, 0, message);
            return;
        }
        for (uint32_t k = 0; k < n; k++) {
            eg_released_t *r = &t->released[c[k].cookie];
            char failed[160] = "";
            if (c[k].status != ENGRAM_OK && c[k].status != ENGRAM_ERR_BAD_INDEX)
                snprintf(failed, sizeof(failed), "a GPU fetch failed (%s)", engram_status_str(c[k].status));
            note(t, c[k].status, c[k].bad_count, c[k].first_bad_token, c[k].first_bad_entry, r->view_entries,
                 failed);
            released_put(t, (int)c[k].cookie);
        }
        waited |= n > 0;
        if (n < 64 && (mode == POLL || (mode == WAIT_ONE && waited)))
            return;
    }
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
    reap_released(t, POLL);
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
    reap_released(t, WAIT_ALL);
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
    /* slots released in stream order on other streams, still running */
    int before = t->num_released;
    if (before > 0)
        reap_released(t, WAIT_ONE);
    return t->num_released < before;
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
    PyMem_Free(t->released);
    t->released = NULL;
    t->num_released = t->cap_released = t->free_released = 0;
}
