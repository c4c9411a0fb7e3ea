"""engram.ElasticBuffer on host receive, the cases of test_elastic.py (run
on gloo ranks by ranks.py): DeepEP's constructor from byte sizes, the table
made at the first engram_write from the storage's shape and dtype, the
scales handed back in the dtype written (both layouts), any entries per
token, and every refusal. FP8 storage is emulated by uint8 (torch 1.13 has
no float8): the same bytes and the same scale path."""
import random
import torch
import torch.distributed as dist

import engram
from cpu_cases import allgather, expect

E, H, T, K, P = 500, 128, 37, 24, 2  # entries per rank, hidden, tokens (odd: col-major rounding), per token, packs
MIB2 = 2 << 20


class Context:
    def __init__(self, rank, world, config):
        self.rank, self.world, self.config = rank, world, dict(config)
        gen = torch.Generator().manual_seed(4000 + rank)
        self.shard = torch.randint(0, 256, (E, H), dtype=torch.uint8, generator=gen)  # fp8-sized rows
        self.full = allgather(self.shard)
        self.bf16 = torch.randn((E, H // 2), generator=gen).to(torch.bfloat16)  # as DeepEP's test: no NaN bits
        self.full_bf16 = allgather(self.bf16.view(torch.uint8)).view(torch.bfloat16)  # gloo: bytes
        # replicated scales, one seed everywhere: float32 as DeepEP's per_token_cast_to_fp8 makes them
        self.sf = torch.rand((world * E, P), generator=torch.Generator().manual_seed(11)) * 1e-3
        self.indices = torch.randint(0, world * E, (T, K), dtype=torch.int32,
                                     generator=torch.Generator().manual_seed(90 + rank))

    def buffer(self, dtype="bfloat16", hidden=H // 2, tokens=T * K, **kwargs):
        gpu, cpu = engram.ElasticBuffer.get_engram_storage_size_hint(E, hidden, tokens, dtype)
        return engram.ElasticBuffer(dist.group.WORLD, num_bytes=gpu + cpu, num_cpu_bytes=cpu,
                                    explicitly_destroy=True, recv="host", config=self.config, **kwargs)


def case_size_hint_is_deepeps(ctx):
    for dtype, size in (("bfloat16", 2), ("float8_e4m3fn", 1), (torch.bfloat16, 2)):
        for entries, hidden, tokens in ((524288, 128, 512 * 24), (3, 7, 1), (1000, 4096, 0)):
            entry = (hidden * size + 31) // 32 * 32  # DeepEP: entries aligned to 32 bytes, sizes to 2 MiB
            want = ((entry * tokens + MIB2 - 1) // MIB2 * MIB2, (entry * entries + MIB2 - 1) // MIB2 * MIB2)
            got = engram.ElasticBuffer.get_engram_storage_size_hint(entries, hidden, num_max_tokens_per_rank=tokens,
                                                                    dtype=dtype)
            assert got == want, (dtype, entries, hidden, tokens, got, want)
    expect(engram.InvalidArgumentError, engram.ElasticBuffer.get_engram_storage_size_hint, 0, 128, 1)


def case_constructor_defaults_and_attributes(ctx):
    buf = ctx.buffer(num_allocated_qps=3, allow_multiple_reduction=False)
    assert buf.rank_idx == ctx.rank and buf.num_ranks == ctx.world
    assert buf.allow_hybrid_mode is True and buf.allow_multiple_reduction is False and buf.explicitly_destroy
    assert buf.num_allocated_qps == 3  # before the table exists: as asked
    buf.engram_write(ctx.bf16)
    assert buf.num_allocated_qps == 3
    buf.barrier()
    buf.barrier(with_cpu_sync=True)
    buf.destroy()
    buf.destroy()  # harmless twice
    many = ctx.buffer(num_allocated_qps=1 << 20)  # more than the transport offers: all of them
    many.engram_write(ctx.bf16)
    assert 1 <= many.num_allocated_qps < 1 << 20
    many.destroy()


def case_constructor_refusals(ctx):
    gpu, cpu = engram.ElasticBuffer.get_engram_storage_size_hint(E, H, T * K)
    g = dist.group.WORLD
    expect(NotImplementedError, engram.ElasticBuffer, g, match="get_engram_storage_size_hint")
    expect(engram.InvalidArgumentError, engram.ElasticBuffer, g, num_bytes=gpu + cpu + 4096, num_cpu_bytes=cpu,
           match="multiple of 2 MiB")
    expect(engram.InvalidArgumentError, engram.ElasticBuffer, g, num_bytes=gpu + cpu, num_cpu_bytes=cpu + 1,
           match="multiple of 2 MiB")
    expect(engram.InvalidArgumentError, engram.ElasticBuffer, g, num_bytes=cpu, num_cpu_bytes=cpu,
           match="num_cpu_bytes")
    expect(engram.InvalidArgumentError, engram.ElasticBuffer, g, num_bytes=gpu + cpu, num_cpu_bytes=cpu,
           recv="disk", match="recv")
    expect(engram.InvalidArgumentError, engram.ElasticBuffer, g, num_bytes=gpu + cpu, num_cpu_bytes=cpu,
           num_allocated_qps=-1, match="num_allocated_qps")


def case_shape_at_first_write_bf16(ctx):
    buf = ctx.buffer()
    expect(engram.StateError, buf.engram_fetch, ctx.indices, match="before any engram_write")
    buf.engram_write(ctx.bf16)
    data, sf = buf.engram_fetch(ctx.indices)()
    assert sf is None and data.dtype == torch.bfloat16 and tuple(data.shape) == (T, K * H // 2)
    ref = ctx.full_bf16[ctx.indices.view(-1).long()].view(T, -1)  # DeepEP's test's reference
    assert torch.equal(ref, data)
    del data
    # any entries per token, learned at each fetch as DeepEP's; int64 indices too
    idx = ctx.indices[:, :5].contiguous().long()
    data, _ = buf.engram_fetch(idx)()
    assert tuple(data.shape) == (T, 5 * H // 2) and torch.equal(data, ctx.full_bf16[idx.view(-1)].view(T, -1))
    del data
    buf.destroy()


def case_destroy_with_live_views(ctx):
    """DeepEP's test destroys while its last fetch's tensors are alive: the
    destroy goes through (engram.Buffer would say BusyError)."""
    buf = ctx.buffer()
    buf.engram_write(ctx.bf16)
    data, _ = buf.engram_fetch(ctx.indices)()
    kept = buf.engram_fetch(ctx.indices)  # a hook never called
    assert torch.equal(data, ctx.full_bf16[ctx.indices.view(-1).long()].view(T, -1))
    buf.destroy()
    buf.destroy()  # harmless twice
    expect(engram.StateError, buf.engram_fetch, ctx.indices, match="destroyed")
    del data, kept


def case_views_outliving_destroy_read_zeros(ctx):
    """Tensors a destroy left viewing fetched rows (DeepEP's lifetime: not
    to be used after) read zeros and keep what is written to them, instead
    of reading freed pages and killing the process."""
    buf = ctx.buffer(dtype="float8_e4m3fn", hidden=H)
    buf.engram_write(ctx.shard, sf=ctx.sf)
    data, sf = buf.engram_fetch(ctx.indices)()
    rows = data.numpy()  # another consumer's view of the same memory
    assert data.any() and sf.any()
    buf.destroy()
    assert not data.any() and not rows.any(), "a destroyed buffer's rows still read as rows"
    assert not sf.any(), "a destroyed buffer's scales still read as scales"
    data[0, 0] = 7
    sf[0, 0] = 2.0
    assert rows[0, 0] == 7 and sf[0, 0] == 2.0
    del data, rows, sf


def case_destroy_after_fetches_die_in_any_order(ctx):
    """Fetch objects ending in any order (the buffer's list of them stays
    whole), some left alive with views or uncalled hooks: destroy detaches
    exactly those and goes through."""
    buf = ctx.buffer()
    buf.engram_write(ctx.bf16)
    kept, order = [], list(range(12))
    random.Random(3).shuffle(order)
    for k in order:
        hooks = [buf.engram_fetch(ctx.indices) for _ in range(2)]
        data = [h()[0] for h in hooks]
        if k % 6 == 0:
            kept.append(data[k % 4 // 2])  # a view alive at destroy (2 in all)
        del data, hooks
    kept.append(buf.engram_fetch(ctx.indices))  # a hook never called
    assert torch.equal(kept[0], ctx.full_bf16[ctx.indices.view(-1).long()].view(T, -1))
    buf.destroy()
    del kept


def check_sf(ctx, sf_written):
    buf = ctx.buffer(dtype="float8_e4m3fn", hidden=H)
    buf.engram_write(ctx.shard, sf=sf_written)
    ref_data = ctx.full[ctx.indices.view(-1).long()].view(T, -1)
    ref_sf = sf_written[ctx.indices.view(-1).long()].view(T, -1)
    for col_major in (False, True):
        data, sf = buf.engram_fetch(ctx.indices, use_tma_aligned_col_major_sf=col_major)()
        assert torch.equal(ref_data, data), "data mismatch"
        assert sf.dtype == sf_written.dtype, (sf.dtype, sf_written.dtype)
        assert torch.equal(ref_sf, sf), "scaling-factor mismatch (col_major=%s)" % col_major
        assert torch.equal(ref_sf.view(torch.int32), sf.view(torch.int32)), "scales not bit-exact"
        assert sf.stride() == ((1, (T + 3) // 4 * 4) if col_major else (K * P, 1)), sf.stride()
        del data, sf
    buf.destroy()


def case_sf_float32_as_written(ctx):
    check_sf(ctx, ctx.sf)


def case_sf_int32_packs_as_written(ctx):
    check_sf(ctx, ctx.sf.view(torch.int32))  # packed UE8M0x4, DeepEP's other pack


def case_later_write_of_another_layout_refused(ctx):
    buf = ctx.buffer(dtype="float8_e4m3fn", hidden=H)
    buf.engram_write(ctx.shard, sf=ctx.sf)
    for storage, sf, what in ((ctx.shard[:, :64].contiguous(), ctx.sf, "storage [500, 64]"),
                              (ctx.bf16, ctx.sf, "bfloat16"),
                              (ctx.shard, ctx.sf[:, :1].contiguous(), "with 1 scale packs"),
                              (ctx.shard, ctx.sf.to(torch.float64).to(torch.float32).view(torch.int32), "int32"),
                              (ctx.shard, None, "with 0 scale packs")):
        e = expect(engram.InvalidArgumentError, buf.engram_write, storage, sf,
                   match="made by the first engram_write")
        assert what in str(e), (what, str(e))
    buf.engram_write(ctx.shard.flip(0).contiguous(), sf=ctx.sf)  # the same layout: written
    data, sf = buf.engram_fetch(ctx.indices)()
    want = allgather(ctx.shard.flip(0).contiguous())[ctx.indices.view(-1).long()].view(T, -1)
    assert torch.equal(data, want)
    del data, sf  # both view the slot
    buf.destroy()


def case_first_write_refusals_reach_every_rank(ctx):
    # one rank's bad storage: every rank raises (none waits in a collective)
    buf = ctx.buffer()
    bad = ctx.bf16[:, :3].contiguous() if ctx.rank == 1 else ctx.bf16
    e = expect(engram.InvalidArgumentError, buf.engram_write, bad, match="disagree")
    assert "hidden" in str(e), str(e)
    one_d = ctx.bf16.view(-1) if ctx.rank == 0 else ctx.bf16
    expect(engram.InvalidArgumentError, buf.engram_write, one_d, match="2-D tensor")
    buf.engram_write(ctx.bf16)  # still usable: the table is made now
    buf.destroy()
    small = ctx.buffer(dtype="bfloat16", hidden=8)  # num_cpu_bytes sized for 8-wide rows: 2 MiB
    big = torch.zeros((E * 40, H * 2), dtype=torch.bfloat16)
    expect(engram.InvalidArgumentError, small.engram_write, big, match="exceeds num_cpu_bytes")
    expect(engram.InvalidArgumentError, small.engram_write, ctx.bf16, ctx.sf[:, :1].to(torch.float16),
           match="4-byte packs")
    small.destroy()


def case_fetch_refusals(ctx):
    buf = ctx.buffer(tokens=T * K)
    buf.engram_write(ctx.bf16)
    rows = ((2 * MIB2) // (H // 2 * 2))  # the receive area holds 2 MiB of rows
    too_many = torch.zeros((rows // K + 1, K), dtype=torch.int32)
    expect(engram.InvalidArgumentError, buf.engram_fetch, too_many, match="exceed the receive buffer")
    expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices.view(-1), match="num_entries_per_token")
    expect(engram.InvalidArgumentError, buf.engram_fetch, ctx.indices.float(), match="int32 or int64")
    bad = ctx.indices.clone()
    bad[4, 7] = ctx.world * E
    e = expect(engram.BadIndexError, buf.engram_fetch(bad), match="first at token 4 entry 7")
    assert (e.count, e.first_token, e.first_entry) == (1, 4, 7)
    assert not e.rows.view(T, K, -1)[4, 7].any()
    del e
    buf.destroy()


def case_not_engrams_scope(ctx):
    buf = ctx.buffer()
    for name in ("dispatch", "combine", "pp_send", "all_gather", "get_comm_stream"):
        e = expect(NotImplementedError, getattr(buf, name), None)
        assert name in str(e) and "engram_fetch" in str(e), str(e)
    expect(NotImplementedError, engram.ElasticBuffer.get_buffer_size_hint, None, 1, 1)
    buf.destroy()  # never written: nothing to tear down


def case_host_buffer_refuses_stream_order(ctx):
    expect(engram.InvalidArgumentError, engram.Buffer, engram.Group.from_torch(), E, H, torch.bfloat16, T, K,
           recv="host", stream_ordered=True, match="recv='cuda'")


CASES = [(name[len("case_"):], fn) for name, fn in globals().items() if name.startswith("case_")]
