"""Checks of the public API's integer arguments: the C layer's fields are 32
or 64 bits wide, and a value past them must be refused by name, not wrapped
or turned into a bare OverflowError. Integers are what operator.index()
takes (int, numpy's integer scalars, a 0-d integer tensor), never a bool."""
import operator

from ._engram import InvalidArgumentError

I32, U32, I64 = (1 << 31) - 1, (1 << 32) - 1, (1 << 63) - 1


def _is_bool(value):
    # numpy's bool_ (with a DeprecationWarning) and a one-element bool tensor still convert through __index__
    return isinstance(value, bool) or (type(value) is not int and str(getattr(value, "dtype", "")) in ("bool",
                                                                                                     "torch.bool"))


def check_int(name, value, low, high):
    """value as an int, if operator.index() takes it (not a bool) and it lies
    in [low, high]; else InvalidArgumentError naming the argument."""
    if not _is_bool(value):
        try:
            v = operator.index(value)
        except TypeError:
            pass
        else:
            if low <= v <= high:
                return v
    raise InvalidArgumentError("%s: must be an integer in [%d, %d], got %r" % (name, low, high, value))
