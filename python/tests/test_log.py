"""The library's log lines as records of the "engram" logger: an error line
no exception carries (a fetch dropped unwaited whose gets never complete:
its release times out inside the garbage collector; stallplug, stall.py)
arrives with the ERROR level and the C source's file, from the calling
thread (the call runs without the GIL), from another thread, and from a
forked rank; an exit while a thread still logs is clean. A raised error's
line is not logged (test_hostile.py). python_tests.sh runs with
ENGRAM_LOG_LEVEL=error, so error lines exist."""
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
import stall

PKG = os.path.dirname(os.path.dirname(os.path.abspath(engram.__file__)))
LINE = "had not completed"  # engram_fetch_release's line for a fetch whose gets timed out


def unraised_error():
    """A fetch dropped without waiting, its gets never completing: its release
    (from the garbage collector, no caller to raise to) logs the timeout."""
    buf = stall.buffer(stall_gate(), timeout_ms=20)
    try:
        hook = buf.engram_fetch(np.zeros((4, 2), np.int64))
        del hook
    finally:
        buf.destroy()


def stall_gate():
    return os.path.join(stall.plugin_dir(), "never-there")


def engram_errors(records):
    return [r for r in records if r.name == "engram" and r.levelno == logging.ERROR and LINE in r.getMessage()]


def test_error_line_is_a_record(caplog):
    caplog.set_level(logging.DEBUG, logger="engram")
    unraised_error()
    found = engram_errors(caplog.records)
    assert found, "no engram ERROR record among %r" % [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    rec = found[0]
    assert rec.filename.endswith(".c") and rec.lineno > 0, (rec.filename, rec.lineno)


def test_record_from_another_thread(caplog):
    caplog.set_level(logging.DEBUG, logger="engram")
    errors = []
    th = threading.Thread(target=lambda: errors.append(unraised_error() or "done"))
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
        unraised_error()
        assert not engram_errors(seen)
        log.setLevel(logging.ERROR)
        unraised_error()
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
    unraised_error()
    return 0 if engram_errors(seen) else 3


def test_record_in_forked_rank():
    stall.plugin_dir()  # built here, before the fork
    assert engram.launch(2, rank_logs) == [0, 0]


def test_exit_while_a_thread_logs():
    """(info lines: each buffer created logs one, through the default handler)"""
    script = textwrap.dedent("""
        import threading, time
        import numpy as np
        import engram
        def spin():
            while True:
                engram.Buffer(engram.Group.solo(), 16, 8, np.float32, 4, 2, recv="host",
                              config={"transport": "loopback"}).destroy()
        threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.3)
        print("exiting")
    """)
    env = dict(os.environ, PYTHONPATH=PKG, ENGRAM_LOG_LEVEL="info")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "exiting" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "Fatal Python error" not in r.stderr, r.stderr[-2000:]
    assert "context on transport loopback" in r.stderr, r.stderr[-2000:]  # the thread did log


def test_interrupt_inside_a_log_line_is_not_lost():
    """Ctrl-C whose handler runs while engram's line is being logged (here: a
    handler raising KeyboardInterrupt) reaches the caller afterwards."""
    stall.plugin_dir()

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
            unraised_error()
            for _ in range(1000):  # the re-armed interrupt is raised at the next bytecode check
                pass
    finally:
        log.removeHandler(handler)
        signal.signal(signal.SIGINT, old_sigint)
