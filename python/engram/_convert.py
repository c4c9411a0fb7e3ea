"""Turning the extension's DLPack arrays into the caller's tensors: torch
tensors when the indices were torch tensors, numpy arrays when they were
numpy arrays, the arrays themselves (for any DLPack consumer) otherwise.
The dtype survives where the consumer has it; otherwise the same bits come
as unsigned integers of the element width (numpy has no bfloat16, torch 1.13
no float8)."""
import sys
from typing import Any, Callable, NamedTuple


class Converter(NamedTuple):
    capsules: bool            # the hook's views come as DLPack capsules (else as engram.Array)
    rows: Callable[[Any], Any]
    sf: Callable[[Any], Any]
    array_rows: Callable[[Any], Any]  # for the Arrays a BadIndexError carries
    array_sf: Callable[[Any], Any]


def _torch_converter(rt):
    import torch
    import torch.utils.dlpack

    wanted = getattr(torch, rt.name, None)  # None: torch has no such dtype (float8 on torch 1.13)
    # straight from the capsule: torch.from_dlpack's Python checks cost more than the fetch's own issue
    from_capsule = getattr(torch._C, "_from_dlpack", None) or torch.utils.dlpack.from_dlpack
    from_array = torch.from_dlpack if hasattr(torch, "from_dlpack") else torch.utils.dlpack.from_dlpack
    if wanted is not None and rt.name.startswith("float8"):
        return Converter(True, lambda c: from_capsule(c).view(wanted), from_capsule,
                         lambda a: from_array(a).view(wanted), from_array)
    return Converter(True, from_capsule, from_capsule, from_array, from_array)


def _numpy_converter(rt):
    import numpy

    if rt.name == "bfloat16":
        def rows(a):
            return numpy.from_dlpack(a.view_bits())
    else:
        rows = numpy.from_dlpack
    return Converter(False, rows, numpy.from_dlpack, rows, numpy.from_dlpack)


def _identity(a):
    return a


def converters(indices, rt) -> Converter:
    """How the hook hands out rows to the consumer `indices` belongs to."""
    mod = type(indices).__module__.split(".")[0]
    if mod == "torch":
        return _torch_converter(rt)
    if mod == "numpy" and "numpy" in sys.modules:
        return _numpy_converter(rt)
    return Converter(False, _identity, _identity, _identity, _identity)
