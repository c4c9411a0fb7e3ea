"""The library's log lines as records of the ``engram`` logger, installed
when the package is imported. The C library decides first which lines exist
(ENGRAM_LOG_LEVEL, default warn); ``logging`` then filters and routes them
as any other logger's. A record's filename and lineno are the C source's.
Levels: error -> ERROR, warn -> WARNING, info -> INFO, debug/trace -> DEBUG.

An error the package raises is not logged as well: the library's line for
it travels as the exception's message (the extension holds the calling
thread's error lines during each call and drops those the exception
carries); lines nobody raises (a transport's thread, a fetch released by
the garbage collector) are logged.

ENGRAM_LOG_LEVEL set explicitly asks for those lines: while neither the
``engram`` logger nor the root logger has a handler (``logging`` not
configured), a default handler writes them to stderr at that level, as the
library would without Python; it gives way as soon as the program configures
logging (a handler of its own on either logger)."""
import atexit
import logging
import os
import sys

from . import _engram

logger = logging.getLogger("engram")

_LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "warning": logging.WARNING, "info": logging.INFO,
           "debug": logging.DEBUG, "trace": logging.DEBUG}


def _emit(level, file, line, msg):
    if logger.isEnabledFor(level):
        # args None: msg is the finished text, never %-formatted again.
        logger.handle(logger.makeRecord(logger.name, level, file, line, msg, None, None))


class _DefaultHandler(logging.StreamHandler):
    """stderr at ENGRAM_LOG_LEVEL until logging is configured: then silent,
    the records going to the program's handlers instead."""

    def __init__(self, level):
        super().__init__(sys.stderr)
        self.setLevel(level)
        self.setFormatter(logging.Formatter("engram[%(process)d] %(levelname)s %(filename)s:%(lineno)d %(message)s"))

    def emit(self, record):
        if logging.getLogger().handlers or any(h is not self for h in logger.handlers):
            return
        self.stream = sys.stderr  # the stream of the moment (pytest and others swap it)
        super().emit(record)


def _default_handler(environ=os.environ):
    """The default handler for an explicit ENGRAM_LOG_LEVEL, or None."""
    level = _LEVELS.get(environ.get("ENGRAM_LOG_LEVEL", "").strip().lower())
    if level is None or logger.handlers:
        return None
    handler = _DefaultHandler(level)
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)
    return handler


_default_handler()
_engram._set_log_callback(_emit)
# Back to stderr before the interpreter finalizes: lines logged at exit
# (a transport's threads, a table destroyed by a finalizer) need no Python.
atexit.register(_engram._set_log_callback, None)
