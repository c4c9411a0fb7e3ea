"""Checks of the public API's integer arguments: the C layer's fields are 32
or 64 bits wide, and a value past them must be refused by name, not wrapped
or turned into a bare OverflowError. The check is the extension's (one rule
for the arguments C parses and the ones Python passes on): integers are what
operator.index() takes (int, numpy's integer scalars, a 0-d integer tensor),
never a bool."""
from ._engram import _check_int as check_int  # noqa: F401 (re-exported)

I32, U32, I64 = (1 << 31) - 1, (1 << 32) - 1, (1 << 63) - 1
