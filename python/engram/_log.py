"""The library's log lines as records of the ``engram`` logger, installed
when the package is imported. The C library decides first which lines exist
(ENGRAM_LOG_LEVEL, default warn); ``logging`` then filters and routes them
as any other logger's. A record's filename and lineno are the C source's.
Levels: error -> ERROR, warn -> WARNING, info -> INFO, debug -> DEBUG."""
import atexit
import logging

from . import _engram

logger = logging.getLogger("engram")


def _emit(level, file, line, msg):
    if logger.isEnabledFor(level):
        # args None: msg is the finished text, never %-formatted again.
        logger.handle(logger.makeRecord(logger.name, level, file, line, msg, None, None))


_engram._set_log_callback(_emit)
# Back to stderr before the interpreter finalizes: lines logged at exit
# (a transport's threads, a table destroyed by a finalizer) need no Python.
atexit.register(_engram._set_log_callback, None)
