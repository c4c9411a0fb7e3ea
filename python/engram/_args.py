"""Checks of the public API's integer and flag arguments: the C layer's
fields are 32 or 64 bits wide, and a value past them must be refused by
name, not wrapped or turned into a bare OverflowError. The integer check is
the extension's (one rule for the arguments C parses and the ones Python
passes on): integers are what operator.index() takes (int, numpy's integer
scalars, a 0-d integer tensor), never a bool. Flags are bools (numpy's
too), never any truthy value: a string such as "no" is no flag."""
import sys

from ._engram import InvalidArgumentError
from ._engram import _check_int as check_int  # noqa: F401 (re-exported)

I32, U32, I64 = (1 << 31) - 1, (1 << 32) - 1, (1 << 63) - 1


def check_bool(name, value) -> bool:
    if isinstance(value, bool):
        return value
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.bool_):
        return bool(value)
    raise InvalidArgumentError("%s: must be True or False, got %r" % (name, value))
