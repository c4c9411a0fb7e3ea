"""engram.ElasticBuffer: DeepEP's ElasticBuffer (deep_ep/buffers/elastic.py)
with its constructor, defaults and return types, for the part engram
implements: the engram methods, get_engram_storage_size_hint, barrier,
destroy, rank_idx and num_allocated_qps. A DeepEP user ports by changing
the import:

    buffer = engram.ElasticBuffer(group, num_bytes=num_gpu_bytes + num_cpu_bytes,
                                  num_cpu_bytes=num_cpu_bytes, explicitly_destroy=True)
    buffer.engram_write(local_storage, sf=sf)      # collective; creates the table
    data, fetched_sf = buffer.engram_fetch(indices)()

Where it differs from DeepEP's:
  - the table is created (collectively) at the first engram_write, from the
    storage's shape and dtype and the scales' width; a later write of
    another shape, dtype or scale width is refused (DeepEP overwrites);
  - `data` views a receive slot that stays held while the tensor (or any
    view of it) lives, and a later fetch never overwrites it (DeepEP hands
    out one receive area that the next fetch overwrites); the slots are
    fetch_slots receive areas of num_bytes - num_cpu_bytes each;
  - `sf` comes back in the dtype of the sf given to engram_write (float32
    in DeepEP's test), bit for bit; it views the slot in the row-major
    layout, and is a copy (one small kernel) in the TMA-aligned
    column-major one;
  - barrier() is a host barrier over the group, not a GPU kernel;
  - destroy() works whatever explicitly_destroy says: a buffer never
    destroyed is leaked with engram.Buffer's ResourceWarning, since a
    collective teardown cannot run from the garbage collector;
  - the hook (recv="cuda") is stream-ordered (engram.Buffer's
    stream_ordered=True): it never waits, and an error of a fetch is raised
    by a later call on the buffer (see engram.Buffer).
dispatch, combine, the PP and AGRS methods raise NotImplementedError.
"""
from typing import Any, Callable, Optional, Tuple

from . import _engram
from ._args import I32, I64, U32, check_bool, check_int
from ._buffer import Buffer, _agree, _is_torch_tensor, _row_bytes, _torch
from ._dtypes import row_type
from ._engram import InvalidArgumentError

ALIGNMENT = 2 << 20  # DeepEP's get_elastic_buffer_alignment(): buffer sizes are multiples of 2 MiB

_SCOPE = ("engram.ElasticBuffer.%s: not in engram, which implements DeepEP's engram methods only "
          "(engram_write, engram_fetch, get_engram_storage_size_hint, barrier, destroy)")


def _align(x, y):
    return (x + y - 1) // y * y


def _layout_text(d):
    return "storage [%s, %s] %s with %s scale packs%s" % (d["num_entries"], d["hidden"], d["dtype"], d["sf_packs"],
                                                          " of " + d["sf_dtype"] if d["sf_dtype"] else "")


def _not_implemented(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(_SCOPE % name)
    method.__name__ = name
    method.__doc__ = "Not in engram: " + _SCOPE % name
    return method


class ElasticBuffer:
    """DeepEP's ElasticBuffer over engram (see the module's docstring for
    what differs). group: a torch.distributed ProcessGroup (NCCL or gloo;
    engram.Group.from_torch makes a gloo side group for NCCL, collectively)
    or an engram.Group. num_bytes: receive bytes plus num_cpu_bytes, both
    multiples of 2 MiB, as get_engram_storage_size_hint gives them.
    allow_hybrid_mode: engram's mode=hybrid (one connection per node).
    num_allocated_qps: the queues a fetch is spread over (0 = all the
    transport offers, as is a number above that; a GPU fetch of one node
    is a kernel, whatever the queues). The MoE sizing arguments, sl_idx,
    deterministic, prefer_overlap_with_compute, allow_multiple_reduction and
    the timeouts are accepted for dispatch/combine and not used (engram's
    bound is its timeout_ms key).

    engram's own, keyword-only: recv ("cuda", DeepEP's; "host" receives in
    host memory, with a hook that waits), config (engram configuration
    keys), device (the CUDA device; default the current one)."""

    def __init__(self, group, num_bytes: Optional[int] = None, num_cpu_bytes: int = 0,
                 num_max_tokens_per_rank: int = 0, hidden: int = 0, num_topk: int = 0,
                 use_fp8_dispatch: bool = False, deterministic: bool = False, allow_hybrid_mode: bool = True,
                 allow_multiple_reduction: bool = True, prefer_overlap_with_compute: bool = True, sl_idx: int = 3,
                 num_allocated_qps: int = 0, num_cpu_timeout_secs: int = 300, num_gpu_timeout_secs: int = 100,
                 explicitly_destroy: bool = False, *, recv: str = "cuda", config: Optional[dict] = None,
                 device: Optional[int] = None):
        from ._groups import as_group

        if num_bytes is None:
            raise NotImplementedError(_SCOPE % "__init__ without num_bytes (sizing from MoE settings)" +
                                      "; pass num_bytes and num_cpu_bytes from get_engram_storage_size_hint")
        num_bytes = check_int("num_bytes", num_bytes, 1, I64)
        num_cpu_bytes = check_int("num_cpu_bytes", num_cpu_bytes, 0, num_bytes - 1)
        for name, value in (("num_bytes", num_bytes), ("num_cpu_bytes", num_cpu_bytes)):
            if value % ALIGNMENT:
                raise InvalidArgumentError("%s: must be a multiple of 2 MiB (get_engram_storage_size_hint gives "
                                           "such sizes), got %d" % (name, value))
        self._num_qps = check_int("num_allocated_qps", num_allocated_qps, 0, I32)
        if recv not in ("cuda", "host"):
            raise InvalidArgumentError("recv: must be 'cuda' or 'host', got %r" % (recv,))
        check_bool("use_fp8_dispatch", use_fp8_dispatch)
        self.allow_hybrid_mode = check_bool("allow_hybrid_mode", allow_hybrid_mode)
        self.allow_multiple_reduction = check_bool("allow_multiple_reduction", allow_multiple_reduction)
        self.prefer_overlap_with_compute = check_bool("prefer_overlap_with_compute", prefer_overlap_with_compute)
        self.deterministic = check_bool("deterministic", deterministic)
        self.explicitly_destroy = check_bool("explicitly_destroy", explicitly_destroy)
        self.group = group
        self._group = as_group(group)
        self.rank_idx = self._group.rank
        self.num_ranks = self._group.size
        self.num_bytes, self.num_cpu_bytes = num_bytes, num_cpu_bytes
        self.num_max_tokens_per_rank = num_max_tokens_per_rank
        self.recv = recv
        self._config = dict(config or {})
        self._device = device
        self._buffer = None  # the table, made at the first engram_write
        self._layout = None  # what it was made from (_describe's dict: shape, dtype, scale packs and dtype)
        self._sf_dtype = None  # the scales' dtype, which the hook hands them back in
        self._group.barrier()  # as DeepEP's constructor ends

    # -- sizes -----------------------------------------------------------

    @staticmethod
    def get_engram_storage_size_hint(num_entries: int, hidden: int, num_max_tokens_per_rank: int,
                                     dtype: Any = "bfloat16") -> Tuple[int, int]:
        """(num_gpu_bytes, num_cpu_bytes), DeepEP's: receive bytes for
        num_max_tokens_per_rank entries and the host bytes of a shard of
        num_entries, entries aligned to 32 bytes, each size to 2 MiB."""
        gpu, cpu = Buffer.get_engram_storage_size_hint(num_entries, hidden, num_max_tokens_per_rank, dtype)
        return _align(gpu, ALIGNMENT), _align(cpu, ALIGNMENT)

    @property
    def num_allocated_qps(self) -> int:
        """The queues a fetch is spread over: num_allocated_qps, at most the
        table's (all the transport offers) once the first engram_write made
        it; the number asked for (0 = all) before."""
        want = self._num_qps
        if self._buffer is None:
            return want
        have = self._buffer.num_allocated_qps
        return have if want == 0 or want > have else want

    # -- the engram methods ----------------------------------------------

    def _describe(self, storage, sf):
        """What this rank's first write makes the table from, as text for
        the ranks' agreement; ("refused", message) when it cannot."""
        shape = tuple(getattr(storage, "shape", ()))
        if len(shape) != 2:
            return {"refused": "engram_write: storage must be a 2-D tensor [num_entries, hidden], got shape %s"
                    % (shape,)}
        try:
            rt = row_type(storage.dtype)
            row_bytes = _row_bytes(check_int("hidden", shape[1], 1, U32), rt)
            check_int("num_entries", shape[0], 1, I64)
        except (InvalidArgumentError, AttributeError) as e:
            return {"refused": "engram_write: storage: %s" % e}
        if shape[0] * row_bytes > self.num_cpu_bytes:
            return {"refused": "engram_write: storage of %d bytes exceeds num_cpu_bytes=%d (size the buffer with "
                    "get_engram_storage_size_hint)" % (shape[0] * row_bytes, self.num_cpu_bytes)}
        packs, sf_dtype = 0, ""
        if sf is not None:
            sf_shape = tuple(getattr(sf, "shape", ()))
            itemsize = sf.element_size() if _is_torch_tensor(sf) else getattr(getattr(sf, "dtype", None),
                                                                               "itemsize", None)
            if len(sf_shape) != 2 or itemsize != 4:
                return {"refused": "engram_write: sf must be [num_ranks * num_entries, num_sf_packs] of 4-byte "
                        "packs (float32 or int32), got shape %s of %s-byte elements" % (sf_shape, itemsize)}
            packs, sf_dtype = sf_shape[1], str(sf.dtype)
        return {"num_entries": str(shape[0]), "hidden": str(shape[1]), "dtype": rt.name, "sf_packs": str(packs),
                "sf_dtype": sf_dtype}

    def _create(self, desc, sf):
        rows = (self.num_bytes - self.num_cpu_bytes) // _row_bytes(int(desc["hidden"]), row_type(desc["dtype"]))
        self._buffer = Buffer(self._group, int(desc["num_entries"]), int(desc["hidden"]), desc["dtype"],
                              min(rows, U32), 1, num_sf_packs=int(desc["sf_packs"]), recv=self.recv,
                              allow_hybrid_mode=self.allow_hybrid_mode, config=self._config,
                              device=self._device, stream_ordered=self.recv == "cuda", _flat=True)
        self._layout = desc
        self._sf_dtype = sf.dtype if sf is not None else None

    def engram_write(self, storage, sf=None) -> None:
        """Collective: writes this rank's shard `storage` [num_entries,
        hidden] (bfloat16, float8_e4m3fn, or another engram row type; GPU
        tensors are copied to the host) and, for FP8, the replicated scales
        `sf` [num_ranks * num_entries, num_sf_packs] of 4-byte packs. The
        first write creates the table from these shapes and dtypes (every
        rank must pass the same); a later one must match them."""
        desc = self._describe(storage, sf)
        if self._buffer is None:
            # a refusal or a disagreement raises on every rank: none is left waiting in a collective
            _agree(self._group, desc, "engram_write", "the first engram_write makes the table: every rank passes "
                   "storage (and sf) of the same shape and dtype")
            if "refused" in desc:
                raise InvalidArgumentError(desc["refused"])
            self._create(desc, sf)
            self._buffer.engram_write(storage, sf)
            return
        refused = None
        if desc != self._layout:
            refused = desc.get("refused") or (
                "engram_write: the table was made by the first engram_write for %s; a later write must match it, "
                "got %s" % (_layout_text(self._layout), _layout_text(desc)))
        self._buffer._write(storage, sf, refused)

    def engram_fetch(self, indices, num_qps: int = 0, use_tma_aligned_col_major_sf: bool = False) -> Callable:
        """Issues the fetch of `indices` [num_tokens, num_entries_per_token]
        (int32 as DeepEP's, or int64; global entry indices, any
        num_entries_per_token) and returns the hook; ``data, sf = hook()``:
        data [num_tokens, num_entries_per_token * hidden] in the storage's
        dtype, sf [num_tokens, num_entries_per_token * num_sf_packs] in the
        scales' dtype (None without scales), row-major or, with
        use_tma_aligned_col_major_sf, column-major with a token stride of 1
        and a column stride of num_tokens rounded up to 4."""
        if self._buffer is None:
            raise _engram.StateError("engram_fetch before any engram_write: the table is made by the first "
                                     "engram_write")
        num_qps = num_qps or self._num_qps  # Buffer.engram_fetch checks it
        use_tma_aligned_col_major_sf = check_bool("use_tma_aligned_col_major_sf", use_tma_aligned_col_major_sf)
        if use_tma_aligned_col_major_sf and self._sf_dtype is not None and not _is_torch_tensor(indices):
            raise InvalidArgumentError("engram_fetch: use_tma_aligned_col_major_sf needs torch indices (the "
                                       "column-major scales are a torch tensor)")
        hook = self._buffer.engram_fetch(indices, num_qps)
        if self._sf_dtype is None:
            return hook  # no scales: engram's hook returns DeepEP's types already
        return _ElasticHook(hook, self._sf_dtype, use_tma_aligned_col_major_sf)

    # -- the rest DeepEP's buffer has for engram's callers ------------------

    def barrier(self, use_comm_stream: bool = True, with_cpu_sync: bool = False, sequential: bool = True) -> None:
        """A host barrier over the group (DeepEP's is a GPU kernel).
        with_cpu_sync: torch.cuda.synchronize() before and after.
        use_comm_stream and sequential are accepted and not used."""
        torch = _torch()
        sync = with_cpu_sync and torch is not None and torch.cuda.is_available()
        if sync:
            torch.cuda.synchronize()
        self._group.barrier()
        if sync:
            torch.cuda.synchronize()

    def synchronize(self) -> None:
        """engram's: waits for the stream-ordered fetches and raises the
        first error of one not raised yet (engram.Buffer.synchronize)."""
        if self._buffer is not None:
            self._buffer.synchronize()

    def destroy(self) -> None:
        """Collective teardown, harmless twice. As DeepEP's, it ends the buffer
        whatever tensors still view fetched rows (engram.Buffer refuses with
        BusyError instead): their slots are released first, and those tensors
        must not be used afterwards: on host receive they read zeros from
        then on; on recv="cuda" their device memory is freed, and a kernel
        reading it faults (CUDA's sticky error), as with DeepEP."""
        if self._buffer is None:
            return
        self._buffer._table.detach_fetches()
        self._buffer.destroy()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._buffer is not None:
            return self._buffer.__exit__(exc_type, exc, tb)
        return False

    dispatch = _not_implemented("dispatch")
    combine = _not_implemented("combine")
    get_buffer_size_hint = staticmethod(_not_implemented("get_buffer_size_hint"))
    get_pp_buffer_size_hint = staticmethod(_not_implemented("get_pp_buffer_size_hint"))
    get_agrs_num_max_session_bytes = staticmethod(_not_implemented("get_agrs_num_max_session_bytes"))
    get_agrs_buffer_size_hint = staticmethod(_not_implemented("get_agrs_buffer_size_hint"))
    pp_set_config = _not_implemented("pp_set_config")
    pp_send = _not_implemented("pp_send")
    pp_recv = _not_implemented("pp_recv")
    create_agrs_session = _not_implemented("create_agrs_session")
    destroy_agrs_session = _not_implemented("destroy_agrs_session")
    agrs_new_session = _not_implemented("agrs_new_session")
    agrs_set_config = _not_implemented("agrs_set_config")
    agrs_get_inplace_tensor = _not_implemented("agrs_get_inplace_tensor")
    all_gather = _not_implemented("all_gather")
    get_theoretical_num_sms = _not_implemented("get_theoretical_num_sms")
    get_theoretical_num_qps = _not_implemented("get_theoretical_num_qps")
    get_comm_stream = _not_implemented("get_comm_stream")
    get_physical_domain_size = _not_implemented("get_physical_domain_size")
    get_logical_domain_size = _not_implemented("get_logical_domain_size")
    capture = staticmethod(_not_implemented("capture"))


class _ElasticHook:
    """engram.Hook with DeepEP's return types: sf in the dtype written, in
    the layout asked for."""

    __slots__ = ("_hook", "_sf_dtype", "_col_major")

    def __init__(self, hook, sf_dtype, col_major):
        self._hook, self._sf_dtype, self._col_major = hook, sf_dtype, col_major

    def __call__(self):
        data, sf = self._hook()
        if sf is None:
            return data, None
        if self._sf_dtype is not None and sf.dtype != self._sf_dtype:
            sf = sf.view(self._sf_dtype)  # the same 4-byte packs, labelled as written
        if self._col_major:
            T = sf.shape[0]
            out = _torch().empty_strided(tuple(sf.shape), (1, _align(T, 4)), dtype=sf.dtype, device=sf.device)
            out.copy_(sf)  # on the current stream, behind the fetch
            sf = out
        return data, sf

    def release(self) -> None:
        self._hook.release()

    @property
    def released(self) -> bool:
        return self._hook.released
