#!/usr/bin/env python3
"""engram_fetch.py: DeepEP's engram test shape through the engram Python
package. Every rank writes its shard, fetches num_tokens x
num_entries_per_token random global entries per iteration, checks the rows
bit for bit against the all-gathered table once, and prints issue and wait
microseconds, GB/s and MPPS (rows per second) per rank.

    python3 examples/python/engram_fetch.py                 # 4 ranks (fork launcher), recv=cuda if a GPU, else host
    python3 examples/python/engram_fetch.py --recv host --ranks 2 --entries 65536
    python3 examples/python/engram_fetch.py --overhead      # + the same fetch timed through the C API alone

Defaults are DeepEP's: 524,288 entries per rank, hidden 128 bf16 (256-byte
rows), 512 tokens x 24 entries. Ranks share the GPUs round-robin.
"""
import argparse
import os
import statistics
import sys
import time

import engram


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ranks", type=int, default=0, help="ranks (default: 4, or the GPUs if fewer than 4 and more than 1)")
    p.add_argument("--local-size", type=int, default=0, help="ranks per emulated node (0 = one node)")
    p.add_argument("--entries", type=int, default=524288, help="entries per rank (DeepEP's num_entries)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--entries-per-token", type=int, default=24)
    p.add_argument("--fp8", action="store_true", help="float8_e4m3fn rows with hidden/32 scale packs")
    p.add_argument("--recv", choices=["auto", "cuda", "host"], default="auto")
    p.add_argument("--gpu-table", choices=["host_numa", "device"], default="host_numa")
    p.add_argument("--hybrid", action="store_true", help="allow_hybrid_mode=True")
    p.add_argument("--transport", default="auto")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--rounds", type=int, default=20, help="--overhead: alternating C / Python rounds of --iters each")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--overhead", action="store_true",
                   help="also time the same fetch/wait/release through the C API (no Python between) and print "
                        "the per-fetch cost the Python layer adds")
    a = p.parse_args(argv)
    # Shapes (entries, hidden, tokens, ...) are the library's to refuse; these
    # are the script's own counts.
    for flag, least in (("iters", 1), ("rounds", 1), ("warmup", 0), ("ranks", 0), ("local_size", 0)):
        if getattr(a, flag) < least:
            p.error("--%s must be >= %d, got %d" % (flag.replace("_", "-"), least, getattr(a, flag)))
    return a


def torch_or_none():
    try:
        import torch
        return torch
    except ImportError:
        return None


def make_shard(torch, rank, entries, width):
    """Rank `rank`'s shard, [entries, width] random bytes from a per-rank seed
    (so every rank can rebuild every shard for the reference)."""
    if torch is not None:
        gen = torch.Generator().manual_seed(1234 + rank)
        return torch.randint(0, 256, (entries, width), dtype=torch.uint8, generator=gen)
    import numpy as np
    return np.random.default_rng(1234 + rank).integers(0, 256, (entries, width), dtype=np.uint8)


def make_indices(torch, seed, total, a):
    if torch is not None:
        gen = torch.Generator().manual_seed(seed)
        return torch.randint(0, total, (a.tokens, a.entries_per_token), dtype=torch.int64, generator=gen)
    import numpy as np
    return np.random.default_rng(seed).integers(0, total, (a.tokens, a.entries_per_token), dtype=np.int64)


def rows_as_bytes(torch, rows):
    if torch is not None:
        return rows.contiguous().view(torch.uint8).cpu().reshape(rows.shape[0], -1)
    return rows.view("uint8").reshape(rows.shape[0], -1)


def rank_main(group, a):
    torch = torch_or_none()
    cuda = a.recv == "cuda"
    if cuda:
        torch.cuda.set_device(group.local_rank % torch.cuda.device_count())
    dtype = "float8_e4m3fn" if a.fp8 else "bfloat16"
    item = 1 if a.fp8 else 2
    packs = (a.hidden + 31) // 32 if a.fp8 else 0
    width = a.hidden * item
    shard = make_shard(torch, group.rank, a.entries, width)
    total = group.size * a.entries
    scales = None
    if packs:  # the replicated global scales: one seed everywhere
        scales = (torch.randint(0, 2**31 - 1, (total, packs), dtype=torch.int32) if torch is not None else
                  __import__("numpy").random.default_rng(5).integers(0, 2**31 - 1, (total, packs), dtype="int32"))
    config = {"transport": a.transport, "gpu_table": a.gpu_table}
    with engram.Buffer(group, a.entries, a.hidden, dtype, a.tokens, a.entries_per_token, num_sf_packs=packs,
                       recv=a.recv, allow_hybrid_mode=a.hybrid, config=config) as buf:
        if a.fp8:
            buf.engram_write(shard, scales)
        else:
            buf.engram_write(shard.view(torch.bfloat16) if torch is not None else shard.view("uint16"))
        idx_sets = [make_indices(torch, 77 * group.rank + i, total, a) for i in range(8)]
        if cuda:
            idx_sets = [i.cuda() for i in idx_sets]
            sync = torch.cuda.current_stream().synchronize
        else:
            sync = lambda: None  # noqa: E731

        # correctness once, bit for bit, against the table rebuilt from every rank's seed
        rows, sf = buf.engram_fetch(idx_sets[0])()
        got = rows_as_bytes(torch, rows)
        del rows, sf
        shards = [make_shard(torch, r, a.entries, width) for r in range(group.size)]
        full = torch.cat(shards) if torch is not None else __import__("numpy").concatenate(shards)
        idx0 = idx_sets[0].cpu() if cuda else idx_sets[0]
        want = full[idx0].reshape(a.tokens, -1)
        same = torch.equal(got, want) if torch is not None else bool((got == want).all())
        assert same, "rank %d: rows differ from the reference" % group.rank
        del full, shards, got, want

        issue, wait = [], []
        for i in range(a.warmup + a.iters):
            idx = idx_sets[i % len(idx_sets)]
            group.barrier()
            t0 = time.perf_counter()
            hook = buf.engram_fetch(idx)
            t1 = time.perf_counter()
            rows, sf = hook()
            sync()
            t2 = time.perf_counter()
            del rows, sf, hook  # the receive slot is free again once no view of it is left
            if i >= a.warmup:
                issue.append((t1 - t0) * 1e6)
                wait.append((t2 - t1) * 1e6)
        rows_per_fetch = a.tokens * a.entries_per_token
        us = statistics.median([x + y for x, y in zip(issue, wait)])
        gbs = rows_per_fetch * a.hidden * item / (us * 1e-6) / 1e9
        line = ("rank %d/%d transport=%s recv=%s%s: issue %.1f us, wait %.1f us (medians of %d), %.2f GB/s, "
                "%.2f MPPS" % (group.rank, group.size, buf.transport, a.recv,
                               " gpu_table=%s" % a.gpu_table if cuda else "", statistics.median(issue),
                               statistics.median(wait), a.iters, gbs, rows_per_fetch / us))
        print(line, flush=True)
        if a.overhead:
            overhead(group, buf, idx_sets[1], a, torch, cuda)
    return 0


def c_fetch_loop():
    """c_fetch_loop.c (beside this script) built against the installed
    library and loaded: the C side of --overhead."""
    import ctypes
    import shutil
    import subprocess
    import tempfile

    from engram import _build_info

    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        raise SystemExit("--overhead: no C compiler to build c_fetch_loop.c")
    libdir = _build_info.LIBDIRS[0]
    out = os.path.join(tempfile.mkdtemp(prefix="engram-c-fetch-"), "c_fetch_loop.so")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "c_fetch_loop.c")
    r = subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Werror", "-fPIC", "-shared",
                        "-I" + os.path.join(libdir, "..", "include"), src, "-L" + libdir, "-lengram", "-o", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("--overhead: building %s failed:\n%s" % (src, r.stderr))
    fn = ctypes.CDLL(out).c_fetch_loop
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                   ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
    fn.restype = ctypes.c_int

    def run(buf, idx, iters, stream, cuda):
        issue, wait = ctypes.c_double(), ctypes.c_double()
        ptr = idx.data_ptr() if hasattr(idx, "data_ptr") else idx.ctypes.data
        st = fn(buf._table._c_table, ptr, idx.shape[0], iters, int(cuda), stream, ctypes.byref(issue),
                ctypes.byref(wait))
        if st != 0:
            raise engram.Error("--overhead: the C loop's fetch failed: %s" % engram._engram.status_str(st))
        return issue.value, wait.value

    return run


def overhead(group, buf, idx, a, torch, cuda):
    """The same fetch + wait + release, a loop in C (no Python between)
    against a loop in Python (engram_fetch, hook(), the tensors dropped), in
    alternating rounds that every rank runs at once, so both loops see the
    same load from the other ranks."""
    stream = torch.cuda.current_stream().cuda_stream if cuda else None
    c_us, py_us = [], []
    for rnd in range(2 * a.rounds):
        group.barrier()
        if rnd % 2 == 0:
            issue_ns, wait_ns = a.c_loop(buf, idx, a.iters, stream, cuda)
            c_us.append((issue_ns + wait_ns) / 1e3)
        else:
            t0 = time.perf_counter_ns()
            for _ in range(a.iters):
                rows, sf = buf.engram_fetch(idx)()
                del rows, sf
            if cuda:
                torch.cuda.current_stream().synchronize()
            py_us.append((time.perf_counter_ns() - t0) / a.iters / 1e3)
    c, py = statistics.median(c_us), statistics.median(py_us)
    print("overhead rank %d: %d x %d, per fetch: C API %.2f us, Python %.2f us, Python adds %.2f us "
          "(medians of %d rounds of %d fetches)" % (group.rank, a.tokens, a.entries_per_token, c, py, py - c,
                                                    len(c_us), a.iters), flush=True)


def gpu_count():
    """GPUs without a CUDA call: the ranks are forked, and a child of a
    process that initialised CUDA cannot use it."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and not d.strip().startswith("-")])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def main():
    a = parse()
    gpus = gpu_count() if torch_or_none() is not None else 0
    if a.recv == "auto":
        a.recv = "cuda" if gpus else "host"
    if a.recv == "cuda" and not gpus:
        sys.exit("engram_fetch.py: --recv cuda needs a GPU")
    if not a.ranks:
        a.ranks = 4 if gpus == 0 or gpus >= 4 else max(gpus, 2)
    a.c_loop = c_fetch_loop() if a.overhead else None  # built once; the ranks inherit it
    try:
        engram.launch(a.ranks, rank_main, a, local_size=a.local_size)
    except engram.Error as e:  # each failed rank printed its own error above
        sys.exit("engram_fetch.py: %s" % e)


if __name__ == "__main__":
    main()
