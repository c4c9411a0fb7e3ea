"""engram.Buffer: DeepEP's ElasticBuffer engram methods over the engram C
library. A DeepEP user ports by swapping the buffer:

    buf = engram.Buffer(group, num_entries, hidden, torch.bfloat16,
                        num_max_tokens, num_entries_per_token, recv="host")
    buf.engram_write(my_shard)            # [num_entries, hidden], this rank's shard
    hook = buf.engram_fetch(indices)      # [num_tokens, num_entries_per_token], global indices
    rows, sf = hook()                     # rows: [num_tokens, num_entries_per_token * hidden]
"""
import sys
from collections.abc import Mapping
from typing import Any, Optional, Tuple

from . import _engram
from ._args import I32, I64, U32, check_int
from ._convert import converters
from ._dtypes import row_type
from ._engram import BadIndexError, InvalidArgumentError, StateError

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


class Hook:
    """What engram_fetch returns: call it once to wait for the rows.

    ``rows, sf = hook()`` waits (the GIL released; Ctrl-C interrupts it and the
    hook may be called again) and returns zero-copy views of the receive slot:
    ``rows`` [num_tokens, num_entries_per_token * hidden] and ``sf``
    [num_tokens, num_entries_per_token * num_sf_packs] int32 (None without
    scales). The slot is released when the hook and every view of it are gone,
    or by ``release()`` once no view is left. Out-of-range indices raise
    engram.BadIndexError, whose ``rows``/``sf`` hold the (zero-filled for those
    rows) result.
    """

    __slots__ = ("_fetch", "_conv")

    def __init__(self, fetch, conv):
        self._fetch = fetch
        self._conv = conv

    def __call__(self) -> Tuple[Any, Optional[Any]]:
        conv = self._conv
        try:
            rows, sf = self._fetch.wait_capsules() if conv.capsules else self._fetch.wait()
        except BadIndexError as e:
            e.rows = conv.array_rows(e.rows)
            e.sf = None if e.sf is None else conv.array_sf(e.sf)
            raise
        return conv.rows(rows), (None if sf is None else conv.sf(sf))

    def release(self) -> None:
        """Frees the receive slot now (BusyError while tensors still view it)."""
        self._fetch.release()

    @property
    def released(self) -> bool:
        return self._fetch.released


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

    Creation and destroy() are collective. Use it as a context manager, or
    call destroy(): a buffer never destroyed is leaked (with a ResourceWarning),
    never torn down behind the other ranks' backs.
    """

    def __init__(self, group, num_entries: int, hidden: int, dtype, num_max_tokens: int,
                 num_entries_per_token: int, num_sf_packs: int = 0, recv: str = "cuda",
                 allow_hybrid_mode: bool = False, num_qps: int = 0, config: Optional[dict] = None, *,
                 device: Optional[int] = None):
        from ._groups import Group, as_group

        if recv not in _RECV:
            raise InvalidArgumentError("recv: must be 'cuda' or 'host', got %r" % (recv,))
        check_int("num_entries", num_entries, 1, I64)
        check_int("hidden", hidden, 1, U32)
        check_int("num_max_tokens", num_max_tokens, 1, U32)
        check_int("num_entries_per_token", num_entries_per_token, 1, U32)
        check_int("num_sf_packs", num_sf_packs, 0, U32)
        check_int("num_qps", num_qps, 0, I32)
        self._rt = row_type(dtype)
        row_bytes = _row_bytes(hidden, self._rt)
        if device is not None:
            check_int("device", device, 0, I32)
        if config is not None and not isinstance(config, Mapping):
            raise InvalidArgumentError("config: must be a dict of key -> value, got %s" % type(config).__name__)
        cfg = {str(k): str(v) for k, v in (config or {}).items()}
        cfg.setdefault("mode", "hybrid" if allow_hybrid_mode else "direct")
        if num_qps:
            cfg.setdefault("num_qps", str(num_qps))
        self.group = group if isinstance(group, Group) else as_group(group)
        self.recv = recv
        if device is None:
            t = _torch()
            device = t.cuda.current_device() if recv == "cuda" and t is not None and t.cuda.is_available() else 0
        self.device = device
        self.num_entries, self.hidden, self.num_max_tokens = num_entries, hidden, num_max_tokens
        self.num_entries_per_token, self.num_sf_packs = num_entries_per_token, num_sf_packs
        self._table = _engram.Table(self.group, num_entries, row_bytes, num_entries_per_token, num_max_tokens,
                                    num_sf_packs, _RECV[recv], cfg, self._rt.dl_code, self._rt.dl_bits, hidden,
                                    device)
        self._conv = {}

    # -- DeepEP's API ----------------------------------------------------

    @staticmethod
    def get_engram_storage_size_hint(num_entries: int, hidden: int, num_max_tokens: int,
                                     dtype="bfloat16") -> Tuple[int, int]:
        """(gpu_recv_bytes, cpu_table_bytes) as DeepEP returns (num_gpu_bytes,
        num_cpu_bytes): receive bytes for num_max_tokens rows and host bytes of a
        rank's shard of num_entries rows, rows aligned to 32 bytes."""
        check_int("num_entries", num_entries, 1, I64)
        check_int("hidden", hidden, 1, U32)
        check_int("num_max_tokens", num_max_tokens, 0, I64)
        rt = row_type(dtype)
        _, cpu, gpu = _engram.storage_size_hint(num_entries, _row_bytes(hidden, rt), num_max_tokens)
        return gpu, cpu

    def engram_write(self, storage, sf=None) -> None:
        """Collective: writes this rank's shard `storage` [num_entries, hidden]
        (any DLPack producer; GPU tensors are copied to the host first) and,
        with num_sf_packs > 0, the replicated global scales `sf`
        [num_ranks * num_entries, num_sf_packs] of 4-byte packs."""
        if _is_torch_tensor(storage):
            storage = storage.detach()
            if storage.is_cuda:
                storage = storage.cpu()
            if self._rt.name.startswith("float8") and storage.element_size() == 1:
                storage = storage.contiguous().view(_torch().uint8)  # DLPack 0.6 has no float8
        if sf is not None and _is_torch_tensor(sf):
            sf = sf.detach()
            if sf.is_cuda:
                sf = sf.cpu()
        self._table.write(storage, sf)

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
        check_int("num_qps", num_qps, 0, I32)
        captured, other_stream = False, stream is not None
        if self.recv == "cuda":
            indices, stream, captured = self._cuda_args(indices, stream)
        torch = _torch()
        if other_stream and self.recv == "cuda" and torch is not None:
            # stream= naming the current stream is no other stream: no handshake, and none queued between two
            # fetches' kernels (an event pair there costs the fetch its SMs beside a GEMM: gpu_fetch.c)
            other_stream = stream != torch.cuda.current_stream().cuda_stream
        if (torch is not None and type(indices) is torch.Tensor and indices.dim() == 2 and not other_stream
                and indices.dtype in (torch.int64, torch.int32) and indices.is_contiguous()):
            # the fast path: the tensor's attributes instead of torch's __dlpack__ (tens of us on torch 1.13);
            # the indices are on the stream the fetch runs on, so no stream handshake is needed
            fetch = self._table.fetch_ptr(indices.data_ptr(), indices.shape[0], indices.shape[1],
                                          64 if indices.dtype == torch.int64 else 32, 2 if indices.is_cuda else 1,
                                          num_qps, use_tma_aligned_col_major_sf, captured, stream, indices)
        else:
            fetch = self._table.fetch(indices, num_qps, use_tma_aligned_col_major_sf, stream, captured)
        conv = self._conv.get(type(indices))
        if conv is None:
            conv = self._conv[type(indices)] = converters(indices, self._rt)
        return Hook(fetch, conv)

    def destroy(self) -> None:
        """Collective teardown. engram.BusyError (on every rank) while any rank
        still holds a hook not called or released, or tensors viewing fetched
        rows; the buffer then stays usable. Destroying twice is harmless."""
        self._table.destroy()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False

    # -- introspection ---------------------------------------------------

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
            return indices, int(stream), False
        if stream is None:
            stream = torch.cuda.current_stream()
        handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else int(stream)
        captured = torch.cuda.is_current_stream_capturing()
        if captured and self.group.local_size < self.group.size and self.transport != "nccl_gin":
            raise StateError("engram_fetch: CUDA graph capture needs every rank on one node (or nccl_gin): rows "
                             "from other nodes come through the host transport, which a graph cannot replay")
        if captured and not (_is_torch_tensor(indices) and indices.is_cuda):
            raise InvalidArgumentError("engram_fetch: under CUDA graph capture indices must be a CUDA tensor "
                                       "(a static one the graph reads at each replay)")
        if _is_torch_tensor(indices):
            if not indices.is_cuda:
                indices = indices.to(torch.device("cuda", self.device), non_blocking=True)
            if indices.dtype != torch.int64:
                indices = indices.to(torch.int64)
            if not indices.is_contiguous():
                indices = indices.contiguous()
        return indices, handle, captured
