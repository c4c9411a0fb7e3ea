"""The Python layer driven as a hostile user would, in one process or over
the fork launcher: tensors on devices engram cannot read, an
exception leaving a with block, a hook called again after a failed wait,
a release whose gets never completed, ranks that disagree, numpy integers,
the device a recv='cuda' buffer names, graph capture on stream=, DLPack
deleters after the interpreter is gone, reference cycles through a Group,
two threads destroying at once, a table freed while an exception
propagates, and what reaches the log. The 4-rank torch cases of the same
defects are in cpu_cases.py."""
import contextlib
import ctypes
import gc
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import types
import weakref

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

import engram  # noqa: E402
import stall  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(os.path.dirname(os.path.abspath(engram.__file__)))
E, H, T, K = 64, 8, 4, 2


def solo_buffer(dtype=np.float32, **kw):
    buf = engram.Buffer(engram.Group.solo(), E, H, dtype, T, K, recv="host", config={"transport": "loopback"}, **kw)
    buf.engram_write(np.arange(E * H, dtype=np.float32).reshape(E, H).astype(dtype))
    return buf


def run_script(script, env=None, timeout=120, unset=()):
    env = {k: v for k, v in dict(os.environ, PYTHONPATH=PKG, **(env or {})).items() if k not in unset}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=timeout, env=env)


# -- tensors on devices engram cannot read --------------------------------

def test_meta_indices_are_refused_by_name_not_read():
    """Indices on torch's meta device (data_ptr 0) are refused by name, int32
    and int64 alike, never read (in a subprocess: reading them is a crash)."""
    r = run_script("""
        import numpy as np, torch, engram
        with engram.Buffer(engram.Group.solo(), 16, 8, np.float32, 4, 2, recv="host") as b:
            b.engram_write(np.zeros((16, 8), np.float32))
            for dtype in (torch.int32, torch.int64):
                try:
                    b.engram_fetch(torch.empty((4, 2), dtype=dtype, device="meta"))
                    raise SystemExit("a meta tensor was fetched")
                except engram.InvalidArgumentError as e:
                    assert "'meta'" in str(e) and "indices" in str(e), str(e)
        print("refused")
    """)
    assert r.returncode == 0 and "refused" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])


def test_every_tensor_input_refuses_other_devices_and_layouts():
    buf = solo_buffer()
    try:
        meta = torch.empty((E, H), dtype=torch.float32, device="meta")
        with pytest.raises(engram.InvalidArgumentError, match="storage: a tensor on torch device 'meta'"):
            buf.engram_write(meta)
        sparse = torch.zeros(T, K, dtype=torch.int64).to_sparse()
        with pytest.raises(engram.InvalidArgumentError, match="indices: a torch.sparse_coo tensor"):
            buf.engram_fetch(sparse)
        rows, _ = buf.engram_fetch(torch.zeros(T, K, dtype=torch.int64))()  # the buffer still works
        del rows
    finally:
        buf.destroy()
    with engram.Buffer(engram.Group.solo(), E, H, "float8_e4m3fn", T, K, num_sf_packs=1, recv="host") as fp8:
        shard = torch.zeros(E, H, dtype=torch.uint8)
        with pytest.raises(engram.InvalidArgumentError, match="sf: a tensor on torch device 'meta'"):
            fp8.engram_write(shard, torch.empty((E, 1), dtype=torch.int32, device="meta"))
        fp8.engram_write(shard, torch.zeros(E, 1, dtype=torch.int32))


class _Foreign:
    """A DLPack producer claiming another device (Metal): numpy's capsule
    with its device rewritten."""

    def __init__(self, a, device_type):
        self.a, self.device_type = a, device_type

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None):
        cap = self.a.__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        mt = get(cap, b"dltensor")
        # DLTensor: void *data; DLDevice {int32 device_type; int32 device_id}; ...
        ctypes.c_int32.from_address(mt + ctypes.sizeof(ctypes.c_void_p)).value = self.device_type
        return cap


def test_dlpack_devices_are_named():
    buf = solo_buffer()
    try:
        with pytest.raises(engram.InvalidArgumentError, match="host \\(CPU\\) memory, got Metal memory"):
            buf.engram_fetch(_Foreign(np.zeros((T, K), np.int64), 8))
        with pytest.raises(engram.InvalidArgumentError, match="storage must be in host .* got Vulkan memory"):
            buf.engram_write(_Foreign(np.zeros((E, H), np.float32), 7))
        with pytest.raises(engram.InvalidArgumentError, match="got DLPack device type 99 memory"):
            buf.engram_fetch(_Foreign(np.zeros((T, K), np.int64), 99))
    finally:
        buf.destroy()


# -- an exception leaving a with block --------------------------------------

def test_exception_in_with_block_propagates():
    """Rows alive when the with block leaves on an exception: the caller's
    exception propagates, destroy's BusyError is a note on it."""
    with pytest.raises(KeyError, match="the caller's own") as e:
        with solo_buffer() as buf:
            rows, _ = buf.engram_fetch(np.zeros((T, K), np.int64))()
            raise KeyError("the caller's own")
    assert not buf.destroyed
    if sys.version_info >= (3, 11):
        assert any("BusyError" in n and "destroy()" in n for n in e.value.__notes__), e.value.__notes__
    del e, rows
    buf.destroy()  # and once the rows are gone it goes
    assert buf.destroyed
    with pytest.raises(ValueError):  # nothing alive: destroyed on the way out
        with solo_buffer() as buf:
            raise ValueError
    assert buf.destroyed


# -- a hook called again after a failed wait ------------------------------

def test_hook_after_a_transport_timeout_raises_it_again(tmp_path):
    """The library ended the fetch (the transport's own timeout): the hook,
    called again, raises that error again (no rows were handed out)."""
    gate = str(tmp_path / "gate")
    stall.set_gate(gate, "fail")
    buf = stall.buffer(gate)
    try:
        hook = buf.engram_fetch(np.zeros((T, K), np.int64))
        for _ in range(2):
            with pytest.raises(engram.TimeoutError, match="the gate says fail"):
                hook()
        hook.release()
        del hook
    finally:
        buf.destroy()


def test_hook_after_a_python_side_timeout_waits_again(tmp_path):
    gate = str(tmp_path / "gate")
    buf = stall.buffer(gate, timeout_ms=200)
    try:
        hook = buf.engram_fetch(np.arange(T * K).reshape(T, K))
        with pytest.raises(engram.TimeoutError, match="not complete after timeout_ms=200"):
            hook()
        stall.set_gate(gate, "go")
        rows, _ = hook()  # the same hook, waited again: the rows came
        want = np.arange(E * H, dtype=np.float32).reshape(E, H)[np.arange(T * K).reshape(T, K)].reshape(T, K * H)
        assert np.array_equal(rows, want)
        with pytest.raises(engram.StateError, match="already called"):
            hook()  # rows handed out: spent
        del rows, hook
    finally:
        buf.destroy()


def test_release_reports_gets_that_never_completed(tmp_path):
    """engram_fetch_release's ENGRAM_ERR_TIMEOUT (the slot retired) reaches the caller."""
    buf = stall.buffer(str(tmp_path / "never"), timeout_ms=100)
    try:
        hook = buf.engram_fetch(np.zeros((T, K), np.int64))
        with pytest.raises(engram.TimeoutError, match="retired"):
            hook.release()
        assert hook.released  # released all the same
        del hook
    finally:
        buf.destroy()


# -- ranks that disagree ----------------------------------------------------

def disagree(group, what):
    kw = {"transport": "loopback"}
    dtype = "float16"
    if what == "dtype" and group.rank == 0:
        dtype = "bfloat16"
    if what == "transport" and group.rank == 1:
        kw["transport"] = "ucx"
    try:
        engram.Buffer(group, E, H, dtype, T, K, recv="host", config=kw).destroy()
    except engram.InvalidArgumentError as e:
        msg = str(e)
        want = {"dtype": "dtype (rank 0: 'bfloat16'; rank 1: 'float16')",
                "transport": "transport (rank 0: 'loopback'; rank 1: 'ucx')"}[what]
        return 0 if want in msg else print(msg) or 4
    return 3


@pytest.mark.parametrize("what", ["dtype", "transport"])
def test_ranks_that_disagree_are_told_what(what, monkeypatch):
    monkeypatch.setenv("UCX_TLS", "posix")
    assert engram.launch(2, disagree, what) == [0, 0]


# -- integers through operator.index() -------------------------------------

def test_numpy_integers_are_integers():
    g = engram.Group.solo()
    with engram.Buffer(g, np.int64(E), np.int64(72), np.float32, np.int32(T), np.uint16(K), num_sf_packs=np.int8(0),
                       num_qps=np.int64(1), recv="host", device=np.int64(0)) as buf:
        assert buf.hidden == 72 and type(buf.hidden) is int
        buf.engram_write(np.zeros((E, 72), np.float32))
        rows, _ = buf.engram_fetch(np.zeros((T, K), np.int64), num_qps=np.int64(1))()
        del rows
    assert engram.Buffer.get_engram_storage_size_hint(np.int64(10), np.int32(100), np.int64(3), "float8_e4m3fn") == (
        3 * 128, 10 * 128)
    g.timeout_ms = np.int64(1234)
    assert g.timeout_ms == 1234
    assert engram._engram.storage_size_hint(np.int64(1), np.int64(256), np.int64(1))[0] == 256
    for bad in (True, np.True_, torch.tensor(True), 72.0, "72"):
        with pytest.raises(engram.InvalidArgumentError, match="hidden: must be an integer"):
            engram.Buffer(g, E, bad, np.float32, T, K, recv="host")
        with pytest.raises(engram.InvalidArgumentError, match="timeout_ms"):
            g.timeout_ms = bad


def test_flags_are_bools_and_stream_is_for_cuda():
    """A flag takes True, False or numpy's bools, never any truthy value
    ("no" is no flag); stream= names a CUDA stream, which a recv='host'
    fetch has none of."""
    idx = np.zeros((T, K), np.int64)
    with solo_buffer() as buf:
        for flag in (np.True_, False):
            rows, _ = buf.engram_fetch(idx, use_tma_aligned_col_major_sf=flag)()
            del rows
        for bad in ("no", 1, None, torch.tensor(True)):
            with pytest.raises(engram.InvalidArgumentError, match="use_tma_aligned_col_major_sf: must be True or"):
                buf.engram_fetch(idx, use_tma_aligned_col_major_sf=bad)
        with pytest.raises(engram.InvalidArgumentError, match="stream: only for recv='cuda'"):
            buf.engram_fetch(idx, stream=5)
    for flag in ("stream_ordered", "allow_hybrid_mode"):
        with pytest.raises(engram.InvalidArgumentError, match="%s: must be True or False" % flag):
            engram.Buffer(engram.Group.solo(), E, H, np.float32, T, K, recv="host", **{flag: "no"})
    gpu, cpu = engram.ElasticBuffer.get_engram_storage_size_hint(E, H, T * K, "bfloat16")
    for flag in ("allow_hybrid_mode", "allow_multiple_reduction", "prefer_overlap_with_compute", "deterministic",
                 "explicitly_destroy", "use_fp8_dispatch"):
        with pytest.raises(engram.InvalidArgumentError, match="%s: must be True or False" % flag):
            engram.ElasticBuffer(engram.Group.solo(), num_bytes=gpu + cpu, num_cpu_bytes=cpu, recv="host",
                                 **{flag: "no"})
    with engram.ElasticBuffer(engram.Group.solo(), num_bytes=gpu + cpu, num_cpu_bytes=cpu, recv="host") as eb:
        eb.engram_write(torch.zeros((E, H), dtype=torch.bfloat16))
        with pytest.raises(engram.InvalidArgumentError, match="use_tma_aligned_col_major_sf: must be True or"):
            eb.engram_fetch(torch.zeros((T, K), dtype=torch.int32), use_tma_aligned_col_major_sf="yes")


def test_config_text_with_a_nul_is_refused():
    """C reads a config string up to its first NUL: "loopback\0junk" would
    be taken as loopback."""
    for cfg, what in (({"transport": "loopback\0junk"}, "transport"), ({"fetch_\0slots": "4"}, "key")):
        with pytest.raises(engram.InvalidArgumentError, match="config: %s .* holds a NUL character" % what):
            engram.Buffer(engram.Group.solo(), E, H, np.float32, T, K, recv="host", config=cfg)


def test_library_messages_name_the_call_once():
    with solo_buffer() as buf:
        hook = buf.engram_fetch(np.zeros((T, K), np.int64))
        with pytest.raises(engram.BusyError) as e:
            buf.engram_write(np.zeros((E, H), np.float32))
        assert str(e.value).startswith("engram_write: ") and "engram_write: engram_write" not in str(e.value)
        hook.release()


def test_launch_takes_numpy_integers():
    assert engram.launch(np.int64(2), lambda group: 0, local_size=np.int32(1)) == [0, 0]


# -- the device a recv='cuda' buffer names, graph capture on stream= -------

class _FakeCuda:
    """torch.cuda as a process with two GPUs would show it, the current
    device and stream tracked; capturing: the streams under capture."""

    def __init__(self, monkeypatch):
        self.current, self.stream_now, self.capturing = 0, {0: 100, 1: 101}, set()
        cuda = torch.cuda
        for name, fn in (("is_available", lambda: True), ("current_device", lambda: self.current),
                         ("device", self.device), ("current_stream", self.current_stream),
                         ("is_current_stream_capturing", lambda: self.stream_now[self.current] in self.capturing),
                         ("stream", self.stream), ("ExternalStream", self.external)):
            monkeypatch.setattr(cuda, name, fn)

    @contextlib.contextmanager
    def device(self, d):
        before, self.current = self.current, d
        try:
            yield
        finally:
            self.current = before

    def current_stream(self, device=None):
        d = self.current if device is None else device
        return types.SimpleNamespace(cuda_stream=self.stream_now[d], device=torch.device("cuda", d))

    def external(self, handle):
        return types.SimpleNamespace(cuda_stream=handle, device=torch.device("cuda", self.current))

    @contextlib.contextmanager
    def stream(self, s):
        before, self.stream_now[self.current] = self.stream_now[self.current], s.cuda_stream
        try:
            yield
        finally:
            self.stream_now[self.current] = before


class _FakeTable:
    """The extension's Table, recording the current (fake) device of each call
    (its fetches take the general path: no torch fast path to a fake GPU)."""
    calls = []

    def __init__(self, *args, **kwargs):
        self.cuda, self.destroyed = _FakeTable.cuda, False
        self.calls.append(("create", self.cuda.current, args[-1]))

    transport, queues = "fake", 1

    def write(self, storage, sf, refused):
        self.calls.append(("write", self.cuda.current))

    def fetch(self, indices, num_qps, col_major, stream):
        self.calls.append(("fetch", self.cuda.current, stream))
        return types.SimpleNamespace(release=lambda: None, released=False)

    def destroy(self):
        self.calls.append(("destroy", self.cuda.current))
        self.destroyed = True

    def _set_torch(self, tensor, int64, strided, device, stream, capturing, conv, on_device):
        self.capturing = capturing

    def _fetch_fast(self, indices):
        return None


@pytest.fixture
def fake_gpus(monkeypatch):
    cuda = _FakeCuda(monkeypatch)
    _FakeTable.cuda, _FakeTable.calls = cuda, []
    monkeypatch.setattr(engram._buffer._engram, "Table", _FakeTable)
    monkeypatch.setattr(engram._buffer, "Hook", lambda fetch, conv, device: fetch)  # the extension's, on a Fetch
    return cuda


def test_buffer_lives_on_the_device_it_names(fake_gpus):
    """Buffer(device=1) while cuda:0 is current: the library allocates (and
    every later call runs) with cuda:1 current, then cuda:0 is current again."""
    buf = engram.Buffer(engram.Group.solo(), E, H, torch.bfloat16, T, K, recv="cuda", device=1)
    assert _FakeTable.calls == [("create", 1, 1)] and fake_gpus.current == 0
    buf.engram_write(torch.zeros(E, H, dtype=torch.bfloat16))
    buf.engram_fetch(np.zeros((T, K), np.int64))  # a DLPack producer: the table's own import path
    buf.destroy()
    assert _FakeTable.calls[1:] == [("write", 1), ("fetch", 1, 101), ("destroy", 1)], _FakeTable.calls
    assert fake_gpus.current == 0
    buf = engram.Buffer(engram.Group.solo(), E, H, torch.bfloat16, T, K, recv="cuda")  # the current device
    assert _FakeTable.calls[-1] == ("create", 0, 0) and buf.device == 0
    other = types.SimpleNamespace(cuda_stream=555, device=torch.device("cuda", 1))
    with pytest.raises(engram.InvalidArgumentError, match="stream of cuda:1; the buffer's rows are on cuda:0"):
        buf.engram_fetch(np.zeros((T, K), np.int64), stream=other)


def test_short_path_asks_torch_of_capture_only_where_refused(fake_gpus, monkeypatch):
    """Where a fetch may be captured the library says whether it was, and the
    short path asks torch nothing; where it may not (rows of other nodes
    through a host transport) torch is asked, so that a captured fetch takes
    the general path and is refused by name."""
    buf = engram.Buffer(engram.Group.solo(), E, H, torch.bfloat16, T, K, recv="cuda")
    assert buf._capture_allowed and buf._table.capturing is None
    buf.destroy()
    monkeypatch.setattr(engram._buffer.Buffer, "_capture_allowed", property(lambda self: False))
    buf = engram.Buffer(engram.Group.solo(), E, H, torch.bfloat16, T, K, recv="cuda")
    assert buf._table.capturing is engram._torch_cuda.torch_cuda().capturing
    buf.destroy()


def test_capture_is_detected_on_the_fetch_stream(fake_gpus):
    """Capture is read from the fetch's stream (stream=), not the current one."""
    buf = engram.Buffer(engram.Group.solo(), E, H, torch.bfloat16, T, K, recv="cuda")
    side = types.SimpleNamespace(cuda_stream=777, device=torch.device("cuda", 0))
    fake_gpus.capturing = {777}
    with pytest.raises(engram.InvalidArgumentError, match="under CUDA graph capture indices must be a CUDA tensor"):
        buf.engram_fetch(np.zeros((T, K), np.int64), stream=side)  # captured: host indices refused
    with pytest.raises(engram.InvalidArgumentError, match="under CUDA graph capture"):
        buf.engram_fetch(np.zeros((T, K), np.int64), stream=777)  # a raw cudaStream_t too
    buf.engram_fetch(np.zeros((T, K), np.int64))  # the current stream is not captured
    assert _FakeTable.calls[-1] == ("fetch", 0, 100)
    fake_gpus.capturing = {100}  # the current stream captured, the fetch's not: host indices taken
    buf.engram_fetch(np.zeros((T, K), np.int64), stream=side)
    assert _FakeTable.calls[-1] == ("fetch", 0, 777)


# -- extension objects ------------------------------------------------------

_DELETE_AT_EXIT = r"""
#include <stdlib.h>
#include <dlpack/dlpack.h>
static DLManagedTensor *kept;
static void at_exit(void) { if (kept) kept->deleter(kept); } /* after Py_Finalize: a consumer's static */
void keep_until_exit(DLManagedTensor *mt) { kept = mt; atexit(at_exit); }
"""


def test_dlpack_deleter_after_the_interpreter_is_gone(tmp_path):
    """A consumer freeing an exported view after finalization: the deleter
    must not take the GIL of an interpreter that no longer exists."""
    import shutil

    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    src, so = tmp_path / "keep.c", tmp_path / "libkeep.so"
    src.write_text(_DELETE_AT_EXIT)
    r = subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(so)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = run_script("""
        import ctypes, numpy as np, engram
        keep = ctypes.CDLL(%r)
        b = engram.Buffer(engram.Group.solo(), 16, 8, np.float32, 4, 2, recv="host")
        b.engram_write(np.zeros((16, 8), np.float32))
        rows, _ = b.engram_fetch(np.zeros((4, 2), np.int64))._fetch.wait_capsules()
        api = ctypes.pythonapi
        api.PyCapsule_GetPointer.restype, api.PyCapsule_GetPointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
        mt = api.PyCapsule_GetPointer(rows, b"dltensor")
        api.PyCapsule_SetName(rows, b"used_dltensor")  # consumed: the consumer owns it now
        keep.keep_until_exit(ctypes.c_void_p(mt))
        print("kept", flush=True)
    """ % str(so))
    assert r.returncode == 0 and "kept" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])


def _group_in_a_cycle():
    holder = []  # the callbacks close over it, and it holds the group
    group = engram.Group._from_callbacks(0, 1, 1, lambda data: holder and bytes(data), lambda: holder)
    holder.append(group)
    return weakref.ref(group)


def test_group_callback_cycles_are_collected():
    """A Group whose callbacks refer back to it (closures over its owner) is
    collected: the collector sees the callbacks."""
    gc.collect()
    ref = _group_in_a_cycle()
    gc.collect()
    assert ref() is None, "the cycle through the group's callbacks was not collected"


def _buffer_in_a_cycle():
    box = {}
    group = engram.Group._from_callbacks(0, 1, 1, lambda data: bytes(data), lambda: box)
    buf = engram.Buffer(group, E, H, np.float32, T, K, recv="host")
    buf.destroy()
    box["buf"] = buf  # buffer -> table -> group -> barrier closure -> box -> buffer
    return weakref.ref(buf)


def test_buffer_cycle_through_its_group_is_collected():
    gc.collect()
    ref = _buffer_in_a_cycle()
    gc.collect()
    assert ref() is None, "the cycle through the table's group was not collected"


def destroy_while_others_call(group):
    buf = engram.Buffer(group, E, H, np.float32, T, K, recv="host", config={"transport": "loopback"})
    buf.engram_write(np.zeros((E, H), np.float32))
    if group.rank == 1:
        time.sleep(1.0)  # rank 0's first destroy waits for this one's in the collective
        buf.destroy()
        return 0
    outcome = {}

    def call(name, fn):
        try:
            fn()
            outcome[name] = "ok"
        except BaseException as e:  # noqa: B902 - reported below
            outcome[name] = "%s: %s" % (type(e).__name__, e)

    first = threading.Thread(target=call, args=("first destroy", buf.destroy))
    first.start()
    time.sleep(0.3)  # the others arrive while the first destroy is in the collective
    others = [threading.Thread(target=call, args=a) for a in (
        ("second destroy", buf.destroy), ("fetch", lambda: buf.engram_fetch(np.zeros((T, K), np.int64))),
        ("write", lambda: buf.engram_write(np.zeros((E, H), np.float32))))]
    for th in others:
        th.start()
    for th in [first] + others:
        th.join()
    want = {"first destroy": "ok", "second destroy": "ok",
            "fetch": "StateError: engram_fetch: the buffer has been destroyed",
            "write": "StateError: engram_write: the buffer has been destroyed"}
    if outcome != want or not buf.destroyed:
        print("outcomes:", outcome, flush=True)
        return 5
    return 0


def test_calls_racing_a_destroy():
    """A destroy() or a call on the buffer from another thread while one
    destroy is in its collective: the second destroy is harmless, the others
    are told the buffer is destroyed (the table is checked again once the
    table lock is theirs)."""
    assert engram.launch(2, destroy_while_others_call) == [0, 0]


def test_table_freed_while_an_exception_propagates():
    """A Table freed as a C caller unwinds (here list() over map()): its
    ResourceWarning keeps the pending exception, and as an error (-W) is
    reported once, without taking a reference to the dying table."""
    for flag in ("default", "error::ResourceWarning"):
        r = subprocess.run([sys.executable, "-W", flag, "-c", textwrap.dedent("""
            import numpy as np, engram
            try:
                list(map(int, [engram.Buffer(engram.Group.solo(), 16, 8, np.float32, 4, 2, recv="host")]))
            except TypeError as e:
                print("TypeError kept")
        """)], capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=PKG))
        assert r.returncode == 0 and "TypeError kept" in r.stdout, (flag, r.returncode, r.stdout, r.stderr[-2000:])


def test_fetch_ptr_is_private():
    assert not hasattr(engram._engram.Table, "fetch_ptr") and hasattr(engram._engram.Table, "_fetch_ptr")


# -- what reaches the log ---------------------------------------------------

class _Keep(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@contextlib.contextmanager
def engram_records():
    log, keep = logging.getLogger("engram"), _Keep()
    old = log.level
    log.addHandler(keep)
    log.setLevel(logging.DEBUG)
    try:
        yield keep.records
    finally:
        log.removeHandler(keep)
        log.setLevel(old)


def test_handled_errors_are_raised_not_logged(tmp_path):
    """BUSY on destroy, write and fetch (and a bad index, a refused write,
    a refused cache) are outcomes the caller sees and handles: no record of the engram
    logger for them. (These are the records the Python layer emits; what
    the C library writes without the package is the library's own.)"""
    buf = solo_buffer()
    try:
        with engram_records() as records:
            hooks = [buf.engram_fetch(np.zeros((T, K), np.int64)) for _ in range(4)]  # fetch_slots = 4
            with pytest.raises(engram.BusyError):
                buf.engram_fetch(np.zeros((T, K), np.int64))
            with pytest.raises(engram.BusyError):
                buf.destroy()
            with pytest.raises(engram.BusyError):
                buf.engram_write(np.zeros((E, H), np.float32))
            del hooks
            with pytest.raises(engram.BadIndexError):
                buf.engram_fetch(np.full((T, K), 10**6, np.int64))()
            with pytest.raises(engram.InvalidArgumentError):
                buf.engram_write(np.zeros((E, H + 1), np.float32))  # refused here, the agreement joined
            with pytest.raises(engram.Error):
                engram.Buffer(engram.Group.solo(), E, H, np.float32, T, K, recv="host",
                              config={"transport": "no_such_transport"})
            # refused by the library (a host-receive table has no GPU cache)
            with pytest.raises(engram.InvalidArgumentError, match="recv=CUDA"):
                buf.cache_rows([0, 1])
            with pytest.raises(engram.InvalidArgumentError, match="recv=CUDA"):
                buf.cache_profile(np.zeros((T, K), np.int64), 4)
            with pytest.raises(engram.InvalidArgumentError, match="divisor"):
                engram.launch(4, lambda group: 0, local_size=3)  # refused by the fork launcher
            short = tmp_path / "short.bin"
            short.write_bytes(b"\0" * 100)
            with pytest.raises(engram.InvalidArgumentError, match="the file ends"):
                buf.engram_write_file(short, offset=0)  # a file the library finds short
        assert not records, [(r.levelname, r.filename, r.getMessage()) for r in records]
    finally:
        buf.destroy()


def test_what_nobody_raises_is_logged(tmp_path):
    """A fetch dropped unwaited whose gets never complete: its release's
    timeout reaches no caller, so it is logged (ERROR, the C source's file)."""
    buf = stall.buffer(str(tmp_path / "never"), timeout_ms=50)
    try:
        with engram_records() as records:
            hook = buf.engram_fetch(np.zeros((T, K), np.int64))
            del hook
        found = [r for r in records if r.levelno == logging.ERROR and "had not completed" in r.getMessage()]
        assert found and found[0].filename.endswith(".c"), [(r.levelname, r.getMessage()) for r in records]
    finally:
        buf.destroy()


def test_log_level_alone_shows_info_lines():
    """ENGRAM_LOG_LEVEL=info with logging not configured: the info lines reach stderr."""
    script = """
        import numpy as np, engram%s
        engram.Buffer(engram.Group.solo(), 16, 8, np.float32, 4, 2, recv="host",
                      config={"transport": "loopback"}).destroy()
    """
    r = run_script(script % "", env={"ENGRAM_LOG_LEVEL": "info"})
    assert r.returncode == 0 and "INFO context.c" in r.stderr and "context on transport loopback" in r.stderr, r.stderr
    # configured logging: the records go there, once, and not also to the default handler
    r = run_script(script % "; import logging, sys; logging.basicConfig(stream=sys.stdout, format='LOG %(message)s')",
                   env={"ENGRAM_LOG_LEVEL": "info"})
    assert r.returncode == 0 and r.stdout.count("LOG context on transport loopback") == 1, r.stdout
    assert "context on transport" not in r.stderr, r.stderr
    r = run_script(script % "", unset=("ENGRAM_LOG_LEVEL",))  # not asked for: no handler
    assert r.returncode == 0 and "context on transport" not in r.stderr, r.stderr
