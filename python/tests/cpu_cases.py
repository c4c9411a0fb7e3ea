"""The CPU-tier cases run on 4 ranks (ranks.py): rows bit-identical to a
reference built by all-gathering the shards; bf16 and fp8 + scales in both
layouts; direct and hybrid; bad indices; lifecycle abuse; bad arguments;
the GIL released in collectives. Each case is one pytest test
(test_torch_ranks.py)."""
import os
import threading
import time

import torch
import torch.distributed as dist

import engram

E, H, T, K = 1000, 128, 63, 24  # entries per rank, hidden, tokens (odd: the col-major rounding), entries per token
P = 4  # scale packs per entry (fp8)


class Context:
    def __init__(self, rank, world, config):
        self.rank, self.world, self.config = rank, world, dict(config)
        self.node = engram.Group.from_torch(local_size=world)  # one node
        self.nodes2 = engram.Group.from_torch(local_size=2)  # two emulated nodes (hybrid through rail ranks)
        gen = torch.Generator().manual_seed(1000 + rank)
        self.shard_bytes = torch.randint(0, 256, (E, H * 2), dtype=torch.uint8, generator=gen)
        self.full_bytes = allgather(self.shard_bytes)  # [world * E, H * 2], rank-ordered
        self.indices = torch.randint(0, world * E, (T, K), generator=torch.Generator().manual_seed(77 + rank))
        self.scales = torch.randint(-2**31, 2**31 - 1, (world * E, P), dtype=torch.int32,
                                    generator=torch.Generator().manual_seed(5))  # replicated: one seed

    def buffer(self, group=None, dtype=torch.bfloat16, hidden=H, packs=0, hybrid=False, tokens=T):
        return engram.Buffer(group or self.node, E, hidden, dtype, tokens, K, num_sf_packs=packs, recv="host",
                             allow_hybrid_mode=hybrid, config=self.config)


def allgather(t):
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t.contiguous())
    return torch.cat(out)


def expect(exc_type, fn, *args, match=None, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        if match is not None and match not in str(e):
            raise AssertionError("%s raised %r without %r" % (fn, e, match))
        return e
    raise AssertionError("%s did not raise %s" % (fn, exc_type.__name__))


class Skip(Exception):
    """A case that cannot run in this configuration (ranks.py records the reason)."""


def check_bf16(ctx, group, hybrid, idx_dtype):
    with ctx.buffer(group, hybrid=hybrid) as buf:
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        idx = ctx.indices.to(idx_dtype)
        rows, sf = buf.engram_fetch(idx)()
        assert sf is None
        assert rows.dtype == torch.bfloat16 and tuple(rows.shape) == (T, K * H), (rows.dtype, rows.shape)
        ref = ctx.full_bytes[ctx.indices].reshape(T, K * H * 2)
        assert torch.equal(rows.view(torch.uint8), ref), "rows differ from the all-gathered reference"
        del rows


def case_bf16_direct_int64(ctx):
    check_bf16(ctx, ctx.node, False, torch.int64)


def case_bf16_direct_int32(ctx):
    check_bf16(ctx, ctx.node, False, torch.int32)


def case_bf16_hybrid(ctx):
    check_bf16(ctx, ctx.nodes2, True, torch.int64)


def case_bf16_direct_two_nodes(ctx):
    check_bf16(ctx, ctx.nodes2, False, torch.int64)


def check_fp8(ctx, hybrid, col_major):
    shard = ctx.shard_bytes[:, :H]  # fp8 rows: H bytes
    full = ctx.full_bytes[:, :H]
    group = ctx.nodes2 if hybrid else ctx.node
    with ctx.buffer(group, dtype="float8_e4m3fn", packs=P, hybrid=hybrid) as buf:
        buf.engram_write(shard.contiguous(), ctx.scales)
        rows, sf = buf.engram_fetch(ctx.indices, use_tma_aligned_col_major_sf=col_major)()
        assert rows.dtype == getattr(torch, "float8_e4m3fn", torch.uint8), rows.dtype
        assert torch.equal(rows.view(torch.uint8), full[ctx.indices].reshape(T, K * H))
        assert sf.dtype == torch.int32 and tuple(sf.shape) == (T, K * P), (sf.dtype, sf.shape)
        want_strides = (1, (T + 3) // 4 * 4) if col_major else (K * P, 1)
        assert sf.stride() == want_strides, (sf.stride(), want_strides)
        assert torch.equal(sf, ctx.scales[ctx.indices].reshape(T, K * P))
        del rows, sf


def case_fp8_row_major(ctx):
    check_fp8(ctx, False, False)


def case_fp8_col_major(ctx):
    check_fp8(ctx, False, True)


def case_fp8_hybrid_col_major(ctx):
    check_fp8(ctx, True, True)


def case_several_in_flight(ctx):
    with ctx.buffer() as buf:
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        parts = [ctx.indices[i::3].contiguous() for i in range(3)]
        hooks = [buf.engram_fetch(p) for p in parts]
        for p, hook in reversed(list(zip(parts, hooks))):
            rows, _ = hook()
            assert torch.equal(rows.view(torch.uint8), ctx.full_bytes[p].reshape(len(p), K * H * 2))
        del rows, hooks, hook


def case_stats_count_fetches_rows_and_bad_rows(ctx):
    n = ctx.world * E
    with ctx.buffer() as buf:
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        before = buf.stats()
        assert before["fetches"] == 0 and before["rows"] == 0 and before["path"] == "transport", before
        rows, _ = buf.engram_fetch(ctx.indices)()
        del rows
        idx = ctx.indices.clone()
        idx[0, 0] = n  # one bad row
        e = expect(engram.BadIndexError, buf.engram_fetch(idx))
        del e
        s = buf.stats()
        assert s["fetches"] == 2 and s["rows"] == 2 * T * K and s["bad_rows"] == 1, s
        assert s["bytes"] == 2 * T * K * H * 2, s
        assert s["cache_rows"] == 0 and s["cache_hits"] == 0 and s["gather_threads"] == 0, s
        assert s["wait_s"] >= 0 and s["shard_bytes"] >= E * H * 2, s
        expect(engram.InvalidArgumentError, buf.cache_rows, [0], match="recv=CUDA tables")
    expect(engram.StateError, buf.stats, match="destroyed")


def case_write_from_file(ctx):
    """engram_write_file: a .npy and a raw file with an offset, read straight
    into the shard; bad files refused on the rank that has them, the write
    failing on every rank."""
    import numpy as np
    import tempfile

    with tempfile.TemporaryDirectory() as d, ctx.buffer() as buf:
        npy = os.path.join(d, "shard.npy")
        np.save(npy, ctx.shard_bytes.numpy().view(np.uint16))  # bf16 as its bits
        raw = os.path.join(d, "shard.raw")
        with open(raw, "wb") as f:
            f.write(b"x" * 100 + ctx.shard_bytes.numpy().tobytes())
        for path, offset in ((npy, None), (raw, 100)):
            buf.engram_write_file(path, offset=offset)
            rows, _ = buf.engram_fetch(ctx.indices)()
            assert torch.equal(rows.view(torch.uint8), ctx.full_bytes[ctx.indices].reshape(T, K * H * 2)), path
            del rows
        bad = {0: (os.path.join(d, "missing.npy"), None, "No such file"),
               1: (raw, None, "not a .npy file"),
               2: (raw, 1000, "the file ends"),
               3: (npy, None, None)}[ctx.rank % 4]
        if bad[0] == npy:  # this rank's file is good: the others' refusals fail its write too
            expect(engram.Error, buf.engram_write_file, npy)
        else:
            expect(engram.InvalidArgumentError, buf.engram_write_file, bad[0], offset=bad[1], match=bad[2])
        wrong = os.path.join(d, "wrong.npy")
        np.save(wrong, np.zeros((E, H + 1), dtype=np.uint16))
        expect(engram.InvalidArgumentError, buf.engram_write_file, wrong, match="shape (%d, %d)" % (E, H))
        buf.engram_write_file(npy)  # written again after the failures
        rows, _ = buf.engram_fetch(ctx.indices)()
        assert torch.equal(rows.view(torch.uint8), ctx.full_bytes[ctx.indices].reshape(T, K * H * 2))
        del rows


def case_numpy_indices_give_numpy_rows(ctx):
    import numpy as np

    with ctx.buffer() as buf:
        buf.engram_write(ctx.shard_bytes.numpy().view(np.uint16))  # numpy: bf16 as its bits
        rows, _ = buf.engram_fetch(ctx.indices.numpy().astype(np.int32))()
        assert isinstance(rows, np.ndarray) and rows.dtype == np.uint16, (type(rows), rows.dtype)  # bf16 bits
        assert np.array_equal(rows.view(np.uint8), ctx.full_bytes[ctx.indices].reshape(T, K * H * 2).numpy())
        del rows


def case_bad_indices(ctx):
    n = ctx.world * E
    idx = ctx.indices.clone()
    idx[5, 3], idx[7, 0], idx[9, 23] = -1, n, n + 12345
    with ctx.buffer() as buf:
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        hook = buf.engram_fetch(idx)
        e = expect(engram.BadIndexError, hook)
        assert (e.count, e.first_token, e.first_entry) == (3, 5, 3), (e.count, e.first_token, e.first_entry)
        assert hook.bad_indices() == (3, 5, 3), hook.bad_indices()
        assert "3 indices out of range" in str(e) and "token 5 entry 3" in str(e), str(e)
        got = e.rows.view(torch.uint8).reshape(T, K, H * 2)
        ok = (idx >= 0) & (idx < n)
        assert torch.equal(got[ok], ctx.full_bytes[idx[ok]]), "valid rows next to bad ones differ"
        assert not got[~ok].any(), "rows of bad indices are not zero-filled"
        assert isinstance(e, engram.Error) and e.status_name
        del e, got
        hook.release()
        expect(engram.StateError, hook.bad_indices, match="released")


def case_lifecycle(ctx):
    buf = ctx.buffer()
    buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
    hook = buf.engram_fetch(ctx.indices)
    expect(engram.BusyError, buf.destroy, match="still alive")  # a hook not called: every rank refuses
    rows, _ = hook()
    expect(engram.StateError, hook, match="already called")
    expect(engram.BusyError, hook.release, match="still view")
    expect(engram.BusyError, buf.destroy)  # a result tensor alive
    view = rows[1:3]  # a view of the view keeps the slot too
    del rows
    expect(engram.BusyError, buf.destroy)
    del view
    hook.release()
    expect(engram.StateError, hook, match="released")
    unwaited = buf.engram_fetch(ctx.indices)
    del unwaited  # dropping a hook never called releases its slot
    slots = [buf.engram_fetch(ctx.indices[:1]) for _ in range(4)]  # fetch_slots = 4
    expect(engram.BusyError, buf.engram_fetch, ctx.indices[:1])
    del slots
    buf.destroy()
    buf.destroy()  # harmless
    assert buf.destroyed
    expect(engram.StateError, buf.engram_fetch, ctx.indices, match="destroyed")
    expect(engram.StateError, buf.engram_write, ctx.shard_bytes.view(torch.bfloat16), match="destroyed")


def case_context_manager_destroys_on_exception(ctx):
    try:
        with ctx.buffer() as buf:
            buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
            raise KeyError("inside")
    except KeyError:
        pass
    assert buf.destroyed


def case_exception_in_with_is_each_ranks_own(ctx):
    """Every rank leaves its with block on its own exception while its rows
    are alive: each keeps its own exception (destroy's BusyError is a note on
    it), the buffer stays, and goes once the rows are dropped."""
    mine = "rank %d's own failure" % ctx.rank
    try:
        with ctx.buffer() as buf:
            buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
            rows, _ = buf.engram_fetch(ctx.indices)()
            raise LookupError(mine)
    except LookupError as e:
        assert str(e) == mine, e
        notes = getattr(e, "__notes__", [])
        assert not hasattr(e, "add_note") or any("BusyError" in n for n in notes), notes
    assert not buf.destroyed
    del rows
    buf.destroy()
    assert buf.destroyed


def case_exception_in_with_on_one_rank(ctx):
    """Rank 0 fails inside the block, the others leave it normally: rank 0
    keeps its exception; the others' destroy says the rows of some rank are
    still alive; all destroy once rank 0 dropped them."""
    held = {}
    try:
        with ctx.buffer() as buf:
            buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
            held["rows"], _ = buf.engram_fetch(ctx.indices)()
            if ctx.rank == 0:
                raise LookupError("rank 0 only")
            held.clear()
        raise AssertionError("the with block left without an error")
    except LookupError as e:
        assert ctx.rank == 0 and str(e) == "rank 0 only", (ctx.rank, e)
    except engram.BusyError as e:
        assert ctx.rank != 0 and "still alive" in str(e), (ctx.rank, e)
    held.clear()
    buf.destroy()
    assert buf.destroyed


def case_ranks_disagree_on_dtype_of_equal_width(ctx):
    """float16 on rank 0, bfloat16 elsewhere: the same row_bytes (all the
    library compares), refused on every rank naming the dtypes."""
    dtype = torch.float16 if ctx.rank == 0 else torch.bfloat16
    e = expect(engram.InvalidArgumentError, ctx.buffer, dtype=dtype, match="disagree on dtype")
    assert "rank 0: 'float16'; ranks 1-%d: 'bfloat16'" % (ctx.world - 1) in str(e), e


def case_ranks_disagree_on_transport(ctx):
    """ucx on rank 1, loopback elsewhere: refused naming the transport (not num_qps)."""
    config = dict(ctx.config, transport="ucx" if ctx.rank == 1 else "loopback")
    e = expect(engram.InvalidArgumentError, engram.Buffer, ctx.node, E, H, torch.bfloat16, T, K, recv="host",
               config=config, match="disagree on transport")
    assert "rank 1: 'ucx'" in str(e) and "num_qps" not in str(e), e


def case_meta_and_numpy_integers(ctx):
    import numpy as np

    with engram.Buffer(ctx.node, np.int64(E), np.int64(H), torch.bfloat16, np.int32(T), np.int64(K), recv="host",
                       config=ctx.config) as buf:
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        for dtype in (torch.int32, torch.int64):  # a meta tensor's data_ptr is 0: never read
            expect(engram.InvalidArgumentError, buf.engram_fetch, torch.empty((T, K), dtype=dtype, device="meta"),
                   match="'meta'")
        rows, _ = buf.engram_fetch(ctx.indices, num_qps=np.int64(1))()
        del rows


def case_bad_arguments(ctx):
    with ctx.buffer() as buf:
        bf = ctx.shard_bytes.view(torch.bfloat16)
        # every rank wrong: refused everywhere
        expect(engram.InvalidArgumentError, buf.engram_write, bf[:-1], match="shape")
        # only rank 0 wrong: it says why, the others learn of it from the agreement, nobody waits
        t0 = time.monotonic()
        if ctx.rank == 0:
            expect(engram.InvalidArgumentError, buf.engram_write, bf.float(), match="bit")
        else:
            expect(engram.Error, buf.engram_write, bf, match="rank 0")
        assert time.monotonic() - t0 < 10
        expect(engram.InvalidArgumentError, buf.engram_write, bf, torch.zeros(1, dtype=torch.int32), match="sf")
        buf.engram_write(bf)  # and then a good write works
        expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices[:, :5].contiguous(), match="num_entries_per_token")
        expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices.float(), match="int32 or int64")
        expect(engram.InvalidArgumentError, buf.engram_fetch, torch.zeros(T + 1, K, dtype=torch.int64),
               match="num_max_tokens")
        expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices.t(), match="contiguous")
        for dtype, size in ((torch.int64, 8), (torch.int32, 4)):  # a buffer's view off its elements' alignment
            raw = bytearray((T * K + 1) * size)
            odd = torch.frombuffer(raw, dtype=dtype, offset=size // 2, count=T * K).view(T, K)
            expect(engram.InvalidArgumentError, buf.engram_fetch, odd, match="aligned")
        expect(engram.InvalidArgumentError, buf.engram_fetch, [[1] * K], match="DLPack")
        expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices, -1, match="num_qps")
        rows, _ = buf.engram_fetch(ctx.indices, num_qps=1)()  # one queue is fine
        del rows
    expect(engram.InvalidArgumentError, engram.Buffer, ctx.node, E, H, "complex128", T, K, recv="host")
    expect(engram.InvalidArgumentError, engram.Buffer, ctx.node, E, H, torch.bfloat16, T, K, recv="gpu")
    expect(engram.InvalidArgumentError, engram.Buffer, ctx.node, 0, H, torch.bfloat16, T, K, recv="host")


def case_integers_past_the_c_fields_and_shape_messages(ctx):
    # 2**40 tokens: refused, not wrapped to 0 in the extension's 32-bit field
    for args, name in (((ctx.node, E, H, torch.bfloat16, 2**40, K), "num_max_tokens"),
                       ((ctx.node, E, H, torch.bfloat16, T, 2**32), "num_entries_per_token"),
                       ((ctx.node, 2**64, H, torch.bfloat16, T, K), "num_entries"),
                       ((ctx.node, -1, H, torch.bfloat16, T, K), "num_entries"),
                       ((ctx.node, E, 2**33, torch.bfloat16, T, K), "hidden")):
        expect(engram.InvalidArgumentError, engram.Buffer, *args, recv="host", match=name)
    expect(engram.InvalidArgumentError, engram.Buffer, ctx.node, E, H, torch.bfloat16, T, K, num_sf_packs=2**32,
           recv="host", match="num_sf_packs")
    for device in (2**40, -1, "cuda:0"):
        expect(engram.InvalidArgumentError, engram.Buffer, ctx.node, E, H, torch.bfloat16, T, K, recv="host",
               device=device, match="device")
    expect(engram.InvalidArgumentError, engram.Buffer, ctx.node, E, H, torch.bfloat16, T, K, recv="host",
           config=[("gpu_sms", "8")], match="config: must be a dict")
    hint = engram.Buffer.get_engram_storage_size_hint
    expect(engram.InvalidArgumentError, hint, -1, H, T, match="num_entries")
    expect(engram.InvalidArgumentError, hint, E, 2**31, T, match="4 GiB")  # 2**32 bytes of bf16
    # the extension's own converters, behind the Python checks
    for args in ((-1, 256, 1), (1, 2**32, 1), (1, 256.0, 1), (1, 256, 2**63)):
        expect(engram.InvalidArgumentError, engram._engram.storage_size_hint, *args, match="must be an integer in")
    with ctx.buffer() as buf:
        e = expect(engram.InvalidArgumentError, buf.engram_write, ctx.shard_bytes.view(torch.bfloat16).flatten())
        assert str(e).endswith("got 1 dimensions"), e
        narrow = ctx.shard_bytes.view(torch.bfloat16)[:, :H - 1].contiguous()
        e = expect(engram.InvalidArgumentError, buf.engram_write, narrow)
        assert str(e).endswith("got [%d, %d]" % (E, H - 1)), e
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        e = expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices.flatten())
        assert str(e).endswith("got 1 dimensions"), e
        e = expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices[:, :3].contiguous())
        assert str(e).endswith("got a last dimension of 3"), e
        expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices, 2**40, match="num_qps")
        # torch has no DLPack type for bool: refused as an argument, torch's error kept as the cause
        e = expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices > 0, match="DLPack")
        assert e.__cause__ is not None, e
        rows, _ = buf.engram_fetch(ctx.indices)()  # and the buffer still fetches
        del rows


def case_zero_tokens(ctx):
    with ctx.buffer() as buf:
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        rows, _ = buf.engram_fetch(torch.zeros(0, K, dtype=torch.int64))()
        assert tuple(rows.shape) == (0, K * H)
        del rows


def case_gil_released_in_collectives(ctx):
    """A thread keeps running while this one waits in a collective whose
    other ranks arrive a second late."""
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    try:
        if ctx.rank != 0:
            time.sleep(1.0)
        before = count[0]
        t0 = time.monotonic()
        buf = ctx.buffer()
        waited = time.monotonic() - t0
        ran = count[0] - before
        buf.destroy()
    finally:
        stop.set()
        th.join()
    if ctx.rank == 0:
        assert waited > 0.5, "rank 0 did not wait for the late ranks (%.2f s)" % waited
        assert ran > 10000, "the other thread made %d steps in %.2f s: the GIL was held" % (ran, waited)


def case_storage_size_hint(ctx):
    gpu, cpu = engram.Buffer.get_engram_storage_size_hint(524288, 128, 512 * 24, torch.bfloat16)
    assert (gpu, cpu) == (512 * 24 * 256, 524288 * 256), (gpu, cpu)
    gpu, cpu = engram.Buffer.get_engram_storage_size_hint(10, 100, 3, "float8_e4m3fn")  # rows of 100 B -> 128
    assert (gpu, cpu) == (3 * 128, 10 * 128), (gpu, cpu)


CASES = [(name[len("case_"):], fn) for name, fn in globals().items() if name.startswith("case_")]
