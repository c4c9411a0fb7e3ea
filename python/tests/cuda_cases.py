"""The device-tier cases (test_cuda.py): recv='cuda' with the table in host
memory and in GPU memory, bf16 and fp8 + scales, int32 indices and an
explicit stream, bad indices, lifecycle, a fetch captured in a CUDA graph
and replayed with new indices written into its static index tensor; the
stream-ordered hook (never waiting, each place its errors surface) and
engram.ElasticBuffer (FP8 with float32 scales, both layouts). Ranks share
the GPUs round-robin."""
import time

import torch

import engram
from cpu_cases import allgather, expect

E, H, T, K, P = 4096, 128, 512, 24, 4


class Context:
    def __init__(self, rank, world, config):
        self.rank, self.world, self.config = rank, world, dict(config)
        torch.cuda.set_device(rank % torch.cuda.device_count())
        self.group = engram.Group.from_torch(local_size=world)
        gen = torch.Generator().manual_seed(2000 + rank)
        self.shard_bytes = torch.randint(0, 256, (E, H * 2), dtype=torch.uint8, generator=gen)
        self.full_bytes = allgather(self.shard_bytes)
        self.scales = torch.randint(-2**31, 2**31 - 1, (world * E, P), dtype=torch.int32,
                                    generator=torch.Generator().manual_seed(9))
        self.gen = torch.Generator().manual_seed(300 + rank)

    def indices(self, tokens=T):
        return torch.randint(0, self.world * E, (tokens, K), generator=self.gen)

    def buffer(self, gpu_table, dtype=torch.bfloat16, packs=0, **config):
        return engram.Buffer(self.group, E, H, dtype, T, K, num_sf_packs=packs, recv="cuda",
                             config=dict(self.config, gpu_table=gpu_table, **config))


def check_rows(ctx, gpu_table, idx_dtype=torch.int64, use_stream=False):
    with ctx.buffer(gpu_table) as buf:
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        idx = ctx.indices()
        stream = torch.cuda.Stream() if use_stream else None
        hook = buf.engram_fetch(idx.to(idx_dtype).cuda(), stream=stream)
        rows, sf = hook()
        if stream is not None:
            stream.synchronize()
        assert rows.is_cuda and rows.dtype == torch.bfloat16 and tuple(rows.shape) == (T, K * H) and sf is None
        assert torch.equal(rows.view(torch.uint8).cpu(), ctx.full_bytes[idx].reshape(T, K * H * 2))
        del rows, hook


def check_cache(ctx, gpu_path):
    node = ctx.world * E
    with engram.Buffer(ctx.group, E, H, torch.bfloat16, T, K, recv="cuda",
                       config=dict(ctx.config, gpu_path=gpu_path)) as buf:
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        buf.cache_rows(torch.arange(0, node, 3))  # a third of the rows, from a tensor
        assert buf.stats()["cache_rows"] == (node + 2) // 3
        idx = ctx.indices()
        before = buf.stats()["cache_hits"]
        rows, _ = buf.engram_fetch(idx.cuda())()
        assert torch.equal(rows.view(torch.uint8).cpu(), ctx.full_bytes[idx].reshape(T, K * H * 2))
        del rows
        s = buf.stats()
        assert s["cache_hits"] - before == int((idx % 3 == 0).sum()), s
        assert s["path"] == gpu_path, s
        buf.cache_profile(ctx.indices(), 100)  # from a profile
        assert 0 < buf.stats()["cache_rows"] <= 100
        rows, _ = buf.engram_fetch(idx.cuda())()
        assert torch.equal(rows.view(torch.uint8).cpu(), ctx.full_bytes[idx].reshape(T, K * H * 2))
        del rows
        expect(engram.InvalidArgumentError, buf.cache_rows, [1, 1], match="listed twice")
        expect(engram.InvalidArgumentError, buf.cache_rows, [0.5], match="needs integers")
        buf.cache_rows([])
        assert buf.stats()["cache_rows"] == 0


def case_cuda_cache_uva(ctx):
    check_cache(ctx, "uva")


def case_cuda_cache_host_gather(ctx):
    check_cache(ctx, "host_gather")


def case_cuda_host_table(ctx):
    check_rows(ctx, "host_numa")


def case_cuda_device_table(ctx):
    check_rows(ctx, "device")


def case_cuda_int32_indices_own_stream(ctx):
    check_rows(ctx, "host_numa", torch.int32, use_stream=True)


def check_fp8(ctx, gpu_table, col_major):
    with ctx.buffer(gpu_table, dtype="float8_e4m3fn", packs=P) as buf:
        buf.engram_write(ctx.shard_bytes[:, :H].contiguous(), ctx.scales)
        idx = ctx.indices()
        rows, sf = buf.engram_fetch(idx.cuda(), use_tma_aligned_col_major_sf=col_major)()
        assert rows.dtype == getattr(torch, "float8_e4m3fn", torch.uint8)
        assert torch.equal(rows.view(torch.uint8).cpu(), ctx.full_bytes[:, :H][idx].reshape(T, K * H))
        assert sf.is_cuda and sf.stride() == ((1, (T + 3) // 4 * 4) if col_major else (K * P, 1))
        assert torch.equal(sf.cpu(), ctx.scales[idx].reshape(T, K * P))
        del rows, sf


def case_cuda_fp8_row_major(ctx):
    check_fp8(ctx, "host_numa", False)


def case_cuda_fp8_col_major_device_table(ctx):
    check_fp8(ctx, "device", True)


def case_cuda_bad_indices(ctx):
    with ctx.buffer("host_numa") as buf:
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        idx = ctx.indices()
        idx[3, 4] = -5
        e = expect(engram.BadIndexError, buf.engram_fetch(idx.cuda()))
        assert (e.count, e.first_token, e.first_entry) == (1, 3, 4)
        assert e.rows.is_cuda and not e.rows.view(torch.uint8).reshape(T, K, H * 2)[3, 4].any()
        del e


def case_cuda_lifecycle(ctx):
    buf = ctx.buffer("host_numa")
    buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
    rows, _ = buf.engram_fetch(ctx.indices().cuda())()
    expect(engram.BusyError, buf.destroy)
    del rows
    buf.destroy()
    expect(engram.StateError, buf.engram_fetch, ctx.indices().cuda())


def check_graph(ctx, gpu_table, packs, idx_dtype, **config):
    """The pattern of python/README.md: a static index tensor, a warm-up, the hook
    captured in a graph, then new indices copied in before each replay (a bad
    one included: zero rows; on host_gather counted per replay by
    hook.bad_indices(), on uva not)."""
    dtype = "float8_e4m3fn" if packs else torch.bfloat16
    width = H if packs else H * 2
    with ctx.buffer(gpu_table, dtype=dtype, packs=packs, **config) as buf:
        host_gather = buf.stats()["path"] == "host_gather"  # the path auto took, where not asked
        assert buf.stats()["path"] == config.get("gpu_path", buf.stats()["path"])
        buf.engram_write(ctx.shard_bytes[:, :width].contiguous() if packs else ctx.shard_bytes.view(torch.bfloat16),
                         ctx.scales if packs else None)
        static_idx = ctx.indices().to(idx_dtype).cuda()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the graph, as torch asks
            rows, sf = buf.engram_fetch(static_idx)()
            del rows, sf  # both views: a live sf would hold the warm-up's slot
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices())  # host indices: refused
            hook = buf.engram_fetch(static_idx)
            rows, sf = hook()
            out = rows.view(torch.uint8).clone()  # a captured consumer of the rows
        for step in range(4):
            idx = ctx.indices()
            if step == 3:
                idx[2, 5] = ctx.world * E  # out of range
            static_idx.copy_(idx.to(idx_dtype))
            graph.replay()
            torch.cuda.synchronize()
            want = ctx.full_bytes[:, :width][idx.clamp(0, ctx.world * E - 1)].reshape(T, K, width).clone()
            if step == 3:
                want[2, 5] = 0
            assert torch.equal(out.cpu(), want.reshape(T, K * width)), "replay %d gave stale rows" % step
            if packs:
                want_sf = ctx.scales[idx.clamp(0, ctx.world * E - 1)].reshape(T, K, P).clone()
                if step == 3:
                    want_sf[2, 5] = 0
                assert torch.equal(sf.cpu(), want_sf.reshape(T, K * P)), "replay %d gave stale scales" % step
            bad = hook.bad_indices()
            assert bad == ((1, 2, 5) if step == 3 and host_gather else (0, 0, 0)), (step, bad)
        # the captured rows hold the slot: the buffer cannot go while they live
        expect(engram.BusyError, buf.destroy)
        del rows, sf, hook, out, graph


def case_cuda_graph_capture_replay(ctx):
    check_graph(ctx, "host_numa", 0, torch.int64)


def case_cuda_graph_fp8_scales_int32_device_table(ctx):
    check_graph(ctx, "device", P, torch.int32)


def case_cuda_graph_host_gather(ctx):
    check_graph(ctx, "host_numa", 0, torch.int64, gpu_path="host_gather")


def case_cuda_graph_host_gather_fp8_scales(ctx):
    check_graph(ctx, "host_numa", P, torch.int32, gpu_path="host_gather")


# -- the stream-ordered hook ------------------------------------------------

SLEEP_CYCLES = int(2e8)  # torch.cuda._sleep's GPU cycles: at any clock far longer than any host call here


def stream_buffer(ctx, **config):
    buf = engram.Buffer(ctx.group, E, H, torch.bfloat16, T, K, recv="cuda", config=dict(ctx.config, **config),
                        stream_ordered=True)
    buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
    assert buf.stream_ordered
    return buf


def case_stream_hook_never_waits(ctx):
    """The GPU is held busy: fetch + hook return while the fetch has not
    run, and the rows are right for work queued behind them."""
    buf = stream_buffer(ctx)
    stream = torch.cuda.Stream()
    idx = ctx.indices()
    with torch.cuda.stream(stream):
        dev_idx = idx.cuda()
        torch.cuda._sleep(SLEEP_CYCLES)
        t0 = time.perf_counter()
        rows, sf = buf.engram_fetch(dev_idx)()
        took = time.perf_counter() - t0
        assert not stream.query(), "the stream finished before the hook returned: nothing was left to order"
        out = rows.view(torch.uint8).clone()  # stream-ordered consumer
    assert took < 0.02, "fetch + hook took %.1f ms with the GPU busy: it waited" % (took * 1e3)
    stream.synchronize()
    assert sf is None and torch.equal(out.cpu(), ctx.full_bytes[idx].reshape(T, K * H * 2))
    del rows, out
    buf.synchronize()
    buf.destroy()


def stream_bad_fetch(ctx, buf):
    """Queues a fetch with one bad index behind a sleep: its hook hands out
    rows and raises nothing. Returns the rows and, queued behind them, a
    copy of the bad index's row (zero-filled once the stream gets there)."""
    idx = ctx.indices()
    idx[6, 2] = -1
    dev_idx = idx.cuda()  # before the sleep: a copy from pageable memory returns once the stream has run it
    torch.cuda._sleep(SLEEP_CYCLES)
    rows, _ = buf.engram_fetch(dev_idx)()
    return rows, rows.view(torch.uint8).reshape(T, K, H * 2)[6, 2].clone()


def check_deferred(e):
    assert isinstance(e, engram.BadIndexError) and (e.count, e.first_token, e.first_entry) == (1, 6, 2), e
    assert "earlier stream-ordered fetch" in str(e) and e.rows is None, str(e)


def case_stream_hook_error_at_next_fetch(ctx):
    buf = stream_buffer(ctx)
    rows, zero = stream_bad_fetch(ctx, buf)
    torch.cuda.synchronize()
    assert not zero.any(), "the bad index's row is not zero-filled"
    del rows  # handed over to the buffer
    check_deferred(expect(engram.BadIndexError, buf.engram_fetch, ctx.indices().cuda()))
    hook = buf.engram_fetch(ctx.indices().cuda())  # raised once: the next fetch runs
    del hook
    buf.synchronize()
    buf.destroy()


def case_stream_hook_error_at_next_hook(ctx):
    buf = stream_buffer(ctx)
    idx = ctx.indices()
    dev_idx = idx.cuda()  # before the sleep: a copy from pageable memory returns once the stream has run it
    rows, zero = stream_bad_fetch(ctx, buf)
    hook = buf.engram_fetch(dev_idx)  # issued while the GPU still sleeps: nothing to raise yet
    torch.cuda.synchronize()
    check_deferred(expect(engram.BadIndexError, hook))
    good, _ = hook()  # a hook that raised without rows may be called again
    torch.cuda.synchronize()
    assert torch.equal(good.view(torch.uint8).cpu(), ctx.full_bytes[idx].reshape(T, K * H * 2))
    del rows, zero, good, hook
    buf.destroy()


def case_stream_hook_error_at_synchronize_and_destroy(ctx):
    buf = stream_buffer(ctx)
    rows, zero = stream_bad_fetch(ctx, buf)
    check_deferred(expect(engram.BadIndexError, buf.synchronize))  # waits for the GPU itself
    buf.synchronize()  # raised once
    del rows, zero
    rows, zero = stream_bad_fetch(ctx, buf)
    del rows, zero
    check_deferred(expect(engram.BadIndexError, buf.destroy))  # raised once torn down
    assert buf.destroyed


def case_stream_hook_timeout_at_synchronize(ctx):
    buf = stream_buffer(ctx, timeout_ms=1000, gpu_sms=0)  # gpu_sms=0: no timing at creation, well within 1 s
    dev_idx = ctx.indices().cuda()
    torch.cuda._sleep(SLEEP_CYCLES * 30)  # 6e9 cycles: seconds at any GPU clock, past timeout_ms
    rows, _ = buf.engram_fetch(dev_idx)()
    del rows
    e = expect(engram.TimeoutError, buf.synchronize, match="earlier stream-ordered fetch")
    del e
    torch.cuda.synchronize()
    buf.destroy()


def case_stream_hook_dropped_never_waits(ctx):
    """Behind a sleeping GPU, a hook released without being called, and
    one dropped, return at once (their slots freed in stream order); a bad
    index in one of them is raised later as any stream-ordered fetch's,
    and the fetches after them get their rows."""
    buf = stream_buffer(ctx)
    bad = ctx.indices()
    bad[6, 2] = -1
    idx = ctx.indices()
    dev_bad, dev_idx = bad.cuda(), idx.cuda()
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    t0 = time.perf_counter()
    for _ in range(8):  # twice the slots: each must be freed in stream order
        buf.engram_fetch(dev_idx).release()
        buf.engram_fetch(dev_idx)  # dropped at once
    buf.engram_fetch(dev_bad).release()
    rows, _ = buf.engram_fetch(dev_idx)()
    took = time.perf_counter() - t0
    assert took < 0.05, "released and dropped hooks took %.1f ms with the GPU busy: they waited" % (took * 1e3)
    assert not torch.cuda.current_stream().query(), "the GPU finished before the hooks returned"
    out = rows.view(torch.uint8).clone()
    del rows
    check_deferred(expect(engram.BadIndexError, buf.synchronize))
    assert torch.equal(out.cpu(), ctx.full_bytes[idx].reshape(T, K * H * 2))
    buf.destroy()


def case_stream_hook_slots_reused_in_stream_order(ctx):
    """40 fetches on one stream behind a sleeping GPU through 4 slots, each
    one's rows copied on the stream and dropped: every copy bit-exact (a
    slot is reused only after the work queued before its next fetch), and
    a fetch on another stream still gets a slot."""
    buf = stream_buffer(ctx)
    idx = [ctx.indices() for _ in range(40)]
    dev = [i.cuda() for i in idx]
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    t0 = time.perf_counter()
    copies = []
    for d in dev:
        rows, _ = buf.engram_fetch(d)()
        copies.append(rows.clone())
        del rows
    host_s = time.perf_counter() - t0
    assert host_s < 0.05, "40 fetches took %.1f ms on the host: they waited for the GPU" % (host_s * 1e3)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        other, _ = buf.engram_fetch(dev[0])()  # waits for a slot that the sleeping stream holds
        other = other.clone()
    torch.cuda.synchronize()
    for i, c in zip(idx, copies):
        assert torch.equal(c.view(torch.uint8).cpu(), ctx.full_bytes[i].reshape(T, K * H * 2)), "rows mismatch"
    assert torch.equal(other.view(torch.uint8).cpu(), ctx.full_bytes[idx[0]].reshape(T, K * H * 2))
    buf.synchronize()
    buf.destroy()


# -- engram.ElasticBuffer on the GPU ----------------------------------------

def elastic_buffer(ctx, dtype):
    gpu, cpu = engram.ElasticBuffer.get_engram_storage_size_hint(E, H, T * K, dtype)
    return engram.ElasticBuffer(ctx.group, num_bytes=gpu + cpu, num_cpu_bytes=cpu,
                                explicitly_destroy=True, num_allocated_qps=132, allow_multiple_reduction=False,
                                config=ctx.config)


def case_elastic_fp8_float32_sf_both_layouts(ctx):
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is None:
        raise Skip("torch has no float8_e4m3fn")
    buf = elastic_buffer(ctx, fp8)
    storage = ctx.shard_bytes[:, :H].contiguous().cuda().view(fp8)
    sf = ctx.scales.view(torch.float32).cuda()  # replicated, float32 as per_token_cast_to_fp8 makes them
    buf.engram_write(storage, sf=sf)
    idx = ctx.indices().to(torch.int32).cuda()
    ref_data = ctx.full_bytes[:, :H].cuda()[idx.view(-1).long()].view(T, -1)
    ref_sf = sf[idx.view(-1).long()].view(T, -1)
    for col_major in (False, True):
        data, fetched_sf = buf.engram_fetch(idx, use_tma_aligned_col_major_sf=col_major)()
        assert data.dtype == fp8 and torch.equal(ref_data, data.view(torch.uint8)), "data mismatch"
        assert fetched_sf.dtype == torch.float32
        assert torch.equal(ref_sf.view(torch.int32), fetched_sf.view(torch.int32)), "scales not bit-exact"
        del data, fetched_sf
    buf.destroy()


class Skip(Exception):
    """A case that cannot run here (ranks.py records the reason)."""


CASES = [(name[len("case_"):], fn) for name, fn in globals().items() if name.startswith("case_")]
