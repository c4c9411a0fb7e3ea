"""The library's log lines as records of the "engram" logger: a failing
call's error line arrives with the ERROR level and the C source's file,
from the calling thread (the call runs without the GIL), from another
thread, and from a forked rank; an exit while a thread still logs is clean.
python_tests.sh runs with ENGRAM_LOG_LEVEL=error, so error lines exist."""
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

np = pytest.importorskip("numpy")

import engram

PKG = os.path.dirname(os.path.dirname(os.path.abspath(engram.__file__)))
BAD = "no_such_transport"


def failing_call():
    with pytest.raises(engram.Error) as e:
        engram.Buffer(engram.Group.solo(), 16, 8, np.float32, 4, 2, recv="host", config={"transport": BAD})
    return str(e.value)


def engram_errors(records):
    return [r for r in records if r.name == "engram" and r.levelno == logging.ERROR and BAD in r.getMessage()]


def test_error_line_is_a_record(caplog):
    caplog.set_level(logging.DEBUG, logger="engram")
    message = failing_call()
    found = engram_errors(caplog.records)
    assert found, "no engram ERROR record among %r" % [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    rec = found[0]
    assert rec.filename.endswith(".c") and rec.lineno > 0, (rec.filename, rec.lineno)
    assert rec.getMessage() in message or BAD in message


def test_record_from_another_thread(caplog):
    caplog.set_level(logging.DEBUG, logger="engram")
    errors = []
    th = threading.Thread(target=lambda: errors.append(failing_call()))
    th.start()
    th.join(30)
    assert errors and engram_errors(caplog.records)


def test_logging_level_filters():
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record)

    log = logging.getLogger("engram")
    handler, old = Keep(), log.level
    log.addHandler(handler)
    try:
        log.setLevel(logging.CRITICAL)
        failing_call()
        assert not engram_errors(seen)
        log.setLevel(logging.ERROR)
        failing_call()
        assert engram_errors(seen)
    finally:
        log.removeHandler(handler)
        log.setLevel(old)


def rank_logs(group):
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record)

    logging.getLogger("engram").addHandler(Keep())
    failing_call()
    return 0 if engram_errors(seen) else 3


def test_record_in_forked_rank():
    assert engram.launch(2, rank_logs) == [0, 0]


def test_exit_while_a_thread_logs():
    script = textwrap.dedent("""
        import threading, time
        import numpy as np
        import engram
        def spin():
            while True:
                try:
                    engram.Buffer(engram.Group.solo(), 16, 8, np.float32, 4, 2, recv="host",
                                  config={"transport": "%s"})
                except engram.Error:
                    pass
        threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.3)
        print("exiting")
    """ % BAD)
    env = dict(os.environ, PYTHONPATH=PKG)
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "exiting" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "Fatal Python error" not in r.stderr, r.stderr[-2000:]


def test_interrupt_inside_a_log_line_is_not_lost():
    """Ctrl-C whose handler runs while engram's line is being logged (here: a
    handler raising KeyboardInterrupt) reaches the caller afterwards."""

    class Interrupted(logging.Handler):
        def emit(self, record):
            raise KeyboardInterrupt

    log = logging.getLogger("engram")
    handler = Interrupted()
    log.addHandler(handler)
    # PyErr_SetInterrupt does nothing while SIGINT is ignored (a shell's background job)
    old_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            failing_call()
            for _ in range(1000):  # the re-armed interrupt is raised at the next bytecode check
                pass
    finally:
        log.removeHandler(handler)
        signal.signal(signal.SIGINT, old_sigint)
