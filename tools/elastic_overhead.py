#!/usr/bin/env python3
"""elastic_overhead.py: what engram.ElasticBuffer adds per fetch + hook over
engram.Buffer, the same table and indices in one process.

    python3 tools/elastic_overhead.py --recv host            # CPU: loopback, host receive
    python3 tools/elastic_overhead.py --recv cuda --target-us 2

Both buffers hold DeepEP's test table on one rank (--entries x --hidden
bf16) and fetch --tokens x --entries-per-token int32 indices (DeepEP's
dtype; on recv=cuda in GPU memory). On recv=cuda both are stream-ordered
(ElasticBuffer's hook is; Buffer's with stream_ordered=True), so what is
compared is the host's cost per call. Rounds of --iters calls alternate
between the two; the medians of the rounds' per-call means are printed,
and their difference. --target-us: exit 1 when the difference is above it.
"""
import argparse
import statistics
import sys
import time


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recv", choices=["host", "cuda"], default="host")
    p.add_argument("--entries", type=int, default=524288)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--entries-per-token", type=int, default=24)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--target-us", type=float, default=None)
    a = p.parse_args(argv)
    for flag in ("entries", "hidden", "tokens", "entries_per_token", "rounds", "iters"):
        if getattr(a, flag) < 1:
            p.error("--%s must be >= 1" % flag.replace("_", "-"))
    return a


def per_call_us(fetch, idx, iters, sync):
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fetch(idx)()
    return (time.perf_counter() - t0) * 1e6 / iters


def main(argv=None):
    a = parse(argv)
    import torch

    import engram

    cuda = a.recv == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    group = engram.Group.solo()
    shard = torch.randn((a.entries, a.hidden)).to(torch.bfloat16)
    rows = a.tokens * a.entries_per_token
    plain = engram.Buffer(group, a.entries, a.hidden, torch.bfloat16, a.tokens, a.entries_per_token, recv=a.recv,
                          stream_ordered=cuda)
    gpu, cpu = engram.ElasticBuffer.get_engram_storage_size_hint(a.entries, a.hidden, rows, torch.bfloat16)
    elastic = engram.ElasticBuffer(group, num_bytes=gpu + cpu, num_cpu_bytes=cpu, explicitly_destroy=True,
                                   recv=a.recv)
    transport = plain.transport
    try:
        plain.engram_write(shard)
        elastic.engram_write(shard)
        idx = torch.randint(0, a.entries, (a.tokens, a.entries_per_token), dtype=torch.int32)
        if cuda:
            idx = idx.cuda()
        rounds = {"Buffer": [], "ElasticBuffer": []}
        fetches = {"Buffer": plain.engram_fetch, "ElasticBuffer": elastic.engram_fetch}
        for name in fetches:  # warm-up
            per_call_us(fetches[name], idx, 20, sync)
        for _ in range(a.rounds):
            for name, fetch in fetches.items():
                rounds[name].append(per_call_us(fetch, idx, a.iters, sync))
        sync()
    finally:
        plain.synchronize()
        elastic.synchronize()
        plain.destroy()
        elastic.destroy()
    p, e = statistics.median(rounds["Buffer"]), statistics.median(rounds["ElasticBuffer"])
    print("elastic overhead recv=%s transport=%s %d x %d: Buffer %.2f us, ElasticBuffer %.2f us per fetch + hook, "
          "ElasticBuffer adds %.2f us (medians of %d rounds of %d)"
          % (a.recv, transport, a.tokens, a.entries_per_token, p, e, e - p, a.rounds, a.iters), flush=True)
    if a.target_us is not None and e - p > a.target_us:
        print("elastic overhead: above the target of %.2f us" % a.target_us, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
