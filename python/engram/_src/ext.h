/* Shared declarations of the _engram extension: the exception types, the
 * DLPack import/export helpers and the object types of each source file.
 * The extension includes only the installed public header. */
#ifndef ENGRAM_PY_EXT_H
#define ENGRAM_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>

#include <dlpack/dlpack.h>
#include <engram/engram.h>

/* exceptions (errors.c) */
extern PyObject *eg_Error, *eg_InvalidArgumentError, *eg_BadIndexError, *eg_BusyError, *eg_PeerError,
    *eg_TimeoutError, *eg_StateError;
int eg_errors_init(PyObject *module);
/* Raises the exception for a failed library call: the class from the
 * status, the message "<what>: <engram_last_error()>" (read on the calling
 * thread, so call it right after the failing call). Returns NULL. */
PyObject *eg_raise_status(engram_status_t st, const char *what);
/* The same with the library's message captured earlier. */
PyObject *eg_raise_status_msg(engram_status_t st, const char *what, const char *detail);
/* Raises `type` with a formatted message. Returns NULL. */
PyObject *eg_raise(PyObject *type, const char *fmt, ...);

/* The exception now set, taken out as one object (PyErr_GetRaisedException
 * arrived only in 3.12), or NULL; and putting one back (steals it). */
static inline PyObject *eg_err_take(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL)
        return NULL;
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}
static inline void eg_err_restore(PyObject *exc)
{
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
}

/* Integers in (int_args.c): *out = o when operator.index() takes o (an
 * int, numpy's integer scalars; never a bool) and it lies in [low, high]; else InvalidArgumentError "<name>: must be an integer in
 * [low, high], got o". Returns 0 or -1. The "O&" converters do the same for
 * [0, UINT32_MAX] into a uint32_t and [0, INT64_MAX] into a uint64_t,
 * instead of wrapping as 'I' and 'K' do. */
int eg_int_in(PyObject *o, const char *name, long long low, long long high, long long *out);
int eg_arg_u32(PyObject *o, void *out);
int eg_arg_u63(PyObject *o, void *out);
/* _check_int(name, value, low, high): eg_int_in for the Python layer. */
PyObject *eg_check_int(PyObject *self, PyObject *args);

/* _set_log_callback(fn or None): the library's log lines to fn (log_bridge.c). */
PyObject *eg_set_log_callback(PyObject *self, PyObject *fn);
/* Log what the caller cannot see, raise what it can (log_bridge.c): between
 * eg_log_hold() and eg_log_flush() (nested: the outermost flush counts) the
 * ERROR lines the library logs on this thread are held; raising an
 * exception (errors.c) drops those its message carries, and eg_log_flush
 * (GIL held) logs the others. eg_log_discard_since(eg_log_mark()) drops
 * what a call logged after the mark (a call made only to join a
 * collective, whose refusal is this rank's own). */
void eg_log_hold(void);
void eg_log_flush(void);
int eg_log_mark(void);
void eg_log_discard_since(int mark);
void eg_log_drop_raised(const char *message);
/* In a child forked during a hold: the hold and its lines are the
 * parent's; the child logs its own lines as they come. */
void eg_log_forget(void);

/* Whether the interpreter is finalizing (or gone): no Python may run, and
 * PyGILState_Ensure must not be called. */
static inline int eg_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return !Py_IsInitialized() || Py_IsFinalizing();
#else
    return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

/* monotonic clock in nanoseconds */
int64_t eg_now_ns(void);

/* DLPack input (dlpack_in.c): one imported tensor, kept until eg_dl_release. */
typedef struct eg_dl_in {
    DLManagedTensor *mt; /* owned: its deleter runs in eg_dl_release */
    void *data;          /* dl_tensor.data + byte_offset */
} eg_dl_in_t;
/* Imports obj through obj.__dlpack__ (passing `stream` where the producer
 * is a CUDA device, as the protocol asks). `param` names the argument in
 * errors. Refuses non-contiguous tensors. Returns 0, or -1 with an
 * exception set. */
int eg_dl_import(PyObject *obj, PyObject *stream, const char *param, eg_dl_in_t *out);
void eg_dl_release(eg_dl_in_t *in);
int eg_dl_is_host(const DLTensor *t);
/* A DLPack device type's name ("CPU", "CUDA", "Metal", ..., "device type
 * N" for one this header does not know), for refusals that name it. */
const char *eg_dl_device_name(int device_type, char *buf, size_t len);

/* groups (group.c) */
typedef struct eg_group_obj eg_group_obj_t;
extern PyTypeObject eg_GroupType;
/* The group behind a Group object, or NULL with an exception set. */
engram_group_t *eg_group_get(PyObject *obj);
/* The exception a Python callback raised during the last collective, if
 * any (a new reference, cleared from the group), else NULL. */
PyObject *eg_group_take_callback_error(PyObject *obj);
/* Chains the saved callback exception as __cause__ of the exception now
 * set; without one, the exception with which a callback failed the group
 * earlier (its later collectives are refused), if any. */
void eg_group_chain_error(PyObject *group);
PyObject *eg_fork_run(PyObject *self, PyObject *args, PyObject *kwargs);
/* A Group object around a group this module does not own (the fork
 * launcher's children). */
PyObject *eg_group_wrap_borrowed(PyTypeObject *type, engram_group_t *g);
void eg_group_invalidate(PyObject *obj);

/* tables and fetches (table.c, fetch.c, array.c, stream_order.c) */
typedef struct eg_pending eg_pending_t;   /* stream_order.c */
typedef struct eg_released eg_released_t; /* stream_order.c */
/* torch's CUDA entry points a recv='cuda' table's short fetch path asks
 * (Table._set_torch, from engram.Buffer; all NULL until then) */
typedef struct eg_torch {
    PyObject *tensor;     /* torch.Tensor: the exact type the short path takes */
    PyObject *int64, *strided;
    PyObject *device;     /* () -> the current device's index */
    PyObject *stream;     /* (device) -> its current stream, a cudaStream_t as an int */
    PyObject *capturing;  /* () -> whether the current stream is capturing a CUDA graph; None: not asked */
    PyObject *conv;       /* the torch Converter (_convert.py) the hooks of torch indices use */
    PyObject *on_device;  /* (device, fn) -> fn() with that device current */
} eg_torch_t;

/* A page range of receive memory that detached views outlive (orphan.c). */
typedef struct eg_orphan {
    uintptr_t lo, hi; /* hi 0: none */
    int mapped;       /* remapped after the library freed it; unmapped when the table goes */
} eg_orphan_t;
enum { EG_ORPHAN_ROWS, EG_ORPHAN_SCALES, EG_ORPHAN_KINDS };

typedef struct eg_table {
    PyObject_HEAD
    engram_context_t *ctx;
    engram_table_t *table;
    PyObject *group; /* the Group object, kept alive: the context borrows it */
    engram_table_params_t params;
    pthread_mutex_t lock; /* serialises library calls on this table (engram.h: write,
                             destroy and owner-progress fetches must not overlap) */
    DLDataType row_dtype; /* element type of the exported rows */
    uint32_t hidden;      /* elements per entry */
    int device_id;        /* CUDA device of recv='cuda' rows */
    int64_t timeout_ns;   /* the context's timeout_ms, for the sliced wait */
    int queues;
    int nranks, local_size;
    /* stream_ordered (recv='cuda'): the hook hands out rows without waiting
     * (stream_order.c); the fetches not yet seen complete, and the first
     * error of one seen since, raised by the next fetch, hook or
     * synchronize() */
    int stream_ordered;
    /* flat (entries_per_token 1 in the library): a fetch of [T, K]
     * indices, any K, is T * K rows, handed out as [T, K * hidden] with
     * row-major scales [T, K * packs] (engram.ElasticBuffer, which learns
     * K at each fetch as DeepEP does) */
    int flat;
    eg_pending_t *pending;
    int num_pending, cap_pending;
    /* fetches the library ended in stream order (engram_fetch_release_ordered),
     * by cookie: what their kernels read, until the library reports them */
    eg_released_t *released;
    int num_released, cap_released, free_released;
    engram_status_t deferred_status; /* ENGRAM_OK: none */
    uint64_t deferred_bad, deferred_more;
    uint32_t deferred_token, deferred_entry;
    char deferred_message[1024];
    eg_torch_t torch;
    struct eg_fetch *live; /* every Fetch object alive, newest first (GIL): detach_fetches() */
    eg_orphan_t orphans[EG_ORPHAN_KINDS];
} eg_table_t;
extern PyTypeObject eg_TableType;
/* orphan.c: note the memory a detached fetch's views span (recv='host');
 * map those pages again once the library has freed them (after its
 * destroy); unmap them when the table goes. */
void eg_orphan_note(eg_table_t *t, int kind, const void *addr, size_t bytes);
void eg_orphan_remap(eg_table_t *t);
void eg_orphan_free(eg_table_t *t);
/* _config_values(config, keys): the effective value of each key (text) for a config dict (table.c). */
PyObject *eg_config_values(PyObject *self, PyObject *args);
/* Table.stats() (stats.c); Table.cache_rows(rows), Table.cache_profile(indices, max_rows) (cache.c). */
PyObject *eg_table_stats(PyObject *self, PyObject *noargs);
PyObject *eg_table_cache_rows(PyObject *self, PyObject *args);
PyObject *eg_table_cache_profile(PyObject *self, PyObject *args);
/* Takes the table lock without holding the GIL while blocked. */
void eg_table_lock(eg_table_t *t);
void eg_table_unlock(eg_table_t *t);

typedef struct eg_fetch {
    PyObject_HEAD
    eg_table_t *table; /* strong reference: the table outlives its fetches */
    engram_fetch_t *f; /* NULL once released */
    uint32_t num_tokens;   /* the library's tokens (rows on a flat table) */
    uint32_t view_tokens, view_entries; /* the views' [tokens, entries per token] */
    unsigned flags;
    int waited;          /* the hook has handed out its rows (or a BadIndexError carrying them) */
    int waiting;         /* a thread is in wait() now (without the GIL) */
    engram_status_t failed; /* the library ended the fetch with this error (the hook raises it again) */
    PyObject *fail_message; /* its message (str), as engram_last_error() had it then */
    int captured;        /* issued during CUDA graph capture (the library says): never waited on the host */
    Py_ssize_t views;    /* live Array objects and exported DLPack tensors */
    eg_dl_in_t indices;  /* recv='cuda': the device indices, kept until release */
    int has_indices;
    PyObject *keep;      /* recv='cuda', torch fast path: the index tensor, kept until release */
    int tracked;         /* its rows were handed out in stream order and the table awaits its completion */
    struct eg_fetch *live_prev, *live_next; /* the table's list of live Fetch objects */
} eg_fetch_t;
extern PyTypeObject eg_FetchType;
PyObject *eg_fetch_issue(eg_table_t *t, PyObject *indices, int num_qps, int col_major, PyObject *stream);
/* The same from (data_ptr, rows, cols, bits, DLPack device type, num_qps,
 * col_major, stream, keep): torch tensors' attributes, read in
 * Python at a fraction of the cost of torch's __dlpack__ (Table._fetch_ptr:
 * private, as it reads whatever address it is given; engram.Buffer passes
 * only a dense CPU or CUDA tensor's). */
PyObject *eg_fetch_issue_ptr(eg_table_t *t, PyObject *args);
/* The same from the parsed attributes (keep: the tensor they are of). */
PyObject *eg_fetch_issue_addr(eg_table_t *t, const void *data, long long rows, long long cols, int bits,
                              int device_type, int num_qps, int col_major, PyObject *stream, PyObject *keep);
/* Table.detach_fetches() (fetch.c): every fetch of the table not released
 * yet is detached (engram.ElasticBuffer's destroy, DeepEP's lifetime). */
PyObject *eg_table_detach_fetches(PyObject *self, PyObject *noargs);
/* The hook's wait: (rows, sf) as Arrays or (as_capsules) capsules (fetch.c). */
PyObject *eg_fetch_wait_views(eg_fetch_t *self, int as_capsules);
/* (count, first_token, first_entry) of the fetch's out-of-range indices;
 * a captured fetch's: its graph's last replay's, where the table's path
 * tallies them per replay (host_gather), else (0, 0, 0). */
PyObject *eg_fetch_bad_indices(eg_fetch_t *self);

/* engram.Hook (hook.c): a fetch, the converter its views take, and the
 * CUDA device current while it waits (-1: none). */
extern PyTypeObject eg_HookType;
PyObject *eg_hook_new(eg_fetch_t *fetch, PyObject *conv, int device);
/* Table._fetch_fast(indices) (fetch_fast.c): the Hook of the common
 * recv='cuda' fetch, or None when the call is not that one. */
PyObject *eg_fetch_fast(PyObject *self, PyObject *indices);
PyObject *eg_table_set_torch(PyObject *self, PyObject *args);
void eg_torch_clear(eg_torch_t *tc);
/* 1 when `device` is torch's current CUDA device, 0 when not, -1 with an exception set (fetch_fast.c). */
int eg_torch_device_is(const eg_torch_t *tc, int device);

/* stream_order.c (GIL held): tracks fx, whose rows the hook handed out
 * before the library saw it complete (0, or -1 with MemoryError); hands a
 * tracked fetch whose views are gone over to the table (fx->f becomes
 * NULL: the table releases it once complete); reaps what is complete
 * without waiting; drains by waiting for every tracked fetch, or for one
 * handed-over fetch (1 if there was one); raises the deferred error as
 * "<what>: ..." (-1) or returns 0 when there is none. */
int eg_stream_track(eg_fetch_t *fx);
void eg_stream_hand_over(eg_fetch_t *fx);
void eg_stream_reap(eg_table_t *t);
void eg_stream_drain(eg_table_t *t);
int eg_stream_drain_handed_over(eg_table_t *t);
int eg_stream_raise_deferred(eg_table_t *t, const char *what);
void eg_stream_free(eg_table_t *t);

extern PyTypeObject eg_ArrayType;
/* A 2-D view into a fetch's receive slot; holds the fetch (and counts as one of its views). */
PyObject *eg_array_new(eg_fetch_t *owner, void *data, int64_t rows, int64_t cols, int64_t stride0, int64_t stride1,
                       DLDataType dtype, DLDevice device);

/* A 'dltensor' capsule viewing the slot (counts as one of owner's views until its deleter runs). */
PyObject *eg_export_capsule(eg_fetch_t *owner, void *data, int64_t rows, int64_t cols, int64_t stride0,
                            int64_t stride1, DLDataType dtype, DLDevice device);


#endif
