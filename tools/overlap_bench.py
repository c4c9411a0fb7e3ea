#!/usr/bin/env python3
"""Fetch beside compute: a bf16 GEMM stream and a fetch stream on one GPU,
all in one run.

For each fetch shape (default 512x24 and 8192x24 rows of 256 B from a
1M-row host table) it measures, on the same GPU in the same process:

  gemm    N bf16 M^3 GEMMs alone on their stream
  h2d     a contiguous pinned host-to-device copy of the fetch's bytes, alone
          and beside the GEMMs (what the fetch is held against)
  engram  engram_fetch (recv='cuda', table in host memory) on the UVA
          kernel at gpu_sms = 4, 8, 16, all (0) and auto, and (--sms
          host_gather) on host threads and the copy engine: alone, and
          beside the GEMMs
  torch   torch.index_select on a UVA view of a pinned host copy of the
          table (the reference a PyTorch user writes), alone and beside

With --ranks N (> 1) the table is sharded over N ranks of one node (engram's
fork launcher; each rank's shard in its own host memory, all ranks on this
GPU): rank 0 runs the GEMMs and fetches rows from every rank's shard, the
others hold their shards (gpu_sms=1, no calibration beside rank 0's).

and reports, per fetcher: fetch alone, both, max/both = max(gemm alone,
fetch alone) / both, the GEMM's slowdown while overlapped, and the fetch's
GB/s while overlapped against the h2d copy's GB/s while overlapped.

The number of fetches per run defaults to as many as take about as long as
the GEMMs (the hardest case for overlap); --fetches fixes it.

    python3 tools/overlap_bench.py [--json out.jsonl] [--indices trace.npy] [--ranks 4]

Needs torch with CUDA and the engram Python package (python/);
ENGRAM_LOG_LEVEL=info prints gpu_sms=auto's choice when a table is created.
Output: one JSON object per measurement on stdout (or --json), then a table.
"""
import argparse
import collections
import ctypes
import importlib
import json
import logging
import os
import sys
import time


WHAT = {"engram": "the engram Python package (python/README.md)", "torch": "torch with CUDA", "numpy": "numpy"}


def need(name):
    """The module, or a clear exit where it is not importable."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise SystemExit("overlap_bench: needs %s: %s" % (WHAT[name], e))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1 << 20, help="host table rows [1048576]")
    p.add_argument("--hidden", type=int, default=128, help="bf16 elements per row [128 = 256 B]")
    p.add_argument("--shapes", default="512x24,8192x24", help="fetch shapes TOKENSxENTRIES [512x24,8192x24]")
    p.add_argument("--sms", default="4,8,16,all,auto",
                   help="engram gpu_sms values of the UVA kernel, or host_gather (no SM) [4,8,16,all,auto]")
    p.add_argument("--gemm-size", type=int, default=8192, help="M = N = K of the bf16 GEMM [8192]")
    p.add_argument("--gemms", type=int, default=20, help="GEMMs per run [20]")
    p.add_argument("--fetches", type=int, default=0, help="fetches per run; 0 = about the GEMMs' time [0]")
    p.add_argument("--repeats", type=int, default=3, help="runs per measurement; the median counts [3]")
    p.add_argument("--indices", help=".npy of int32/int64 [steps, tokens, entries_per_token]: replay it "
                                     "(its shape replaces --shapes)")
    p.add_argument("--no-torch-ref", action="store_true", help="skip the torch.index_select UVA reference")
    p.add_argument("--json", help="append the JSON lines to this file instead of stdout")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ranks", type=int, default=1,
                   help="ranks of one node sharing the table's host memory (fork launcher) [1]")
    args = p.parse_args(argv)
    for flag, least in (("rows", 1), ("hidden", 1), ("gemm_size", 1), ("gemms", 1), ("repeats", 1), ("fetches", 0)):
        if getattr(args, flag) < least:
            raise SystemExit("overlap_bench: --%s must be >= %d, got %d" % (flag.replace("_", "-"), least,
                                                                             getattr(args, flag)))
    if args.ranks < 1 or args.rows % args.ranks:
        raise SystemExit("overlap_bench: --ranks must be >= 1 and divide --rows (%d), got %d"
                         % (args.rows, args.ranks))
    return args


def parse_shapes(text):
    shapes = []
    for part in text.split(","):
        tok, _, ept = part.strip().partition("x")
        if not tok.isdigit() or not ept.isdigit() or int(tok) < 1 or int(ept) < 1:
            raise SystemExit("overlap_bench: --shapes wants TOKENSxENTRIES[,...], got %r" % part)
        shapes.append((int(tok), int(ept)))
    return shapes


def parse_sms(text):
    out = []
    for v in text.split(","):
        v = v.strip()
        if v == "all":
            out.append(("all", "0"))
        elif v in ("auto", "host_gather") or (v.isdigit() and int(v) > 0):
            out.append((v, v))
        else:
            raise SystemExit("overlap_bench: --sms values are positive integers, all, auto or host_gather; got %r"
                             % v)
    return out


def load_trace(path, rows):
    """[steps, tokens, ept] int64 from an .npy of int32/int64."""
    np = need("numpy")
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:  # missing, unreadable, not an .npy
        raise SystemExit("overlap_bench: --indices %s: %s" % (path, e))
    if a.ndim != 3 or a.dtype not in (np.int32, np.int64):
        raise SystemExit("overlap_bench: %s: want int32/int64 [steps, tokens, entries_per_token], got %s %s"
                         % (path, a.dtype, a.shape))
    if a.size == 0:
        raise SystemExit("overlap_bench: %s holds no indices" % path)
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= rows:
        raise SystemExit("overlap_bench: %s: indices span [%d, %d], the table has %d rows (--rows)"
                         % (path, lo, hi, rows))
    return a.astype(np.int64)


class Timer:
    """Wall time of work queued on streams, from an idle GPU to an idle GPU,
    plus each stream's own span (events at its first and last work)."""

    def __init__(self, torch):
        self.torch = torch

    def run(self, parts):
        """parts: {name: (stream, fn)}; fn queues its work (and may block the
        host, as a fetch loop calling hooks does). Returns (wall_ms,
        {name: stream_ms}); the parts are queued in order."""
        torch = self.torch
        torch.cuda.synchronize()
        marks = {}
        t0 = time.perf_counter()
        for name, (stream, fn) in parts.items():
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(stream):
                start.record(stream)
                fn()
                stop.record(stream)
            marks[name] = (start, stop)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3
        return wall, {n: s.elapsed_time(e) for n, (s, e) in marks.items()}


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


# One repeat of a measurement, in ms: the GEMMs alone, the fetches alone,
# both (wall), and each stream's span while both ran.
Repeat = collections.namedtuple("Repeat", "gemm_alone fetch_alone both gemm_beside fetch_beside")


def paired_summary(repeats, bytes_per_run, h2d_gbps_beside):
    """A record's figures from its repeats. The GEMM's slowdown and
    max/both are taken within each repeat, then their median: the GEMMs'
    own time drifts over a run as the GPU's clocks follow its power and
    heat (docs/BENCHMARKS.md, "GPU fetch beside GEMMs"), which one
    GEMM-alone figure taken at another time would carry into every ratio."""
    def col(name):
        return [getattr(r, name) for r in repeats]
    fetch_gbps_alone = bytes_per_run / median(col("fetch_alone")) / 1e6
    fetch_gbps_beside = bytes_per_run / median(col("fetch_beside")) / 1e6
    return {"gemm_alone_ms": round(median(col("gemm_alone")), 3),
            "fetch_alone_ms": round(median(col("fetch_alone")), 3),
            "both_ms": round(median(col("both")), 3),
            "max_over_both": round(median([max(r.gemm_alone, r.fetch_alone) / r.both for r in repeats]), 4),
            "gemm_beside_ms": round(median(col("gemm_beside")), 3),
            "gemm_slowdown": round(median([r.gemm_beside / r.gemm_alone for r in repeats]), 4),
            "fetch_beside_ms": round(median(col("fetch_beside")), 3),
            "fetch_gbps_alone": round(fetch_gbps_alone, 2),
            "fetch_gbps_beside": round(fetch_gbps_beside, 2),
            "fetch_over_h2d_beside": round(fetch_gbps_beside / h2d_gbps_beside, 4) if h2d_gbps_beside else None}


class UvaTable:
    """The host table pinned (cudaHostRegister) and viewed on the GPU through
    UVA as an int16 tensor, for torch.index_select: the PyTorch user's way."""

    def __init__(self, torch, host):
        self.torch = torch
        self.host = host.contiguous().view(torch.int16)
        cudart = torch.cuda.cudart()
        nbytes = self.host.numel() * self.host.element_size()
        err = cudart.cudaHostRegister(self.host.data_ptr(), nbytes, 2)  # cudaHostRegisterMapped
        if int(err) != 0:
            raise RuntimeError("cudaHostRegister of the %d-byte host table failed: %s" % (nbytes, err))
        self._registered = True
        dev_ptr = self._device_pointer(self.host.data_ptr())
        holder = self

        class View:
            __cuda_array_interface__ = {"shape": tuple(holder.host.shape), "typestr": "<i2",
                                        "data": (dev_ptr, False), "version": 2, "strides": None}
        self._view = View()
        self.dev = torch.as_tensor(self._view, device="cuda")

    @staticmethod
    def _device_pointer(host_ptr):
        """cudaHostGetDevicePointer through libcudart (the pointer itself on
        UVA systems, asked for all the same)."""
        torch = need("torch")
        lib = None
        for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
            for f in sorted(os.listdir(torch_lib)) if os.path.isdir(torch_lib) else []:
                if f.startswith("libcudart"):
                    lib = ctypes.CDLL(os.path.join(torch_lib, f))
                    break
        if lib is None:
            return host_ptr  # UVA: host pointers of mapped pinned memory are device pointers
        out = ctypes.c_void_p()
        err = lib.cudaHostGetDevicePointer(ctypes.byref(out), ctypes.c_void_p(host_ptr), 0)
        if err != 0:
            raise RuntimeError("cudaHostGetDevicePointer failed: error %d" % err)
        return out.value

    def close(self):
        if self._registered:
            self.torch.cuda.cudart().cudaHostUnregister(self.host.data_ptr())
            self._registered = False


# Receive slots per table: the fetch loop keeps FETCH_SLOTS - 1 fetches in
# flight, so a pause of the Python host loop, which can outlast a whole
# fetch at 512 x 24, does not leave the fetch stream empty, which would
# hand its SMs to the GEMM's waiting blocks.
FETCH_SLOTS = 8


def make_table(torch, args):
    """The global table, the same in every rank: random bf16 bits (the
    bit-exact check compares bytes)."""
    g = torch.Generator().manual_seed(args.seed)
    return torch.randint(-32768, 32767, (args.rows, args.hidden), dtype=torch.int16, generator=g).view(torch.bfloat16)


class Shards:
    """engram tables over the group: rank r writes rows [r*n, (r+1)*n) of
    the global table. Creating, writing and destroying are collective: every
    rank walks the same sequence of tables (rank 0 measures, see follow)."""

    def __init__(self, group, args, table):
        self.group, self.args, self.table = group, args, table

    def open(self, tokens, ept, gpu_sms):
        engram = need("engram")
        per = self.args.rows // self.group.size
        config = {"gpu_path": "uva", "gpu_sms": gpu_sms, "fetch_slots": str(FETCH_SLOTS)}
        if gpu_sms == "host_gather":
            config.update(gpu_path="host_gather", gpu_sms="auto")
        elif self.group.rank != 0:
            config["gpu_sms"] = "1"  # holds a shard, fetches nothing: no calibration beside rank 0's
        buf = engram.Buffer(self.group, per, self.args.hidden, self.table.dtype, tokens, ept, recv="cuda",
                            config=config)
        try:
            lo = self.group.rank * per
            buf.engram_write(self.table[lo:lo + per])
        except BaseException:
            buf.destroy()
            raise
        return buf

    def close(self, buf):
        """After rank 0's measurement: the others wait for it here. Rank 0
        prints the table's counters (Buffer.stats())."""
        if self.group.rank == 0:
            s = buf.stats()
            print("  stats: %d fetches, %d rows, %.1f MiB, %d bad rows, %d repeats, %d cache hits, path %s%s, "
                  "%.3f s waiting" % (s["fetches"], s["rows"], s["bytes"] / 2**20, s["bad_rows"], s["repeats"],
                                      s["cache_hits"], s["path"],
                                      " (%d threads)" % s["gather_threads"] if s["gather_threads"] else "",
                                      s["wait_s"]))
        try:
            if self.group.size > 1:
                self.group.barrier()
        finally:
            buf.destroy()


def shape_list(args, trace):
    return [(trace.shape[1], trace.shape[2])] if trace is not None else parse_shapes(args.shapes)


def follow(group, args, trace, table):
    """Ranks other than 0: the same tables as rank 0, in the same order."""
    shards = Shards(group, args, table)
    for tokens, ept in shape_list(args, trace):
        for _, value in parse_sms(args.sms):
            shards.close(shards.open(tokens, ept, value))


class Bench:
    def __init__(self, args, group=None):
        torch = need("torch")
        if not torch.cuda.is_available():
            raise SystemExit("overlap_bench: needs a CUDA GPU")
        self.torch = torch
        self.args = args
        self.timer = Timer(torch)
        self.dev = torch.device("cuda", torch.cuda.current_device())
        self.gemm_stream = torch.cuda.Stream()
        # The fetch stream at the highest priority: when a GEMM block retires,
        # the block scheduler starts a waiting fetch block first, so a fetch
        # is not queued behind whole waves of GEMM tiles.
        self.fetch_stream = torch.cuda.Stream(priority=-1)
        self.records = []
        self.out = open(args.json, "a") if args.json else sys.stdout
        self.table = make_table(torch, args)
        if group is None:
            engram = need("engram")
            group = engram.Group.solo()
        self.shards = Shards(group, args, self.table)
        n = args.gemm_size
        self.a = torch.randn(n, n, device=self.dev, dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device=self.dev, dtype=torch.bfloat16)
        self.c = torch.empty(n, n, device=self.dev, dtype=torch.bfloat16)

    def emit(self, rec):
        self.records.append(rec)
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    # -- the streams' work ------------------------------------------------

    def gemms(self):
        for _ in range(self.args.gemms):
            self.torch.matmul(self.a, self.b, out=self.c)

    def measure(self, parts):
        """Median over repeats of (wall_ms, {name: stream_ms})."""
        runs = [self.timer.run(parts) for _ in range(self.args.repeats)]
        walls = [w for w, _ in runs]
        spans = {n: median([s[n] for _, s in runs]) for n in parts}
        return median(walls), spans

    def index_sets(self, tokens, ept, trace):
        """Index sets rotated by the fetch loops: the trace's steps, or enough
        random sets that their rows exceed the GPU's L2 twice over."""
        torch = self.torch
        if trace is not None:
            return [torch.from_numpy(s).to(self.dev) for s in trace]
        l2 = getattr(torch.cuda.get_device_properties(self.dev), "L2_cache_size", 64 << 20) or (64 << 20)
        fetch_bytes = tokens * ept * self.args.hidden * 2
        sets = max(2, min(64, -(-2 * l2 // fetch_bytes)))
        g = torch.Generator(device=self.dev).manual_seed(self.args.seed + tokens)
        return [torch.randint(0, self.args.rows, (tokens, ept), device=self.dev, dtype=torch.int64, generator=g)
                for _ in range(sets)]

    def overlap(self, shape_name, fetcher, run_fetches, fetch_bytes, n_fetches, h2d_beside, extra):
        """fetch alone and beside the GEMMs; one record (paired_summary)."""
        repeats = []
        for _ in range(self.args.repeats):
            g, _ = self.timer.run({"gemm": (self.gemm_stream, self.gemms)})
            f, _ = self.timer.run({"fetch": (self.fetch_stream, run_fetches)})
            b, spans = self.timer.run({"gemm": (self.gemm_stream, self.gemms),
                                       "fetch": (self.fetch_stream, run_fetches)})
            repeats.append(Repeat(g, f, b, spans["gemm"], spans["fetch"]))
        rec = {"shape": shape_name, "fetcher": fetcher, "fetches": n_fetches, "gemms": self.args.gemms}
        rec.update(paired_summary(repeats, n_fetches * fetch_bytes, h2d_beside))
        rec.update(extra)
        self.emit(rec)
        return rec

    # -- per shape ----------------------------------------------------------

    def run_shape(self, tokens, ept, trace):
        torch, args = self.torch, self.args
        name = "%dx%d" % (tokens, ept)
        sets = self.index_sets(tokens, ept, trace)
        fetch_bytes = tokens * ept * args.hidden * 2
        gemm_alone, _ = self.measure({"gemm": (self.gemm_stream, self.gemms)})
        flops = 2.0 * args.gemm_size ** 3 * args.gemms
        self.emit({"shape": name, "fetcher": "gemm", "gemms": args.gemms, "gemm_alone_ms": round(gemm_alone, 3),
                   "tflops": round(flops / gemm_alone / 1e9, 1)})

        # A contiguous pinned host-to-device copy of the fetch's bytes.
        h2d_src = torch.empty(fetch_bytes, dtype=torch.uint8).pin_memory()
        h2d_dst = torch.empty(fetch_bytes, dtype=torch.uint8, device=self.dev)
        n_fetches = args.fetches
        if n_fetches == 0:  # about the GEMMs' time, from the copy's rate
            one, _ = self.measure({"h2d": (self.fetch_stream, lambda: h2d_dst.copy_(h2d_src, non_blocking=True))})
            n_fetches = max(1, int(round(gemm_alone / max(one, 1e-3))))

        def run_h2d():
            for _ in range(n_fetches):
                h2d_dst.copy_(h2d_src, non_blocking=True)
        h2d_alone, _ = self.measure({"h2d": (self.fetch_stream, run_h2d)})
        _, spans = self.measure({"gemm": (self.gemm_stream, self.gemms), "h2d": (self.fetch_stream, run_h2d)})
        h2d_gbps_alone = n_fetches * fetch_bytes / h2d_alone / 1e6
        h2d_gbps_beside = n_fetches * fetch_bytes / spans["h2d"] / 1e6
        self.emit({"shape": name, "fetcher": "h2d", "fetches": n_fetches, "bytes": fetch_bytes,
                   "h2d_alone_ms": round(h2d_alone, 3), "h2d_gbps_alone": round(h2d_gbps_alone, 2),
                   "h2d_beside_ms": round(spans["h2d"], 3), "h2d_gbps_beside": round(h2d_gbps_beside, 2)})

        for label, value in parse_sms(args.sms):
            self.run_engram(name, tokens, ept, sets, label, value, fetch_bytes, n_fetches, h2d_gbps_beside)
        if not args.no_torch_ref:
            self.run_torch(name, tokens, ept, sets, fetch_bytes, n_fetches, h2d_gbps_beside)

    def run_engram(self, name, tokens, ept, sets, label, value, fetch_bytes, n_fetches, h2d_beside):
        torch = self.torch
        buf = self.shards.open(tokens, ept, value)
        try:
            depth = FETCH_SLOTS - 1  # one slot always free to issue into

            def run_fetches():
                hooks = []
                for i in range(n_fetches):
                    hooks.append(buf.engram_fetch(sets[i % len(sets)], stream=self.fetch_stream))
                    if len(hooks) >= depth:
                        hooks.pop(0)()  # waits; the rows' views drop at once, freeing the slot
                while hooks:
                    hooks.pop(0)()

            idx = sets[0]
            hook = buf.engram_fetch(idx, stream=self.fetch_stream)
            rows, _ = hook()
            want = self.table.index_select(0, idx.flatten().cpu()).view(tokens, -1)
            exact = bool(torch.equal(rows.cpu().view(torch.int16), want.view(torch.int16)))
            del rows, hook
            self.overlap(name, "engram", run_fetches, fetch_bytes, n_fetches, h2d_beside,
                         {"gpu_sms": label, "transport": buf.transport, "ranks": buf.num_ranks,
                          "check": "ok" if exact else "MISMATCH"})
        finally:
            self.shards.close(buf)

    def run_torch(self, name, tokens, ept, sets, fetch_bytes, n_fetches, h2d_beside):
        torch = self.torch
        uva = UvaTable(torch, self.table)
        try:
            flat = [s.flatten() for s in sets]
            out = torch.empty(tokens * ept, self.args.hidden, dtype=torch.int16, device=self.dev)

            def run_fetches():
                for i in range(n_fetches):
                    torch.index_select(uva.dev, 0, flat[i % len(flat)], out=out)

            with torch.cuda.stream(self.fetch_stream):
                torch.index_select(uva.dev, 0, flat[0], out=out)
            torch.cuda.synchronize()
            want = self.table.view(torch.int16).index_select(0, flat[0].cpu())
            exact = bool(torch.equal(out.cpu(), want))
            self.overlap(name, "torch_uva_index_select", run_fetches, fetch_bytes, n_fetches, h2d_beside,
                         {"gpu_sms": "-", "check": "ok" if exact else "MISMATCH"})
        finally:
            uva.close()

    def print_table(self):
        print("\n%-8s %-24s %7s %6s %9s %9s %9s %8s %8s %9s %9s %6s" % (
            "shape", "fetcher", "sms", "n", "gemm ms", "fetch ms", "both ms", "max/both", "gemm x",
            "GB/s bes", "vs h2d", "check"))
        for r in self.records:
            if r["fetcher"] in ("gemm", "h2d"):
                if r["fetcher"] == "h2d":
                    print("%-8s %-24s %7s %6d %9s %9.3f %9s %8s %8s %9.2f %9s %6s" % (
                        r["shape"], "h2d (contiguous)", "-", r["fetches"], "-", r["h2d_alone_ms"], "-", "-", "-",
                        r["h2d_gbps_beside"], "1.00", "-"))
                continue
            print("%-8s %-24s %7s %6d %9.3f %9.3f %9.3f %8.3f %8.3f %9.2f %9.3f %6s" % (
                r["shape"], r["fetcher"], r["gpu_sms"], r["fetches"], r["gemm_alone_ms"], r["fetch_alone_ms"],
                r["both_ms"], r["max_over_both"], r["gemm_slowdown"], r["fetch_gbps_beside"],
                r["fetch_over_h2d_beside"] or 0, r["check"]))
        print("max/both: max(gemm alone, fetch alone) / both; gemm x: the GEMMs' time beside the fetches over alone"
              " (both ratios within a repeat, then the median);"
              "\nGB/s bes: the fetch's rate beside the GEMMs; vs h2d: that over the contiguous copy's rate beside them.")


def run(args, trace, group=None):
    bench = Bench(args, group)
    for tokens, ept in shape_list(args, trace):
        bench.run_shape(tokens, ept, trace)
    bench.print_table()
    bad = [r for r in bench.records if r.get("check") == "MISMATCH"]
    return 1 if bad else 0


def rank_main(group, args, trace):
    group.timeout_ms = max(group.timeout_ms, 30 * 60 * 1000)  # rank 0 measures while the others wait
    if group.rank == 0:
        return run(args, trace, group)
    torch = need("torch")
    follow(group, args, trace, make_table(torch, args))
    return 0


def main(argv=None):
    args = parse_args(argv)
    # engram's log lines are records of the 'engram' logger: show its info
    # lines (gpu_sms=auto's choice, at ENGRAM_LOG_LEVEL=info) on stderr
    logging.basicConfig(format="%(name)s[%(process)d] %(levelname)s %(message)s")
    logging.getLogger("engram").setLevel(logging.INFO)
    trace = load_trace(args.indices, args.rows) if args.indices else None
    shape_list(args, trace)
    parse_sms(args.sms)  # fail on a bad list before any GPU work
    if args.json:
        try:
            open(args.json, "a").close()  # an unwritable --json fails here, not after the runs
        except OSError as e:
            raise SystemExit("overlap_bench: --json %s: %s" % (args.json, e.strerror or e))
    if args.ranks == 1:
        return run(args, trace)
    engram = need("engram")  # forks before this process touches CUDA
    try:
        engram.launch(args.ranks, rank_main, args, trace)
    except engram.Error as e:
        print("overlap_bench: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
