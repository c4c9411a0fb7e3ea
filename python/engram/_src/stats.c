/* Table.stats(): engram_table_stats as a dict. */
#include "ext.h"

PyObject *eg_table_stats(PyObject *obj, PyObject *noargs)
{
    (void)noargs;
    eg_table_t *self = (eg_table_t *)obj;
    if (self->table == NULL)
        return eg_raise(eg_StateError, "stats: the buffer has been destroyed");
    engram_table_stats_t s = {.size = sizeof(s)};
    eg_log_hold(); /* the error raised is not also logged */
    engram_status_t st = engram_table_stats(self->table, &s);
    if (st != ENGRAM_OK)
        eg_raise_status(st, "stats");
    eg_log_flush();
    if (st != ENGRAM_OK)
        return NULL;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:s,s:i,s:O,s:K}", "fetches",
                         (unsigned long long)s.fetches, "rows", (unsigned long long)s.rows, "bytes",
                         (unsigned long long)s.bytes, "bad_rows", (unsigned long long)s.bad_rows, "repeats",
                         (unsigned long long)s.repeats, "cache_rows", (unsigned long long)s.cache_rows,
                         "cache_hits", (unsigned long long)s.cache_hits, "wait_s", (double)s.wait_ns * 1e-9, "path",
                         s.path, "gather_threads", s.gather_threads, "shard_huge_pages",
                         s.shard_huge_pages ? Py_True : Py_False, "shard_bytes", (unsigned long long)s.shard_bytes);
}
