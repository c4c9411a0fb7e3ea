"""Checks of the public API's integer arguments: the C layer's fields are 32
or 64 bits wide, and a value past them must be refused by name, not wrapped
or turned into a bare OverflowError."""
from ._engram import InvalidArgumentError

I32, U32, I64 = (1 << 31) - 1, (1 << 32) - 1, (1 << 63) - 1


def check_int(name, value, low, high):
    """Refuses anything but an int (not a bool) in [low, high]."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgumentError("%s: must be an integer in [%d, %d], got %r" % (name, low, high, value))
