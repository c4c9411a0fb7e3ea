/* The _engram extension module: the types, the exceptions, and the
 * functions that need no object. */
#include "ext.h"

static PyObject *storage_size_hint(PyObject *self, PyObject *args)
{
    (void)self;
    uint64_t entries, max_rows;
    uint32_t row_bytes;
    if (!PyArg_ParseTuple(args, "O&O&O&", eg_arg_u63, &entries, eg_arg_u32, &row_bytes, eg_arg_u63, &max_rows))
        return NULL;
    engram_storage_hint_t h;
    eg_log_hold();
    engram_status_t st = engram_storage_size_hint(entries, row_bytes, max_rows, &h);
    if (st != ENGRAM_OK)
        eg_raise_status(st, "get_engram_storage_size_hint");
    eg_log_flush();
    if (st != ENGRAM_OK)
        return NULL;
    return Py_BuildValue("(KKK)", (unsigned long long)h.row_stride, (unsigned long long)h.cpu_table_bytes,
                         (unsigned long long)h.gpu_recv_bytes);
}

static PyObject *status_str(PyObject *self, PyObject *arg)
{
    (void)self;
    long st = PyLong_AsLong(arg);
    if (st == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(engram_status_str((engram_status_t)st));
}

static PyObject *host_identity(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    char id[ENGRAM_HOST_IDENTITY_MAX];
    eg_log_hold(); /* the error raised is not also logged */
    engram_status_t st = engram_host_identity(id, sizeof(id));
    PyObject *r = st == ENGRAM_OK ? PyUnicode_FromString(id) : eg_raise_status(st, "host_identity");
    eg_log_flush();
    return r;
}

static PyMethodDef module_methods[] = {
    {"fork_run", (PyCFunction)(void (*)(void))eg_fork_run, METH_VARARGS | METH_KEYWORDS,
     "fork_run(nranks, fn, local_size=0)\n--\n\nRuns fn(group) in nranks forked children (the fork provider); "
     "returns their exit codes."},
    {"storage_size_hint", storage_size_hint, METH_VARARGS,
     "storage_size_hint(entries_per_rank, row_bytes, max_rows)\n--\n\n(row_stride, cpu_table_bytes, gpu_recv_bytes)"},
    {"status_str", status_str, METH_O, "status_str(status)\n--\n\nName of a status code."},
    {"_config_values", eg_config_values, METH_VARARGS,
     "_config_values(config, keys)\n--\n\nThe effective value (text) of each key for a config dict: config over "
     "ENGRAM_<KEY> over ENGRAM_CONFIG_FILE over the default."},
    {"host_identity", host_identity, METH_NOARGS,
     "host_identity()\n--\n\nThis process's host as text, equal on two processes iff they are on one host (one "
     "kernel, network and pid namespace): what engram's 'same host' means everywhere."},
    {"_set_log_callback", eg_set_log_callback, METH_O,
     "_set_log_callback(fn)\n--\n\nSends the library's log lines to fn(level, file, line, msg) (level: a logging "
     "level), or back to stderr with None."},
    {"_check_int", eg_check_int, METH_VARARGS,
     "_check_int(name, value, low, high)\n--\n\nvalue as an int if operator.index() takes it (not a bool) and it "
     "lies in [low, high], else InvalidArgumentError naming the argument: the one check of integer arguments."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "engram._engram",
    .m_doc = "C extension of the engram package (use the engram package, not this module).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__engram(void)
{
    PyTypeObject *types[] = {&eg_GroupType, &eg_TableType, &eg_FetchType, &eg_ArrayType, &eg_HookType};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (eg_errors_init(m) < 0 || PyModule_AddObjectRef(m, "Group", (PyObject *)&eg_GroupType) < 0 ||
        PyModule_AddObjectRef(m, "Table", (PyObject *)&eg_TableType) < 0 ||
        PyModule_AddObjectRef(m, "Fetch", (PyObject *)&eg_FetchType) < 0 ||
        PyModule_AddObjectRef(m, "Array", (PyObject *)&eg_ArrayType) < 0 ||
        PyModule_AddObjectRef(m, "Hook", (PyObject *)&eg_HookType) < 0 ||
        PyModule_AddStringConstant(m, "LIBRARY_VERSION", ENGRAM_VERSION_STRING) < 0 ||
        PyModule_AddIntConstant(m, "ROW_ALIGN", ENGRAM_ROW_ALIGN) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
