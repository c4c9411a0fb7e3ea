"""engram.Buffer: DeepEP's ElasticBuffer engram methods over the engram C
library. A DeepEP user ports by swapping the buffer:

    buf = engram.Buffer(group, num_entries, hidden, torch.bfloat16,
                        num_max_tokens, num_entries_per_token, recv="host")
    buf.engram_write(my_shard)            # [num_entries, hidden], this rank's shard
    hook = buf.engram_fetch(indices)      # [num_tokens, num_entries_per_token], global indices
    rows, sf = hook()                     # rows: [num_tokens, num_entries_per_token * hidden]
"""
import contextlib
import hashlib
import json
import logging
import struct
import sys
from collections.abc import Mapping
from typing import Any, Optional, Tuple

from . import _engram
from ._args import I32, I64, U32, check_bool, check_int
from ._convert import converters
from ._dtypes import row_type
from ._engram import BadIndexError, Error, InvalidArgumentError, StateError
from ._torch_cuda import torch_cuda

logger = logging.getLogger("engram")

_RECV = {"host": False, "cuda": True}


def _row_bytes(hidden, rt):
    row_bytes = hidden * rt.itemsize
    if row_bytes > U32:
        raise InvalidArgumentError("hidden: %d elements of %d bytes exceed 4 GiB per entry" % (hidden, rt.itemsize))
    return row_bytes


def _torch():
    return sys.modules.get("torch")


def _is_torch_tensor(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def _check_tensor(x, what):
    """Refuses, by name, a torch tensor engram cannot read: one on a device
    other than the CPU or a CUDA GPU (meta, mps, xla, ...: their data_ptr is
    no host or GPU address) or not dense (sparse, mkldnn). Other producers'
    devices are checked from their DLPack device in the extension."""
    if _is_torch_tensor(x):
        torch = _torch()
        if not (x.is_cpu or x.is_cuda):
            raise InvalidArgumentError("%s: a tensor on torch device '%s'; engram reads CPU or CUDA tensors only "
                                       "(move it with .cpu() or .cuda())" % (what, x.device))
        if x.layout is not torch.strided:
            raise InvalidArgumentError("%s: a %s tensor; engram reads dense (strided) tensors only (call "
                                       ".to_dense())" % (what, x.layout))


# What every rank of a Buffer must pass alike, by the name its message gives:
# the library agrees on the table's shape in bytes only (row_bytes), so
# float16 on one rank and bfloat16 on another, or two transports, would
# otherwise create the buffer (and misread bits) or fail with another
# check's words.
_CONFIG_AGREED = ("transport", "mode", "num_qps")


def _int64_buffer(x, what):
    """x (a torch tensor on any device, a numpy array, a sequence) as a
    contiguous host int64 buffer for the extension."""
    import numpy as np

    if _is_torch_tensor(x):
        x = x.detach().to("cpu").reshape(-1).to(_torch().int64).contiguous().numpy()
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError("%s: not an integer array (%s)" % (what, e)) from None
    if a.size > 0 and a.dtype.kind not in "iu":
        raise InvalidArgumentError("%s: needs integers, got %s" % (what, a.dtype))
    return np.ascontiguousarray(a.reshape(-1), dtype=np.int64)


_CREATE_ADVICE = ("every rank must create the buffer with the same arguments and configuration (config=, "
                  "ENGRAM_<KEY>, ENGRAM_CONFIG_FILE)")


def _shard_file_offset(f, offset, num_entries, hidden, rt):
    """Where a shard file's rows start: `offset` for a raw file, else past
    the header of a .npy whose shape and element width are the buffer's."""
    if offset is not None:
        return check_int("offset", offset, 0, I64)
    import numpy as np
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(f)
    except ValueError:
        raise ValueError("not a .npy file (give offset= for a raw file)") from None
    shape, fortran, dtype = (npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0)(f)
    if fortran or tuple(shape) != (num_entries, hidden):
        raise ValueError("needs a C-order array of shape (%d, %d), got %s%s" % (
            num_entries, hidden, tuple(shape), " in Fortran order" if fortran else ""))
    if np.dtype(dtype).itemsize != rt.itemsize:
        raise ValueError("needs %d-byte elements (%s), got %s" % (rt.itemsize, rt.name, np.dtype(dtype)))
    return f.tell()


def _agree(group, mine, what="Buffer", advice=_CREATE_ADVICE):
    """Collective: every rank's `mine` (a dict of str -> str) must be equal;
    else InvalidArgumentError on every rank, "<what>: the ranks disagree on
    ...; <advice>", naming what differs and which ranks have which value.
    One allgather of a digest when they agree."""
    blob = json.dumps(mine, sort_keys=True).encode()
    digests = group.allgather(hashlib.sha256(blob).digest())
    if len(set(digests[i:i + 32] for i in range(0, len(digests), 32))) <= 1:
        return
    sizes = struct.unpack("<%dQ" % group.size, group.allgather(struct.pack("<Q", len(blob))))
    width = max(sizes)
    raw = group.allgather(blob.ljust(width, b"\0"))
    every = [json.loads(raw[r * width:r * width + sizes[r]]) for r in range(group.size)]
    parts = []
    for key in sorted(set().union(*every)):
        values = [e.get(key) for e in every]
        if len(set(values)) <= 1:
            continue
        by_value = {}
        for r, v in enumerate(values):
            by_value.setdefault(v, []).append(r)
        parts.append("%s (%s)" % (key, "; ".join("%s %s: %r" % ("ranks" if len(rs) > 1 else "rank", _ranks(rs), v)
                                                 for v, rs in by_value.items())))
    raise InvalidArgumentError("%s: the ranks disagree on %s; %s" % (what, ", ".join(parts), advice))


def _ranks(rs):
    """[0, 1, 2, 5] -> '0-2, 5'"""
    out, start = [], rs[0]
    for a, b in zip(rs, rs[1:] + [None]):
        if b != a + 1:
            out.append(str(start) if start == a else "%d-%d" % (start, a))
            start = b
    return ", ".join(out)


Hook = _engram.Hook  # in C: it runs once per fetch (hook.c)


def _call_on_device(device, fn):
    """fn() with the CUDA device `device` current (a hook called while another device is)."""
    with _torch().cuda.device(device):
        return fn()


class Buffer:
    """A table sharded over the ranks of `group`, each rank holding
    `num_entries` rows of `hidden` elements of `dtype` (num_entries is per
    rank, as DeepEP's: global indices run over [0, num_ranks * num_entries)).

    group: an engram.Group, or a torch.distributed ProcessGroup (wrapped with
    Group.from_torch, a collective call). dtype: torch/numpy dtype or name
    (bfloat16, float8_e4m3fn, float16, float32, ...). num_max_tokens: the
    largest num_tokens of one fetch. num_sf_packs: 4-byte scale packs per
    entry (FP8; the scales are replicated and gathered locally). recv: where
    fetched rows land, "cuda" (GPU memory; fetches run on
    torch.cuda.current_stream()) or "host". allow_hybrid_mode: one connection
    per node through the rail rank instead of one per rank. num_qps: queues
    (0 = all the transport offers). config: more engram configuration keys
    (see `python -m engram.info`), e.g. {"transport": "ucx"}.

    stream_ordered (recv="cuda"): the hook returns the rows at once, never
    waiting; they are valid in the order of the fetch's stream (work queued
    there after the fetch sees them, as with any kernel's output). The
    slot is held while the rows' tensors live; once they are gone it
    serves the next fetch on the same stream at once, before the GPU has
    run the fetch (CUDA orders the next fetch after it and after the work
    queued in between, as torch's caching allocator reuses memory), so a
    loop of fetches on one stream never waits on the host; so does a
    hook dropped or released without being called. Work reading
    the rows on another stream must be ordered before the fetch stream's
    later work (an event). The one wait left is a fetch that finds every
    slot taken by tensors still alive, or by fetches still running on
    another stream (it waits for one of those). Where rows need the host
    (gpu_path=host_gather), a slot is reused once the GPU is done with it.
    A fetch's error (bad indices: those rows are zero; a failure; a
    timeout) is raised by the first engram_fetch, hook call or
    synchronize() on the buffer after the library has seen the fetch
    complete (its own hook, with the rows, if it was complete by then),
    synchronize() waiting for every fetch first; destroy()
    raises it after tearing down. A kernel fault is also the CUDA
    context's sticky error, which torch raises at its next
    synchronization. Where rows of other nodes come through the host
    transport (a group spanning nodes, other than nccl_gin) the hook
    waits, as without stream_ordered.

    Creation and destroy() are collective. Use it as a context manager, or
    call destroy(): a buffer never destroyed is leaked (with a ResourceWarning),
    never torn down behind the other ranks' backs.
    """

    def __init__(self, group, num_entries: int, hidden: int, dtype, num_max_tokens: int,
                 num_entries_per_token: int, num_sf_packs: int = 0, recv: str = "cuda",
                 allow_hybrid_mode: bool = False, num_qps: int = 0, config: Optional[dict] = None, *,
                 device: Optional[int] = None, stream_ordered: bool = False, _flat: bool = False):
        from ._groups import Group, as_group

        if recv not in _RECV:
            raise InvalidArgumentError("recv: must be 'cuda' or 'host', got %r" % (recv,))
        stream_ordered = check_bool("stream_ordered", stream_ordered)
        allow_hybrid_mode = check_bool("allow_hybrid_mode", allow_hybrid_mode)
        if stream_ordered and recv != "cuda":
            raise InvalidArgumentError("stream_ordered: only for recv='cuda' (a recv='host' buffer's rows are "
                                       "written by the host transport, with no stream to order them)")
        num_entries = check_int("num_entries", num_entries, 1, I64)
        hidden = check_int("hidden", hidden, 1, U32)
        num_max_tokens = check_int("num_max_tokens", num_max_tokens, 1, U32)
        num_entries_per_token = check_int("num_entries_per_token", num_entries_per_token, 1, U32)
        num_sf_packs = check_int("num_sf_packs", num_sf_packs, 0, U32)
        num_qps = check_int("num_qps", num_qps, 0, I32)
        self._rt = row_type(dtype)
        row_bytes = _row_bytes(hidden, self._rt)
        if device is not None:
            device = check_int("device", device, 0, I32)
        if config is not None and not isinstance(config, Mapping):
            raise InvalidArgumentError("config: must be a dict of key -> value, got %s" % type(config).__name__)
        cfg = {str(k): str(v) for k, v in (config or {}).items()}
        cfg.setdefault("mode", "hybrid" if allow_hybrid_mode else "direct")
        if num_qps:
            cfg.setdefault("num_qps", str(num_qps))
        self.group = group if isinstance(group, Group) else as_group(group)
        self.recv = recv
        torch = _torch()
        cuda = recv == "cuda" and torch is not None and torch.cuda.is_available()
        if device is None:
            device = torch.cuda.current_device() if cuda else 0
        self.device = device
        self.num_entries, self.hidden, self.num_max_tokens = num_entries, hidden, num_max_tokens
        self.num_entries_per_token, self.num_sf_packs = num_entries_per_token, num_sf_packs
        # the configuration as the library will read it (config= over ENGRAM_<KEY> over the file)
        effective = _engram._config_values(cfg, _CONFIG_AGREED)
        _agree(self.group, dict(
            zip(_CONFIG_AGREED, effective), dtype=self._rt.name, num_entries=str(num_entries), hidden=str(hidden),
            num_max_tokens=str(num_max_tokens), num_entries_per_token=str(num_entries_per_token),
            num_sf_packs=str(num_sf_packs), recv=recv))
        # recv='cuda': the library allocates the receive slots (and a GPU table) on the current device, so the
        # device named is current while it does, and for every later call on the buffer (_on_device)
        self._cuda_device = device if cuda else None
        with self._on_device():
            self._table = _engram.Table(self.group, num_entries, row_bytes, num_entries_per_token, num_max_tokens,
                                        num_sf_packs, _RECV[recv], cfg, self._rt.dl_code, self._rt.dl_bits, hidden,
                                        device, stream_ordered=stream_ordered, flat=_flat)
        self._conv = {}
        if cuda:  # engram_fetch's short way (Table._fetch_fast) asks torch's CUDA
            tc = torch_cuda()
            # capture: where the buffer allows it the library says whether a fetch was captured; elsewhere the
            # short way asks torch, and a captured fetch takes the general path, which refuses it by name
            self._table._set_torch(tc.tensor, tc.int64, tc.strided, tc.device, tc.stream,
                                   None if self._capture_allowed else tc.capturing,
                                   converters(torch.empty(0), self._rt), _call_on_device)

    def _on_device(self):
        """torch.cuda.device(self.device) where a recv='cuda' buffer's device is not the current one (the
        library allocates, launches and waits on the current device), else a context that does nothing."""
        d = self._cuda_device
        if d is None or torch_cuda().device() == d:
            return contextlib.nullcontext()
        return _torch().cuda.device(d)

    # -- DeepEP's API ----------------------------------------------------

    @staticmethod
    def get_engram_storage_size_hint(num_entries: int, hidden: int, num_max_tokens: int,
                                     dtype="bfloat16") -> Tuple[int, int]:
        """(gpu_recv_bytes, cpu_table_bytes) as DeepEP returns (num_gpu_bytes,
        num_cpu_bytes): receive bytes for num_max_tokens rows and host bytes of a
        rank's shard of num_entries rows, rows aligned to 32 bytes."""
        num_entries = check_int("num_entries", num_entries, 1, I64)
        hidden = check_int("hidden", hidden, 1, U32)
        num_max_tokens = check_int("num_max_tokens", num_max_tokens, 0, I64)
        rt = row_type(dtype)
        _, cpu, gpu = _engram.storage_size_hint(num_entries, _row_bytes(hidden, rt), num_max_tokens)
        return gpu, cpu

    def engram_write(self, storage, sf=None) -> None:
        """Collective: writes this rank's shard `storage` [num_entries, hidden]
        (any DLPack producer; GPU tensors are copied to the host first) and,
        with num_sf_packs > 0, the replicated global scales `sf`
        [num_ranks * num_entries, num_sf_packs] of 4-byte packs."""
        self._write(storage, sf)

    def _write(self, storage, sf, refused=None):
        """engram_write; refused: the caller's own refusal of these arguments
        (a message), raised after this rank joined the write's agreement."""
        try:  # refused here, this rank still joins the write's agreement (in the extension): no rank waits
            _check_tensor(storage, "engram_write: storage")
            _check_tensor(sf, "engram_write: sf")
        except InvalidArgumentError as e:
            refused = refused or str(e)
        if refused is None and _is_torch_tensor(storage):
            storage = storage.detach()
            if storage.is_cuda:
                storage = storage.cpu()
            if self._rt.name.startswith("float8") and storage.element_size() == 1:
                storage = storage.contiguous().view(_torch().uint8)  # DLPack 0.6 has no float8
        if refused is None and sf is not None and _is_torch_tensor(sf):
            sf = sf.detach()
            if sf.is_cuda:
                sf = sf.cpu()
        with self._on_device():
            self._table.write(storage, sf, refused)

    def engram_write_file(self, path, sf=None, *, offset=None) -> None:
        """Collective: engram_write of this rank's shard straight from a file,
        without holding it in memory first: a .npy of shape [num_entries,
        hidden] in the buffer's element width (C order), or, with `offset`,
        a raw file whose rows start there. The library reads the rows into
        the shard (engram_write_rows_fd: once, where the shard holds them
        unpadded in host memory). sf as for engram_write."""
        refused, fd, data_offset, f = None, -1, 0, None
        try:
            f = open(path, "rb")
            data_offset = _shard_file_offset(f, offset, self.num_entries, self.hidden, self._rt)
            fd = f.fileno()
        except (OSError, ValueError, InvalidArgumentError) as e:
            refused = "engram_write_file: %s: %s" % (path, e)
        try:
            if refused is None and sf is not None and _is_torch_tensor(sf):
                sf = sf.detach().cpu()
            with self._on_device():
                self._table.write(None, sf, refused, fd=fd if refused is None else -1, offset=data_offset)
        finally:
            if f is not None:
                f.close()

    def engram_fetch(self, indices, num_qps: int = 0, use_tma_aligned_col_major_sf: bool = False, *,
                     stream=None) -> Hook:
        """Issues the fetch of `indices` [num_tokens, num_entries_per_token]
        (int32 or int64 global entry indices) and returns at once with a Hook;
        call the hook for (rows, sf). recv="cuda": the fetch runs on `stream`
        (a torch.cuda.Stream or a cudaStream_t as an int), by default
        torch.cuda.current_stream(), and may be captured in a CUDA graph on one
        node (or nccl_gin). Under capture the hook hands out the rows without
        waiting (the graph's replays do the work; out-of-range indices give
        zero rows, no BadIndexError) and the slot stays held while the rows
        tensor lives, so keep it as long as the graph is replayed:

            static_idx = torch.zeros(T, K, dtype=torch.int64, device="cuda")
            buf.engram_fetch(static_idx)()          # warm up (side stream)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                hook = buf.engram_fetch(static_idx); rows, sf = hook()
            static_idx.copy_(new_idx); g.replay()   # each step

        Indices captured must be CUDA tensors. num_qps: spread over that many queues (0 = all; host fetches).
        use_tma_aligned_col_major_sf: scales column-major with the token
        stride 1 and a column stride of num_tokens rounded up to 4."""
        if (self._cuda_device is not None and stream is None and type(num_qps) is int and num_qps == 0
                and use_tma_aligned_col_major_sf is False):
            # the common recv='cuda' call, asked of torch in C (Table._fetch_fast); None: not that call
            hook = self._table._fetch_fast(indices)
            if hook is not None:
                return hook
        num_qps = check_int("num_qps", num_qps, 0, I32)
        use_tma_aligned_col_major_sf = check_bool("use_tma_aligned_col_major_sf", use_tma_aligned_col_major_sf)
        if stream is not None and self.recv != "cuda":
            raise InvalidArgumentError("stream: only for recv='cuda' (a recv='host' fetch runs on no stream), got %r"
                                       % (stream,))
        torch = _torch()
        if self._cuda_device is not None and torch_cuda().device() != self._cuda_device:
            with torch.cuda.device(self._cuda_device):  # the buffer's device, as for every call on it
                return self.engram_fetch(indices, num_qps, use_tma_aligned_col_major_sf, stream=stream)
        other_stream = stream is not None
        if self.recv == "cuda":
            indices, stream = self._cuda_args(indices, stream)
        if other_stream and self.recv == "cuda" and torch is not None:
            # stream= naming the current stream is no other stream: no handshake, and none queued between two
            # fetches' kernels (an event pair there costs the fetch its SMs beside a GEMM: gpu_fetch.c)
            other_stream = stream != torch_cuda().stream(self.device)
        if (torch is not None and type(indices) is torch.Tensor and indices.dim() == 2 and not other_stream
                and indices.dtype in (torch.int64, torch.int32) and (indices.is_cpu or indices.is_cuda)
                and indices.layout is torch.strided and indices.is_contiguous()):
            # the fast path: the tensor's attributes instead of torch's __dlpack__, far dearer a call;
            # the indices are on the stream the fetch runs on, so no stream handshake is needed. Only a dense
            # CPU or CUDA tensor's data_ptr is an address the library may read (a meta tensor's is 0).
            fetch = self._table._fetch_ptr(indices.data_ptr(), indices.shape[0], indices.shape[1],
                                           64 if indices.dtype == torch.int64 else 32, 2 if indices.is_cuda else 1,
                                           num_qps, use_tma_aligned_col_major_sf, stream, indices)
        else:
            _check_tensor(indices, "engram_fetch: indices")
            fetch = self._table.fetch(indices, num_qps, use_tma_aligned_col_major_sf, stream)
        conv = self._conv.get(type(indices))
        if conv is None:
            conv = self._conv[type(indices)] = converters(indices, self._rt)
        return Hook(fetch, conv, self._cuda_device)

    def synchronize(self) -> None:
        """Waits until the library has seen every stream-ordered fetch of the
        buffer complete (GIL released, bounded by timeout_ms), then raises
        the first error of one not raised yet: engram.BadIndexError (count,
        first_token, first_entry; rows and sf None), engram.TimeoutError, ...
        Returns at once on a buffer whose hook waits."""
        with self._on_device():
            self._table.synchronize()

    @property
    def stream_ordered(self) -> bool:
        """Whether the hook hands out rows in stream order without waiting
        (stream_ordered=True, and no rows of other nodes come through the
        host transport)."""
        return self._table.stream_ordered

    def destroy(self) -> None:
        """Collective teardown. engram.BusyError (on every rank) while any rank
        still holds a hook not called or released, or tensors viewing fetched
        rows; the buffer then stays usable. Destroying twice, or from two
        threads at once, is harmless. Stream-ordered fetches are waited for
        first; an error of one is raised once the buffer is torn down.
        Returns within timeout_ms (one bound for all of its collectives) plus
        this rank's own release, whatever the other ranks do: when they did
        not all take part (one died, stopped or did not answer in time, or
        the group failed earlier), the buffer is torn down here all the same
        and engram.PeerError raised, its __cause__ the collective's error
        (naming the ranks that did not answer)."""
        with self._on_device():
            self._table.destroy()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        """Destroys the buffer. Leaving on an exception, that exception is what
        propagates: a destroy that fails then (engram.BusyError while tensors
        viewing fetched rows are still alive, e.g. in the frame the exception
        left) is attached to it as a note and the buffer stays; call
        destroy() again, collectively, once those tensors are gone."""
        if exc is None:
            self.destroy()
            return False
        try:
            self.destroy()
        except Error as e:
            note = ("engram.Buffer was not destroyed on the way out of its with block (%s: %s); call destroy() on "
                    "every rank once the tensors viewing its rows are gone" % (type(e).__name__, e))
            if hasattr(exc, "add_note"):
                exc.add_note(note)
            else:  # Python 3.10: no notes, and the caller never sees this error otherwise
                logger.warning("%s (while %s propagated)", note, type(exc).__name__)
        return False

    # -- introspection ---------------------------------------------------

    def cache_rows(self, rows) -> None:
        """Keeps these rows (global indices, distinct, of this rank's node) in
        a hot-row cache in this rank's GPU memory (recv="cuda"): fetches serve
        them from there, bit-identical; the rest take the table's path. Local,
        not while a hook of this buffer is pending; a later engram_write
        reloads the cache. An empty list drops it. rows: a 1-D integer tensor,
        numpy array or sequence."""
        with self._on_device():
            self._table.cache_rows(_int64_buffer(rows, "cache_rows: rows"))

    def cache_profile(self, indices, max_rows: int) -> None:
        """cache_rows() of the max_rows most frequent rows of `indices` (any
        shape: e.g. the index tensors of a run's first fetches, concatenated,
        or a trace); rows of other nodes and indices outside the table are
        ignored."""
        max_rows = check_int("max_rows", max_rows, 0, I64)
        with self._on_device():
            self._table.cache_profile(_int64_buffer(indices, "cache_profile: indices"), max_rows)

    def stats(self) -> dict:
        """This rank's counters since the buffer was created (engram_table_stats):
        fetches, rows, bytes (row bytes of released fetches that completed),
        bad_rows, repeats (rows the host layer's dedup served from an earlier row
        of their fetch), cache_rows and cache_hits (the GPU's hot-row cache),
        wait_s (time spent waiting in hooks), path ("transport", "uva" or
        "host_gather"), gather_threads, shard_huge_pages, shard_bytes."""
        return self._table.stats()

    @property
    def rank(self) -> int:
        return self.group.rank

    @property
    def num_ranks(self) -> int:
        return self.group.size

    @property
    def transport(self) -> str:
        """The transport the buffer runs on (loopback, ucx, nccl_gin, ...)."""
        return self._table.transport

    @property
    def num_allocated_qps(self) -> int:
        return self._table.queues

    @property
    def destroyed(self) -> bool:
        return self._table.destroyed

    def _cuda_args(self, indices, stream):
        torch = _torch()
        if torch is None:
            if stream is None:
                raise InvalidArgumentError("engram_fetch: a recv='cuda' fetch without torch needs stream= "
                                           "(a cudaStream_t as an int; 0 = the default stream)")
            return indices, int(stream)
        if stream is None:
            handle = torch_cuda().stream(self.device)
            captured = torch_cuda().capturing()
        else:
            sdev = getattr(stream, "device", None)
            if getattr(sdev, "type", None) == "cuda" and sdev.index is not None and sdev.index != self.device:
                raise InvalidArgumentError("engram_fetch: stream= is a stream of cuda:%d; the buffer's rows are on "
                                           "cuda:%d" % (sdev.index, self.device))
            handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else int(stream)
            captured = self._capturing(torch, stream, handle)
        if captured and not self._capture_allowed:
            raise StateError("engram_fetch: CUDA graph capture needs every rank on one node (or nccl_gin): rows "
                             "from other nodes come through the host transport, which a graph cannot replay")
        if captured and not (_is_torch_tensor(indices) and indices.is_cuda):
            raise InvalidArgumentError("engram_fetch: under CUDA graph capture indices must be a CUDA tensor "
                                       "(a static one the graph reads at each replay)")
        if _is_torch_tensor(indices):
            _check_tensor(indices, "engram_fetch: indices")
            if indices.is_cuda and indices.get_device() != self.device:
                raise InvalidArgumentError("engram_fetch: indices are on cuda:%d; the buffer's rows are on cuda:%d "
                                           "(move them with .to('cuda:%d'))"
                                           % (indices.get_device(), self.device, self.device))
            if not indices.is_cuda:
                indices = indices.to(torch.device("cuda", self.device), non_blocking=True)
            if indices.dtype != torch.int64:
                indices = indices.to(torch.int64)
            if not indices.is_contiguous():
                indices = indices.contiguous()
        return indices, handle

    @property
    def _capture_allowed(self) -> bool:
        """Whether a fetch may be captured in a CUDA graph: every rank on one
        node, or nccl_gin (elsewhere rows of other nodes come through the host
        transport, which a graph cannot replay)."""
        return self.group.local_size == self.group.size or self.transport == "nccl_gin"

    @staticmethod
    def _capturing(torch, stream, handle):
        """Whether `stream` (the fetch's, a torch stream or a cudaStream_t) is
        being captured into a CUDA graph: torch answers for the current stream
        only, so the fetch's is made current while it does."""
        cuda = torch_cuda()
        if handle == cuda.stream(cuda.device()):
            return cuda.capturing()
        if not hasattr(stream, "cuda_stream"):
            if handle == 0:
                return False  # the legacy default stream is never captured
            stream = torch.cuda.ExternalStream(handle)
        with torch.cuda.stream(stream):
            return torch_cuda().capturing()
