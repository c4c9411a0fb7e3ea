/* Tensors in: any object with __dlpack__ (torch, numpy, cupy, ...), imported
 * as the DLPack protocol asks (stream passed to CUDA producers so their work
 * is ordered before ours; the capsule renamed "used_dltensor" once taken). */
#include <stdio.h>
#include <string.h>

#include "ext.h"

int eg_dl_is_host(const DLTensor *t)
{
    return t->device.device_type == kDLCPU || t->device.device_type == kDLCUDAHost;
}

const char *eg_dl_device_name(int device_type, char *buf, size_t len)
{
    switch (device_type) {
    case kDLCPU:
        return "CPU";
    case kDLCUDA:
        return "CUDA";
    case kDLCUDAHost:
        return "CUDA host (pinned)";
    case kDLOpenCL:
        return "OpenCL";
    case kDLVulkan:
        return "Vulkan";
    case kDLMetal:
        return "Metal";
    case kDLVPI:
        return "VPI";
    case kDLROCM:
        return "ROCm";
    case kDLROCMHost:
        return "ROCm host";
    case kDLExtDev:
        return "ext_dev";
    case kDLCUDAManaged:
        return "CUDA managed";
    case 14:
        return "oneAPI";
    case 15:
        return "WebGPU";
    case 16:
        return "Hexagon";
    case 17:
        return "MAIA";
    default:
        snprintf(buf, len, "DLPack device type %d", device_type);
        return buf;
    }
}

static int is_cuda_device(long type)
{
    return type == kDLCUDA || type == kDLCUDAManaged || type == kDLROCM;
}

static int contiguous(const DLTensor *t)
{
    if (t->strides == NULL)
        return 1;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] == 0)
            return 1; /* no elements: any strides will do */
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expect)
            return 0;
        expect *= t->shape[d];
    }
    return 1;
}

/* obj.__dlpack_device__()[0], or -1 with an exception set */
static long producer_device(PyObject *obj, const char *param)
{
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    if (dev == NULL) {
        PyErr_Clear();
        eg_raise(eg_InvalidArgumentError, "%s: expected a tensor or array supporting DLPack (__dlpack__), got %s",
                 param, Py_TYPE(obj)->tp_name);
        return -1;
    }
    long type = -1;
    if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) >= 1)
        type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
    Py_DECREF(dev);
    if (type < 0 && !PyErr_Occurred())
        eg_raise(eg_InvalidArgumentError, "%s: __dlpack_device__ returned no device type", param);
    return type;
}

/* The producer's own error from __dlpack__ (torch has no DLPack type for
 * bool) as an InvalidArgumentError naming the argument, the original as its
 * __cause__; an interrupt (not an Exception) stays what it is. */
static void refuse_export(const char *param)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return;
    PyObject *cause = eg_err_take();
    eg_raise(eg_InvalidArgumentError, "%s: could not be exported through DLPack: %S", param, cause);
    PyObject *exc = eg_err_take(); /* set either way: ours, or what formatting raised */
    PyException_SetCause(exc, cause); /* steals cause */
    eg_err_restore(exc);
}

int eg_dl_import(PyObject *obj, PyObject *stream, const char *param, eg_dl_in_t *out)
{
    long type = producer_device(obj, param);
    if (type < 0)
        return -1;
    PyObject *capsule;
    if (is_cuda_device(type) && stream != NULL && stream != Py_None) {
        /* the protocol spells CUDA's legacy default stream 1 (0 is ambiguous) */
        long handle = PyLong_Check(stream) ? PyLong_AsLong(stream) : -2;
        PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
        PyObject *kw = meth ? (handle == 0 ? Py_BuildValue("{s:i}", "stream", 1)
                                           : Py_BuildValue("{s:O}", "stream", stream))
                            : NULL;
        PyObject *noargs = PyTuple_New(0);
        capsule = kw && noargs ? PyObject_Call(meth, noargs, kw) : NULL;
        Py_XDECREF(meth);
        Py_XDECREF(kw);
        Py_XDECREF(noargs);
    } else {
        capsule = PyObject_CallMethod(obj, "__dlpack__", NULL);
    }
    if (capsule == NULL) {
        refuse_export(param);
        return -1;
    }
    DLManagedTensor *mt = PyCapsule_GetPointer(capsule, "dltensor");
    if (mt == NULL) {
        Py_DECREF(capsule);
        PyErr_Clear();
        eg_raise(eg_InvalidArgumentError, "%s: __dlpack__ did not return a 'dltensor' capsule", param);
        return -1;
    }
    /* ours from here: the producer's capsule destructor leaves a used one alone */
    if (PyCapsule_SetName(capsule, "used_dltensor") < 0) {
        Py_DECREF(capsule);
        return -1;
    }
    Py_DECREF(capsule);
    out->mt = mt;
    out->data = (char *)mt->dl_tensor.data + mt->dl_tensor.byte_offset;
    if (!contiguous(&mt->dl_tensor)) {
        eg_dl_release(out);
        eg_raise(eg_InvalidArgumentError, "%s: must be contiguous (row-major); call .contiguous() first", param);
        return -1;
    }
    return 0;
}

void eg_dl_release(eg_dl_in_t *in)
{
    if (in->mt != NULL && in->mt->deleter != NULL)
        in->mt->deleter(in->mt);
    in->mt = NULL;
    in->data = NULL;
}
