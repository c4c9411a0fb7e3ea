/* The C-API side of the Python overhead measurement: the same fetch, wait
 * and release as engram.Buffer's hook, timed in a C loop with no Python in
 * between (examples/python/engram_fetch.py --overhead compares the two). */
#include "ext.h"

PyObject *eg_bench_c_fetch(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *table_obj, *indices, *stream = Py_None;
    int iters;
    if (!PyArg_ParseTuple(args, "O!Oi|O", &eg_TableType, &table_obj, &indices, &iters, &stream))
        return NULL;
    eg_table_t *t = (eg_table_t *)table_obj;
    if (t->table == NULL)
        return eg_raise(eg_StateError, "bench: the buffer has been destroyed");
    if (iters < 1)
        return eg_raise(eg_InvalidArgumentError, "bench: iters must be >= 1");
    int cuda = t->params.recv == ENGRAM_RECV_CUDA;
    void *cuda_stream = stream == Py_None ? NULL : PyLong_AsVoidPtr(stream);
    if (PyErr_Occurred())
        return NULL;
    eg_dl_in_t in = {0};
    if (eg_dl_import(indices, cuda ? stream : NULL, "bench: indices", &in) < 0)
        return NULL;
    const DLTensor *d = &in.mt->dl_tensor;
    if (d->ndim != 2 || d->dtype.code != kDLInt || d->dtype.bits != 64) {
        eg_dl_release(&in);
        return eg_raise(eg_InvalidArgumentError, "bench: indices must be int64 [num_tokens, num_entries_per_token]");
    }
    uint32_t tokens = (uint32_t)d->shape[0];
    int64_t issue_ns = 0, wait_ns = 0;
    engram_status_t st = ENGRAM_OK;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < iters && st == ENGRAM_OK; i++) {
        engram_fetch_t *f;
        int64_t t0 = eg_now_ns();
        st = cuda ? engram_fetch_on_stream(t->table, in.data, tokens, 0, cuda_stream, &f)
                  : engram_fetch(t->table, in.data, tokens, 0, &f);
        int64_t t1 = eg_now_ns();
        if (st != ENGRAM_OK)
            break;
        const void *rows;
        st = engram_wait(f, &rows, NULL);
        engram_fetch_release(f);
        int64_t t2 = eg_now_ns();
        issue_ns += t1 - t0;
        wait_ns += t2 - t1;
    }
    pthread_mutex_unlock(&t->lock);
    Py_END_ALLOW_THREADS
    eg_dl_release(&in);
    if (st != ENGRAM_OK)
        return eg_raise_status(st, "bench");
    return Py_BuildValue("(dd)", (double)issue_ns / iters, (double)wait_ns / iters);
}
