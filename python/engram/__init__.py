"""engram: one-sided remote row lookups over a table sharded across ranks,
with the API of DeepEP's ElasticBuffer engram methods.

    import engram
    group = engram.Group.from_torch(torch.distributed.group.WORLD)
    with engram.Buffer(group, num_entries, hidden, torch.bfloat16, num_max_tokens,
                       num_entries_per_token, recv="host") as buf:
        buf.engram_write(my_shard)          # collective
        hook = buf.engram_fetch(indices)    # returns at once
        rows, sf = hook()                   # waits; zero-copy views of the rows

engram.ElasticBuffer takes DeepEP's ElasticBuffer constructor (byte sizes;
the table's shape comes from the first engram_write) for a drop-in port.

Groups: Group.from_torch(pg), Group.from_mpi(comm), Group.solo(), or
engram.launch(nranks, fn) for standalone scripts (fork provider).
Errors: engram.Error and its subclasses (InvalidArgumentError, BadIndexError,
BusyError, PeerError, TimeoutError, StateError). The library's log lines are
records of the "engram" logger (logging).
"""
from ._engram import (LIBRARY_VERSION, Array, BadIndexError, BusyError, Error, InvalidArgumentError, PeerError,
                      StateError, TimeoutError)
from ._groups import Group, launch
from ._buffer import Buffer, Hook
from ._elastic import ElasticBuffer
from . import _log  # noqa: F401  (routes the library's log lines into logging)

__version__ = "0.1.0"
__all__ = ["Buffer", "Hook", "ElasticBuffer", "Group", "launch", "Array", "Error", "InvalidArgumentError", "BadIndexError",
           "BusyError", "PeerError", "TimeoutError", "StateError", "LIBRARY_VERSION"]
