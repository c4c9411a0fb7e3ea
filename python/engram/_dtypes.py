"""Element types of a Buffer's rows: the name, the bytes per element, how
the rows are labelled in DLPack, and what each consumer gets back."""
from typing import Any, NamedTuple

# DLPack type codes (dlpack.h)
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT = 0, 1, 2, 4


class RowType(NamedTuple):
    name: str
    itemsize: int
    dl_code: int  # how the exported rows are typed (float8 travels as uint8:
    dl_bits: int  # DLPack 0.6 has no float8 code; torch views it back)


_TYPES = {
    "bfloat16": RowType("bfloat16", 2, DL_BFLOAT, 16),
    "float16": RowType("float16", 2, DL_FLOAT, 16),
    "float32": RowType("float32", 4, DL_FLOAT, 32),
    "float8_e4m3fn": RowType("float8_e4m3fn", 1, DL_UINT, 8),
    "float8_e5m2": RowType("float8_e5m2", 1, DL_UINT, 8),
    "uint8": RowType("uint8", 1, DL_UINT, 8),
    "int8": RowType("int8", 1, DL_INT, 8),
}
_ALIASES = {"bf16": "bfloat16", "half": "float16", "fp16": "float16", "float": "float32", "fp32": "float32",
            "fp8": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def row_type(dtype: Any) -> RowType:
    """The RowType of a torch dtype, a numpy dtype, or a name ("bfloat16", "float8_e4m3fn", ...)."""
    if isinstance(dtype, str):
        name = dtype
    else:
        name = str(getattr(dtype, "name", None) or dtype)  # numpy dtypes have .name; torch's print "torch.x"
        if name.startswith("<class 'numpy."):
            name = name[len("<class 'numpy."):-2]
    name = name.removeprefix("torch.")
    name = _ALIASES.get(name, name)
    if name not in _TYPES:
        from ._engram import InvalidArgumentError
        raise InvalidArgumentError("dtype: %r is not a row type engram knows (%s)" % (dtype, ", ".join(_TYPES)))
    return _TYPES[name]
