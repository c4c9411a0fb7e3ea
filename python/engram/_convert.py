"""Turning the extension's DLPack arrays into the caller's tensors: torch
tensors when the indices were torch tensors, numpy arrays when they were
numpy arrays, the arrays themselves (for any DLPack consumer) otherwise.
The dtype survives where the consumer has it; otherwise the same bits come
as unsigned integers of the element width (numpy has no bfloat16, torch 1.13
no float8)."""
import sys


def _torch_converter(rt):
    import torch

    wanted = getattr(torch, rt.name, None)  # None: torch has no such dtype (float8 on torch 1.13)
    from_dlpack = torch.from_dlpack if hasattr(torch, "from_dlpack") else torch.utils.dlpack.from_dlpack
    if wanted is not None and rt.name.startswith("float8"):
        def rows(a):
            return from_dlpack(a).view(wanted)
    else:
        def rows(a):
            return from_dlpack(a)
    return rows, from_dlpack


def _numpy_converter(rt):
    import numpy

    if rt.name == "bfloat16":
        def rows(a):
            return numpy.from_dlpack(a.view_bits())
    else:
        def rows(a):
            return numpy.from_dlpack(a)
    return rows, numpy.from_dlpack


def _identity(a):
    return a


def converters(indices, rt):
    """(rows converter, scales converter) for the consumer that `indices` belongs to."""
    mod = type(indices).__module__.split(".")[0]
    if mod == "torch":
        return _torch_converter(rt)
    if mod == "numpy" and "numpy" in sys.modules:
        return _numpy_converter(rt)
    return _identity, _identity
