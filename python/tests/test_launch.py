"""The fork launcher (engram.launch) and what needs no torch: correctness
with numpy arrays, exit codes, the GIL released in collectives, Ctrl-C
interrupting a wait, a run with torch absent, python -m engram.info."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

np = pytest.importorskip("numpy")

import engram

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(os.path.dirname(os.path.abspath(engram.__file__)))  # where this engram was imported from
E, H, T, K = 200, 16, 32, 8


def shard(rank):
    return (np.arange(E * H, dtype=np.float32).reshape(E, H) + np.float32(100000 * rank))


def fetch_ranks(group, transport, hybrid=False):
    with engram.Buffer(group, E, H, np.float32, T, K, recv="host", allow_hybrid_mode=hybrid,
                       config={"transport": transport}) as buf:
        buf.engram_write(shard(group.rank))
        idx = np.random.default_rng(group.rank).integers(0, E * group.size, (T, K))
        rows, sf = buf.engram_fetch(idx)()
        full = np.concatenate([shard(r) for r in range(group.size)])
        assert isinstance(rows, np.ndarray) and sf is None
        assert np.array_equal(rows, full[idx].reshape(T, K * H))
        del rows
    return 0


@pytest.mark.parametrize("transport", ["loopback", "ucx"])
def test_launch_fetch_numpy(transport, monkeypatch):
    monkeypatch.setenv("UCX_TLS", "posix")
    assert engram.launch(4, fetch_ranks, transport) == [0, 0, 0, 0]


@pytest.mark.parametrize("transport", ["loopback", "ucx"])
def test_launch_fetch_hybrid_two_nodes(transport, monkeypatch):
    """Hybrid over 2 emulated nodes of 2; on ucx over posix the owners serve
    the gets while they wait in the fork provider's collectives."""
    monkeypatch.setenv("UCX_TLS", "posix")
    assert engram.launch(4, fetch_ranks, transport, True, local_size=2) == [0, 0, 0, 0]


def exits(group):
    if group.rank == 1:
        raise RuntimeError("rank 1 fails on purpose")
    if group.rank == 2:
        sys.exit(3)
    return 0


def test_launch_reports_failed_ranks():
    with pytest.raises(engram.Error, match="rank 1 code 1, rank 2 code 3") as e:
        engram.launch(3, exits)
    assert e.value.exit_codes == [0, 1, 3]


def test_launch_refuses_bad_arguments():
    with pytest.raises(engram.InvalidArgumentError, match="nranks"):
        engram.launch(0, exits)
    with pytest.raises(engram.InvalidArgumentError, match="callable"):
        engram._engram.fork_run(2, "not callable")
    # refused by name before any fork, not as a bare OverflowError or a failure in every rank
    for nranks in (2**40, True, 2.0):
        with pytest.raises(engram.InvalidArgumentError, match="nranks"):
            engram.launch(nranks, exits)
    with pytest.raises(engram.InvalidArgumentError, match="local_size"):
        engram.launch(2, exits, local_size=2**40)
    with pytest.raises(engram.InvalidArgumentError, match="fn must be callable"):
        engram.launch(2, 5)


def spin_during_barrier(group):
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    if group.rank != 0:
        time.sleep(1.0)
    before, t0 = count[0], time.monotonic()
    group.barrier()
    ran, waited = count[0] - before, time.monotonic() - t0
    stop.set()
    th.join()
    if group.rank == 0:
        assert waited > 0.5, waited
        assert ran > 10000, "the other thread made %d steps in %.2f s: the GIL was held" % (ran, waited)
    return 0


def test_gil_released_in_collective():
    assert engram.launch(2, spin_during_barrier) == [0, 0]


def interrupt_wait(group):
    """Rank 1 waits for rows only rank 0's CPU can serve (ucx over posix,
    hybrid: gets emulated over active messages) while rank 0 sleeps."""
    buf = engram.Buffer(group, E, H, np.float32, T, K, recv="host", allow_hybrid_mode=True,
                        config={"transport": "ucx"})
    buf.engram_write(shard(group.rank))
    if group.rank == 0:
        time.sleep(4.0)  # not serving: Python code, no engram call
    else:
        idx = np.arange(T * K).reshape(T, K) % E  # all on rank 0
        hook = buf.engram_fetch(idx)
        count, stop = [0], threading.Event()

        def spin():  # keeps running while the main thread waits: the wait holds no GIL
            while not stop.is_set():
                count[0] += 1

        th = threading.Thread(target=spin)
        th.start()
        # Python raises KeyboardInterrupt only where SIGINT was not ignored
        # at its start (a shell's background job inherits it ignored)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            hook()
            raise AssertionError("the wait returned while its owner slept (%.2f s)" % (time.monotonic() - t0))
        except KeyboardInterrupt:
            assert time.monotonic() - t0 < 2.5, "Ctrl-C took %.2f s to interrupt the wait" % (time.monotonic() - t0)
        finally:
            stop.set()
            th.join()
        assert count[0] > 10000, "the other thread made %d steps during the wait: the GIL was held" % count[0]
        rows, _ = hook()  # the hook may be called again: done once rank 0 serves (at its barrier below)
        assert np.array_equal(rows, shard(0)[idx].reshape(T, K * H))
        del rows, hook
    group.barrier()
    buf.destroy()
    return 0


def test_ctrl_c_interrupts_wait(monkeypatch):
    monkeypatch.setenv("UCX_TLS", "posix")
    assert engram.launch(2, interrupt_wait, local_size=1) == [0, 0]


def test_solo_group():
    g = engram.Group.solo()
    assert (g.rank, g.size, g.local_rank, g.local_size) == (0, 1, 0, 1)
    assert fetch_ranks(g, "loopback") == 0


def test_group_timeout_property():
    g = engram.Group.solo()
    g.timeout_ms = 1234
    assert g.timeout_ms == 1234
    # out of range, not an int, a bool, past a C long: all refused by name, the value kept
    for bad in (0, -5, 2**31, 10**30, 1.5, "100", True):
        with pytest.raises(engram.InvalidArgumentError, match="timeout_ms"):
            g.timeout_ms = bad
    with pytest.raises(engram.InvalidArgumentError, match="cannot be deleted"):
        del g.timeout_ms
    assert g.timeout_ms == 1234


def test_callback_exception_is_the_cause():
    def allgather(data):
        raise OSError("network down")

    g = engram.Group._from_callbacks(0, 1, 1, allgather, lambda: None)
    with pytest.raises(engram.Error) as e:
        g.allgather(b"x")
    assert isinstance(e.value.__cause__, OSError)


def test_numpy_only_without_torch():
    script = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # import torch now raises ImportError
        import numpy as np
        import engram
        sys.path.insert(0, %r)
        import test_launch
        assert engram.launch(2, test_launch.fetch_ranks, "loopback") == [0, 0]
        try:
            import torch
            raise SystemExit("torch was importable")
        except ImportError:
            pass
        print("numpy-only ok")
    """ % HERE)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PKG, os.environ.get(
                           "PYTHONPATH")]))))
    assert r.returncode == 0 and "numpy-only ok" in r.stdout, r.stdout + r.stderr


MPI_SCRIPT = """
import sys
import numpy as np
import engram
sys.path.insert(0, %r)
import test_launch
g = engram.Group.from_mpi()
assert g.size == 2 and g.local_size == 2, g
g.barrier()
assert len(g.allgather(b"ab")) == 4
assert test_launch.fetch_ranks(g, "loopback") == 0
print("mpi rank", g.rank, "ok", flush=True)
"""


def test_from_mpi():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed here (apt-get install python3-mpi4py)")
    mpirun = "/usr/bin/mpirun"
    if not os.access(mpirun, os.X_OK):
        pytest.skip("no mpirun (apt-get install openmpi-bin)")
    cmd = [mpirun, "--oversubscribe", "--allow-run-as-root", "-n", "2", "--mca", "btl", "self,vader",
           sys.executable, "-c", MPI_SCRIPT % HERE]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PKG, os.environ.get("PYTHONPATH")])),
               OMPI_MCA_rmaps_base_oversubscribe="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0 and r.stdout.count("ok") == 2, r.stdout + r.stderr


MPI_DESTROY_SCRIPT = """
import os, sys, time
import numpy as np
import engram
g = engram.Group.from_mpi()
buf = engram.Buffer(g, 16, 8, np.float32, 4, 2, recv="host", config={"transport": "loopback", "timeout_ms": 2000})
buf.engram_write(np.zeros((16, 8), dtype=np.float32))
g.barrier()
if g.rank == 1:
    time.sleep(20)  # cut off: never destroys
    os._exit(0)
t0 = time.monotonic()
try:
    buf.destroy()
    print("destroy returned", flush=True)
except engram.Error as e:
    print("destroy failed after %.1f s: %s: %s | %s" % (time.monotonic() - t0, type(e).__name__, e, e.__cause__),
          flush=True)
os._exit(0)  # no MPI_Finalize: rank 1 never joins the pending collective
"""


def test_from_mpi_destroy_is_bounded_by_engram_timeout():
    """A rank cut off before its destroy: the other's destroy fails within
    engram's timeout_ms (MPI's collectives have no bound of their own)."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed here (apt-get install python3-mpi4py)")
    mpirun = "/usr/bin/mpirun"
    if not os.access(mpirun, os.X_OK):
        pytest.skip("no mpirun (apt-get install openmpi-bin)")
    cmd = [mpirun, "--oversubscribe", "--allow-run-as-root", "-n", "2", "--mca", "btl", "self,vader",
           sys.executable, "-c", MPI_DESTROY_SCRIPT]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PKG, os.environ.get("PYTHONPATH")])),
               OMPI_MCA_rmaps_base_oversubscribe="1", ENGRAM_LOG_LEVEL="error")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    line = next((x for x in r.stdout.splitlines() if x.startswith("destroy")), "")
    assert line.startswith("destroy failed after "), r.stdout + r.stderr
    assert float(line.split()[3]) < 2 + 1.5, line  # one timeout_ms for the whole teardown, and some slack
    assert "PeerError" in line and "did not complete within the " in line, line


def test_info():
    r = subprocess.run([sys.executable, "-m", "engram.info"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PKG, os.environ.get(
                           "PYTHONPATH")]))))
    assert r.returncode == 0, r.stderr
    assert "engram python package" in r.stdout and "backends" in r.stdout and "loopback" in r.stdout, r.stdout


def test_threads_share_a_buffer():
    """Fetches from several threads at once on one buffer (the table lock
    serialises the library calls; waits run without the GIL)."""
    g = engram.Group.solo()
    errors = []
    with engram.Buffer(g, E, H, np.float32, T, K, recv="host", config={"transport": "loopback"}) as buf:
        buf.engram_write(shard(0))

        def work(seed):
            try:
                rng = np.random.default_rng(seed)
                for _ in range(50):
                    idx = rng.integers(0, E, (T, K))
                    rows, _ = buf.engram_fetch(idx)()
                    assert np.array_equal(rows, shard(0)[idx].reshape(T, K * H))
                    del rows, _
            except BaseException as e:  # noqa: B902 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert not errors, errors
