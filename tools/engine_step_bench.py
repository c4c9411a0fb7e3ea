#!/usr/bin/env python3
"""One decode step the way an inference engine runs DeepSeek-V4.1 with
Engram, captured whole in one CUDA graph and replayed, with and without
the lookups, all in one run.

The step: token ids [tokens, 3] (each token and the two before it) are
written into the graph's static input before each replay; on a side
stream, at the step's entry, the n-gram hash of the ids (2- and 3-grams x
12 heads = 24 rows per token, a multiplicative hash modulo the table's
rows, as torch ops on the GPU) gives the indices of each Engram layer's
table, and both layers' lookups are issued there, back to back; on the
main stream a stand-in for the transformer layers runs (--layers, each
two bf16 GEMMs h[T,7168] @ W1[7168,F] @ W2[F,7168], F calibrated at start
so a layer takes --layer-us x --layer-scale at 512 tokens); before layer 1
and layer 14 the main stream waits for that layer's lookup (an event
recorded on the side stream) and consumes its rows: 24 rows of 256 FP8
bytes per token with their 8 ue8m0 scale bytes (2 packs), dequantized
and added into the hidden state.

Variants, replayed interleaved (each round replays every variant once, on
the same token ids, in rotating order):
  none    the same step without the lookup (the hash, the events and the
          consumption of rows already in GPU memory stay)
  torch   torch.index_select over a UVA view of the same pinned host table
          (rows viewed as int64 [rows, 32], scales as int64 [rows, 1]) on
          the side stream: vLLM's default
  engram  engram.Buffer (recv='cuda', --gpu-path) engram_fetch on the side
          stream, captured in the graph
A variant whose capture is refused is reported with the error; the others
go on.

The table (--sizes GiB of rows: two tables of half each, one per layer)
holds bytes that are a function of (table, row, byte) (`row_words`), so
every --check-every'th replay of each variant is checked bit for bit on
the host against rows recomputed from the indices read back from the
graph's static index tensor (and those indices against the hash computed
on the host). The host holds one copy of the rows: with gpu_path
host_gather, engram's own shard (a memfd) is filled in place, written to
engram from itself, and mapped a second time for torch's UVA view
(cudaHostRegister); with gpu_path uva (the shard is CUDA host-NUMA memory
torch cannot view) torch reads a copy the tool fills, kept only where the
host has room for it. The scales (8 bytes a row, 1/32 of the rows' bytes)
are the tool's pinned array, which torch reads and engram_write copies.
With --indices, the trace's rows are written into the static input in
place of token ids, and the graph takes them modulo each table's rows in
place of the hash.

Reported per (size, tokens, variant): the step's median and p10/p90 (us),
the none step's median beside it and the ratio; exposed = the variant's
median minus the none step's median, as a share of the none step; and
engram's exposed time over torch's. The none step is the GEMMs (and the
consumption) alone; the engram step is the same GEMMs beside engram's
lookups: their ratio says whether the lookups cost the GEMMs anything.

    python3 tools/engine_step_bench.py [--sizes 1,16,64] [--tokens 512,8192]
        [--replays 1000,30] [--gpu-path host_gather|uva] [--cache-frac 0.02]
        [--indices trace.npy] [--layer-scale 0.25] [--json out.jsonl]

Needs torch with CUDA and the engram Python package (python/README.md).
"""
import argparse
import ctypes
import importlib
import json
import math
import os
import sys
import time

import numpy as np

PROG = "engine_step_bench"
ROW_BYTES = 256  # FP8 elements per row
ROW_WORDS = ROW_BYTES // 8
SF_PACKS = 2  # 4-byte packs of ue8m0 scales per row: 8 scale bytes, one per 32 elements
SF_BYTES = SF_PACKS * 4
ORDERS = (2, 3)
HEADS = 12
ENTRIES = len(ORDERS) * HEADS  # 24 rows per token per layer
HISTORY = max(ORDERS)  # token ids per token in the static input
ENGRAM_LAYERS = (1, 14)  # the layers (0-based) whose lookups the step consumes
MODEL_HIDDEN = 7168
VOCAB = 129280
CAL_TOKENS = 512  # --layer-us is the layer's time at this many tokens
PROFILE_TOKENS = 16 * 512  # lookups the hot-row cache is profiled on (--cache-frac)
SEGMENT = "engram_host_segment"  # the name of engram's host memfds (memory/host_segment.c)
VARIANTS = ("none", "torch", "engram")

M64 = (1 << 64) - 1
MULT = 0x9E3779B97F4A7C15  # the hash's multiplier (the golden ratio's 64 bits)
MULT_S64 = MULT - (1 << 64)  # as a signed int64
MASK_FP8 = 0xF7F7F7F7F7F7F7F7  # bit 3 of every byte clear: no e4m3fn NaN (0x7f, 0xff)
SF_LOW = 0x0F0F0F0F0F0F0F0F  # ue8m0 bytes in 0x78..0x87: scales 2^-7..2^8
SF_BASE = 0x7878787878787878


def said(e):
    """An exception as one line: its type and its message's first line."""
    text = str(e).strip()
    return "%s: %s" % (type(e).__name__, text.splitlines()[0]) if text else type(e).__name__


class Refused(Exception):
    """A variant that cannot run here (its capture refused, no memory for
    its copy, ...): reported with the reason, the others go on."""


WHAT = {"engram": "the engram Python package (python/README.md)", "torch": "torch with CUDA"}


def need(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise SystemExit("%s: needs %s: %s" % (PROG, WHAT[name], e))


# -- arguments ------------------------------------------------------------

def _list(text, flag, conv, least):
    out = []
    for part in str(text).split(","):
        try:
            v = conv(part.strip())
        except ValueError:
            v = None
        if v is None or not v >= least or (isinstance(v, float) and not math.isfinite(v)):
            raise SystemExit("%s: --%s wants a comma-separated list of numbers >= %s, got %r"
                             % (PROG, flag, least, text))
        out.append(v)
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1,16,64",
                   help="GiB of rows per case, split over the two layers' tables [1,16,64]")
    p.add_argument("--tokens", default="512,8192", help="tokens per step [512,8192]")
    p.add_argument("--replays", default="1000,30",
                   help="timed replays of each variant, one value for every --tokens entry or one for all [1000,30]")
    p.add_argument("--variants", default="none,torch,engram", help="of none, torch, engram [none,torch,engram]")
    p.add_argument("--gpu-path", default="host_gather", choices=("host_gather", "uva"),
                   help="engram's gpu_path [host_gather]")
    p.add_argument("--cache-frac", type=float, default=0.0,
                   help="engram's hot-row cache, a share of each table's rows profiled on lookups the replays "
                        "do not use (Buffer.cache_profile) [0: none]")
    p.add_argument("--layers", type=int, default=61, help="transformer layers in the step (DeepSeek-V3's 61) [61]")
    p.add_argument("--layer-us", type=float, default=330.0,
                   help="one layer's GEMM time at %d tokens the GEMM width is calibrated to [330]" % CAL_TOKENS)
    p.add_argument("--layer-scale", type=float, default=1.0,
                   help="scales --layer-us (0.25: a quarter of the work per layer, a shorter step) [1]")
    p.add_argument("--indices", help="an n-gram trace .npy of int32/int64 [steps, tokens, 24] "
                                     "(tools/ngram_trace.py --heads 12): its rows, modulo each table's rows, "
                                     "replace the hash of uniform random token ids")
    p.add_argument("--check-every", type=int, default=50, help="check every Nth replay bit for bit [50]")
    p.add_argument("--warmup", type=int, default=3, help="untimed rounds before the timed ones [3]")
    p.add_argument("--threads", type=int, default=0, help="threads filling the table [0: every CPU]")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--strict", action="store_true",
                   help="exit 1 also when a variant was refused or skipped (not only on a mismatch or failure)")
    p.add_argument("--json", help="append one JSON object per record to this file")
    args = p.parse_args(argv)
    args.sizes = _list(args.sizes, "sizes", float, 1.0 / 1024)
    args.tokens = _list(args.tokens, "tokens", int, 1)
    args.replays = _list(args.replays, "replays", int, 1)
    if len(args.replays) == 1:
        args.replays = args.replays * len(args.tokens)
    if len(args.replays) != len(args.tokens):
        raise SystemExit("%s: --replays gives %d values for %d --tokens entries (give one, or one each)"
                         % (PROG, len(args.replays), len(args.tokens)))
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANTS]
    if bad or not names or len(set(names)) != len(names):
        raise SystemExit("%s: --variants wants distinct names of %s, got %r" % (PROG, ",".join(VARIANTS),
                                                                             args.variants))
    args.variants = [v for v in VARIANTS if v in names]
    if args.layers <= max(ENGRAM_LAYERS):
        raise SystemExit("%s: --layers must be > %d (the lookups feed layers %s), got %d"
                         % (PROG, max(ENGRAM_LAYERS), " and ".join(map(str, ENGRAM_LAYERS)), args.layers))
    for flag in ("layer_us", "layer_scale"):
        v = getattr(args, flag)
        if not (v > 0 and math.isfinite(v)):
            raise SystemExit("%s: --%s must be > 0, got %s" % (PROG, flag.replace("_", "-"), v))
    if not 0 <= args.cache_frac < 1:
        raise SystemExit("%s: --cache-frac wants a share in [0, 1), got %s" % (PROG, args.cache_frac))
    for flag, least in (("check_every", 1), ("warmup", 0), ("threads", 0)):
        if getattr(args, flag) < least:
            raise SystemExit("%s: --%s must be >= %d, got %d" % (PROG, flag.replace("_", "-"), least,
                                                                 getattr(args, flag)))
    if args.threads == 0:
        args.threads = os.cpu_count() or 1
    return args


def load_trace(path):
    """The trace as int64 [lookups, 24] (its steps and tokens flattened)."""
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise SystemExit("%s: --indices %s: %s" % (PROG, path, e))
    if a.ndim != 3 or a.dtype not in (np.int32, np.int64):
        raise SystemExit("%s: --indices %s: wants int32/int64 [steps, tokens, %d], got %s %s"
                         % (PROG, path, ENTRIES, a.dtype, a.shape))
    if a.shape[2] != ENTRIES:
        raise SystemExit("%s: --indices %s: wants %d rows per token (tools/ngram_trace.py --heads %d gives "
                         "%d orders x %d), got %d" % (PROG, path, ENTRIES, HEADS, len(ORDERS), HEADS, a.shape[2]))
    if a.size == 0:
        raise SystemExit("%s: --indices %s holds no indices" % (PROG, path))
    if int(a.min()) < 0:
        raise SystemExit("%s: --indices %s: negative indices (%d)" % (PROG, path, int(a.min())))
    return a.reshape(-1, ENTRIES).astype(np.int64)


# -- the table's content: a function of (table, row, byte) ---------------------

def mix64_py(x):
    """splitmix64's finalizer on a Python int (the reference of mix64)."""
    z = (x + MULT) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def mix64(x):
    """mix64_py over a uint64 array, in place (and returned)."""
    with np.errstate(over="ignore"):
        x += np.uint64(MULT)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _row_salt(table):
    return (2 * table + 1) << 48


def _sf_salt(table):
    return (2 * table + 2) << 48


def _word_salt(table):
    return (0xA5 << 56) + (table << 8)


def word_keys(table):
    """The 32 per-column words of a table: word w of row r is (mix64(row salt
    + r) ^ key[w]) & MASK_FP8, stored little-endian."""
    return mix64(np.arange(ROW_WORDS, dtype=np.uint64) + np.uint64(_word_salt(table))) & np.uint64(MASK_FP8)


def row_words(table, rows):
    """uint64 [len(rows), 32]: the rows' content (rows: an integer array)."""
    h = mix64(np.asarray(rows, dtype=np.uint64).reshape(-1) + np.uint64(_row_salt(table)))
    h &= np.uint64(MASK_FP8)
    return h[:, None] ^ word_keys(table)[None, :]


def row_bytes(table, rows):
    """uint8 [len(rows), 256]: the rows' bytes (little-endian words)."""
    return np.ascontiguousarray(row_words(table, rows).astype("<u8")).view(np.uint8)


def row_scales(table, rows):
    """uint64 [len(rows)]: each row's 8 ue8m0 scale bytes (2 packs, little-endian)."""
    h = mix64(np.asarray(rows, dtype=np.uint64).reshape(-1) + np.uint64(_sf_salt(table)))
    h &= np.uint64(SF_LOW)
    h += np.uint64(SF_BASE)
    return h


def row_byte_py(table, row, col):
    """Byte `col` of row `row`, from Python ints alone (the tests' reference)."""
    key = mix64_py(_word_salt(table) + col // 8) & MASK_FP8
    word = (mix64_py(_row_salt(table) + row) & MASK_FP8) ^ key
    return (word >> (8 * (col % 8))) & 0xFF


def scale_byte_py(table, row, k):
    """Scale byte k (0..7) of row `row`, from Python ints alone."""
    word = (mix64_py(_sf_salt(table) + row) & SF_LOW) + SF_BASE
    return (word >> (8 * k)) & 0xFF


def fill(table, words, scales, threads, chunk_rows=1 << 16):
    """Writes the table's rows into words (uint64 [rows, 32], any memory) and
    its scales into scales (uint64 [rows]), in chunks over `threads` threads
    (numpy releases the GIL in its loops)."""
    from concurrent.futures import ThreadPoolExecutor

    n = words.shape[0]
    keys = word_keys(table)

    def one(lo):
        hi = min(n, lo + chunk_rows)
        h = mix64(np.arange(lo, hi, dtype=np.uint64) + np.uint64(_row_salt(table)))
        h &= np.uint64(MASK_FP8)
        np.bitwise_xor(h[:, None], keys[None, :], out=words[lo:hi])
        s = mix64(np.arange(lo, hi, dtype=np.uint64) + np.uint64(_sf_salt(table)))
        s &= np.uint64(SF_LOW)
        s += np.uint64(SF_BASE)
        scales[lo:hi] = s

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        list(pool.map(one, range(0, n, chunk_rows)))


# -- the n-gram hash ---------------------------------------------------------------

def s64(v):
    """A Python int wrapped to a signed 64-bit value."""
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def hash_seeds(table):
    """Each of the 24 entries' starting value (wrapped int64) for a table."""
    return [s64((table * ENTRIES + e + 1) * MULT) for e in range(ENTRIES)]


def hash_ref(tokens, table, rows):
    """The hash from Python ints: tokens is [T][HISTORY] (tokens[t][0] the
    token itself, [1] the one before, ...); entry e = order ORDERS[e // HEADS],
    head e % HEADS; x = seed * MULT, then x = x * MULT ^ token for each of the
    order's tokens, x ^= x >> 29 (int64, arithmetic), row = x mod rows."""
    out = []
    for tok in tokens:
        line = []
        for e, seed in enumerate(hash_seeds(table)):
            x = s64(seed * MULT)
            for k in range(ORDERS[e // HEADS]):
                x = s64(x * MULT) ^ int(tok[k])
            x ^= x >> 29
            line.append(x % rows)
        out.append(line)
    return out


def hash_np(tokens, table, rows):
    """hash_ref over an int64 array [T, HISTORY] -> int64 [T, 24]."""
    t = np.asarray(tokens, dtype=np.int64)
    x = np.array(hash_seeds(table), dtype=np.int64)[None, :] * np.int64(MULT_S64)
    with np.errstate(over="ignore"):
        x = (x * np.int64(MULT_S64)) ^ t[:, 0:1]
        x = (x * np.int64(MULT_S64)) ^ t[:, 1:2]
        hi = (x[:, HEADS:] * np.int64(MULT_S64)) ^ t[:, 2:3]
        x = np.concatenate([x[:, :HEADS], hi], axis=1)
        x ^= x >> np.int64(29)
    return x % np.int64(rows)


def hash_torch(torch, tokens, seeds, rows, out):
    """hash_np as torch ops (CPU or GPU, capturable): tokens int64 [T, HISTORY],
    seeds the table's hash_seeds as an int64 tensor on tokens' device, out
    int64 [T, 24]."""
    x = (seeds * MULT_S64).unsqueeze(0) * MULT_S64 ^ tokens[:, 0:1]
    x = x * MULT_S64 ^ tokens[:, 1:2]
    hi = x[:, HEADS:] * MULT_S64 ^ tokens[:, 2:3]
    x = torch.cat([x[:, :HEADS], hi], dim=1)
    x = x ^ (x >> 29)
    return torch.remainder(x, rows, out=out)


# -- the figures ---------------------------------------------------------------------

def percentile(values, q):
    """numpy's default (linear) percentile, q in [0, 100]."""
    v = sorted(values)
    if not v:
        return None
    pos = (len(v) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _r(x, nd=3):
    return None if x is None else round(x, nd)


def summarize(case, times, checks, status):
    """Records of one (size, tokens) case. times: {variant: [us per replay]};
    checks: {variant: (checked, mismatches)}; status: {variant: "ok" or why
    not}. Exposed = the variant's median minus the none step's median (both
    over the same interleaved rounds); engram's record also carries torch's
    exposed time and engram's over it."""
    med = {v: percentile(t, 50) for v, t in times.items() if t}
    none = med.get("none")
    recs = []
    for v in VARIANTS:
        if v not in status:
            continue
        t = times.get(v) or []
        rec = dict(case)
        rec.update({"variant": v, "status": status[v], "replays": len(t),
                    "step_us": _r(med.get(v)), "p10_us": _r(percentile(t, 10)), "p90_us": _r(percentile(t, 90)),
                    "none_us": _r(none), "step_over_none": None, "exposed_us": None, "exposed_pct": None,
                    "checked": checks.get(v, (0, 0))[0], "mismatches": checks.get(v, (0, 0))[1]})
        if v in med and none:
            rec["step_over_none"] = _r(med[v] / none, 4)
            rec["exposed_us"] = _r(med[v] - none)
            rec["exposed_pct"] = _r(100.0 * (med[v] - none) / none, 3)
        recs.append(rec)
    by = {r["variant"]: r for r in recs}
    if "engram" in by:
        e, t = by["engram"], by.get("torch")
        e["torch_exposed_us"] = t["exposed_us"] if t else None
        e["engram_over_torch"] = (_r(e["exposed_us"] / t["exposed_us"], 4)
                                  if t and e["exposed_us"] is not None and t["exposed_us"] else None)
    return recs


def gemm_verdict(recs):
    """The none step (the GEMMs alone) against the engram step (the same GEMMs
    beside engram's lookups), with the none step's own p10-p90 spread as the
    noise they are held against; None where either is missing."""
    by = {r["variant"]: r for r in recs}
    n, e = by.get("none"), by.get("engram")
    if not n or not e or n["step_us"] is None or e["step_us"] is None:
        return None
    spread = (n["p90_us"] - n["p10_us"]) / n["step_us"]
    ratio = e["step_us"] / n["step_us"]
    return {"none_us": n["step_us"], "engram_us": e["step_us"], "ratio": round(ratio, 4),
            "none_spread": round(spread, 4), "within_noise": abs(ratio - 1) <= spread / 2}


def _f(x, fmt):
    return "-" if x is None else fmt % x


def table_lines(recs):
    """The human table of every record."""
    head = "%6s %6s %-7s %10s %21s %10s %8s %10s %8s %8s %9s  %s" % (
        "GiB", "tokens", "variant", "step us", "p10-p90 us", "none us", "x none", "exposed", "% none",
        "vs torch", "checked", "status")
    out = [head]
    for r in recs:
        out.append("%6g %6d %-7s %10s %21s %10s %8s %10s %8s %8s %9s  %s" % (
            r["size_gib"], r["tokens"], r["variant"], _f(r["step_us"], "%.1f"),
            "-" if r["p10_us"] is None else "%.1f-%.1f" % (r["p10_us"], r["p90_us"]),
            _f(r["none_us"], "%.1f"), _f(r["step_over_none"], "%.4f"), _f(r["exposed_us"], "%.1f"),
            _f(r["exposed_pct"], "%.2f%%"), _f(r.get("engram_over_torch"), "%.3f"),
            "%d, %d bad" % (r["checked"], r["mismatches"]) if r["variant"] != "none" else "-", r["status"]))
    return out


FOOTNOTES = (
    "step us: the median of the variant's replays of the whole captured step; none us: the none step's median "
    "in the same rounds\n(its reference); x none: their ratio; exposed: step - none, and as a share of none; "
    "vs torch: engram's exposed time over torch's;\nchecked: replays checked bit for bit / of those, mismatches. "
    "The none step is the GEMMs alone (with the same consumption of rows);\nthe engram step is the same GEMMs "
    "beside engram's lookups: where their ratio is within the none step's noise, the lookups held no SM "
    "the GEMMs wanted.")


def host_plan(shared, table_bytes, sf_bytes, mem_available):
    """Whether torch gets a view of the rows: (keep, why). shared: torch views
    engram's own shard (one copy); else torch needs a copy of the rows, kept
    where the host's available memory holds both copies with 8 GiB to spare."""
    if shared:
        return True, "torch views engram's shard (one host copy of the rows)"
    need = 2 * table_bytes + 2 * sf_bytes + (8 << 30)
    if mem_available is not None and need <= mem_available:
        return True, "torch reads its own copy of the rows (gpu_path=uva: engram's shard is CUDA host-NUMA memory)"
    return False, ("no room for torch's own copy of the rows (%.1f GiB wanted, %s available); gpu_path=uva keeps "
                   "engram's shard in CUDA host-NUMA memory torch cannot view"
                   % (need / 2**30, "?" if mem_available is None else "%.1f GiB" % (mem_available / 2**30)))


def mem_available(path="/proc/meminfo"):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# -- engram's shard: found by its memfd ----------------------------------------------

def memfds(name=SEGMENT, fd_dir="/proc/self/fd"):
    """{inode: fd} of this process's memfds called `name`."""
    out = {}
    for entry in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, entry))
            if target.startswith("/memfd:" + name + " ") or target == "/memfd:" + name:
                out[os.fstat(int(entry)).st_ino] = int(entry)
        except (OSError, ValueError):
            continue
    return out


def find_shard_fd(before, size, name=SEGMENT):
    """The fd of the one memfd called `name` of `size` bytes that is not in
    `before` (memfds() taken before the table was created); else raises
    LookupError saying what was found."""
    new = {ino: fd for ino, fd in memfds(name).items() if ino not in before}
    fit = [(ino, fd) for ino, fd in new.items() if os.fstat(fd).st_size == size]
    if len(fit) != 1:
        raise LookupError("%d new memfds '%s' of %d bytes (of %d new)" % (len(fit), name, size, len(new)))
    return fit[0]


def mapping_of(inode, size, maps="/proc/self/maps", name=SEGMENT):
    """The address of the read-write mapping of the memfd `inode` (offset 0,
    `size` bytes, one or more adjacent lines of /proc/self/maps)."""
    parts = []
    with open(maps) as f:
        for line in f:
            fields = line.split(None, 5)
            if len(fields) < 6 or int(fields[4]) != inode or not fields[1].startswith("rw"):
                continue
            if not fields[5].strip().startswith("/memfd:" + name):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            parts.append((int(fields[2], 16), lo, hi))
    parts.sort()
    if not parts or parts[0][0] != 0:
        raise LookupError("no read-write mapping of memfd inode %d at offset 0" % inode)
    base, end = parts[0][1], parts[0][1]
    for off, lo, hi in parts:
        if lo != end or off != lo - base:
            break
        end = hi
    if end - base < size:
        raise LookupError("the mapping of memfd inode %d covers %d of %d bytes" % (inode, end - base, size))
    return base


def array_at(addr, count, dtype):
    """A numpy array of `count` elements viewing memory at `addr`."""
    class At:
        __array_interface__ = {"shape": (count,), "typestr": np.dtype(dtype).str, "data": (addr, False),
                               "version": 3}
    return np.asarray(At())


_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mmap.restype = ctypes.c_void_p
        _libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_long)
        _libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    return _libc


def map_fd(fd, size):
    """A second read-write shared mapping of fd's first `size` bytes."""
    import mmap as m
    addr = libc().mmap(None, size, m.PROT_READ | m.PROT_WRITE, m.MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        e = ctypes.get_errno()
        raise OSError(e, "mmap of the shard's memfd: %s" % os.strerror(e))
    return addr


def map_anon(size):
    import mmap as m
    addr = libc().mmap(None, size, m.PROT_READ | m.PROT_WRITE, m.MAP_PRIVATE | m.MAP_ANONYMOUS, -1, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        e = ctypes.get_errno()
        raise OSError(e, "mmap of %d bytes: %s" % (size, os.strerror(e)))
    return addr


def unmap(addr, size):
    libc().munmap(addr, size)


# -- the GPU part ---------------------------------------------------------------------

class Pinned:
    """host memory [addr, addr + size) registered with CUDA (mapped) and
    viewed on the GPU as a torch tensor of `shape` (int64), through UVA."""

    def __init__(self, torch, addr, size, shape):
        self.torch, self.addr, self.size = torch, addr, size
        err = torch.cuda.cudart().cudaHostRegister(addr, size, 2)  # cudaHostRegisterMapped
        if int(err) != 0:
            raise Refused("cudaHostRegister of %.1f GiB failed: %s" % (size / 2**30, err))
        self.registered = True
        dev = device_pointer(addr)

        class View:
            __cuda_array_interface__ = {"shape": tuple(shape), "typestr": "<i8", "data": (dev, False),
                                        "version": 2, "strides": None}
        self._view = View()
        self.dev = torch.as_tensor(self._view, device="cuda")

    def close(self):
        self.dev = None
        if self.registered:
            self.torch.cuda.cudart().cudaHostUnregister(self.addr)
            self.registered = False


def device_pointer(host_ptr):
    """cudaHostGetDevicePointer through libcudart; the pointer itself where
    no libcudart loads (UVA: a registered host pointer is a device pointer)."""
    lib = None
    names = ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]
    torch = need("torch")
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    if os.path.isdir(torch_lib):
        names += [os.path.join(torch_lib, f) for f in sorted(os.listdir(torch_lib)) if f.startswith("libcudart")]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return host_ptr
    out = ctypes.c_void_p()
    err = lib.cudaHostGetDevicePointer(ctypes.byref(out), ctypes.c_void_p(host_ptr), 0)
    if err != 0:
        raise Refused("cudaHostGetDevicePointer failed: error %d" % err)
    return out.value


class HostTable:
    """One layer's table: an engram Buffer over `rows` rows, its content
    written (fill), and where torch runs, torch's UVA views of the rows and
    scales. shared: the rows are engram's own shard (host_gather)."""

    def __init__(self, env, table, rows, max_tokens, keep_torch_copy):
        self.table, self.rows, self.torch = table, rows, env.torch
        self.buf = None
        self.maps = []  # (addr, size) to munmap at close
        self.pinned = []
        self.torch_rows = self.torch_sf = None
        self.torch_why = None
        try:
            self._open(env, max_tokens, keep_torch_copy)
        except BaseException:
            self.close()
            raise

    def _open(self, env, max_tokens, keep_torch_copy):
        torch, engram, args = env.torch, env.engram, env.args
        table, rows = self.table, self.rows
        before = memfds()
        t0 = time.perf_counter()
        self.buf = engram.Buffer(env.group, rows, ROW_BYTES, "float8_e4m3fn", max_tokens, ENTRIES,
                                 num_sf_packs=SF_PACKS, recv="cuda", config={"gpu_path": args.gpu_path})
        st = self.buf.stats()
        self.stats0 = st
        create_s = time.perf_counter() - t0
        nbytes = rows * ROW_BYTES
        sf_size = rows * 8
        sf_addr = map_anon(sf_size)
        self.maps.append((sf_addr, sf_size))
        scales = array_at(sf_addr, rows, np.uint64)
        shard_addr = own_addr = None
        self.shared_why = None
        if st.get("path") == "host_gather":
            try:
                ino, fd = find_shard_fd(before, st["shard_bytes"])
                shard_addr = mapping_of(ino, st["shard_bytes"])
                own_addr = map_fd(fd, st["shard_bytes"])
                self.maps.append((own_addr, st["shard_bytes"]))
            except (LookupError, OSError, ValueError) as e:
                self.shared_why = "engram's shard not found (%s)" % e
        else:
            self.shared_why = "gpu_path=%s keeps the shard in CUDA memory" % st.get("path")
        t1 = time.perf_counter()
        if shard_addr is not None:
            src_addr = shard_addr  # filled in place through engram's own mapping (its NUMA placement)
        else:
            src_addr = map_anon(nbytes)
            self.maps.append((src_addr, nbytes))
        words = array_at(src_addr, rows * ROW_WORDS, np.uint64).reshape(rows, ROW_WORDS)
        fill(table, words, scales, args.threads)
        fill_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        storage = torch.from_numpy(words.view(np.uint8).reshape(rows, ROW_BYTES))
        sf = torch.from_numpy(scales.view(np.int32).reshape(rows, SF_PACKS))
        self.buf.engram_write(storage, sf)  # from the shard itself where shared: a copy onto itself
        del storage, words
        write_s = time.perf_counter() - t2
        self.torch_src = None
        if "torch" in args.variants:
            if shard_addr is not None:
                self.torch_src = own_addr  # the same pages, mapped again for torch
            elif keep_torch_copy:
                self.torch_src = src_addr
            else:
                self.torch_why = host_plan(False, nbytes, sf_size, mem_available())[1]
        if shard_addr is None and self.torch_src is None:
            self._unmap(src_addr)
        self.scales_addr, self.sf_size = sf_addr, sf_size
        t3 = time.perf_counter()
        if self.torch_src is not None:
            try:
                self.torch_rows = Pinned(torch, self.torch_src, nbytes, (rows, ROW_WORDS))
                self.pinned.append(self.torch_rows)
                self.torch_sf = Pinned(torch, sf_addr, sf_size, (rows, 1))
                self.pinned.append(self.torch_sf)
            except Refused as e:
                self.torch_why = str(e)
        reg_s = time.perf_counter() - t3
        self.cache_s = 0.0
        if args.cache_frac > 0:
            t4 = time.perf_counter()
            self.buf.cache_profile(env.source.profile(table, rows), int(args.cache_frac * rows))
            self.cache_s = time.perf_counter() - t4
        st = self.buf.stats()
        print("  table %d: %d rows (%.2f GiB + %.2f GiB scales), path %s%s, %s pages; create %.1f s, fill %.1f s "
              "(%d threads, %s), engram_write %.1f s, torch view %s (%.1f s)%s"
              % (table, rows, nbytes / 2**30, sf_size / 2**30, st["path"],
                 " (%d gather threads)" % st["gather_threads"] if st.get("gather_threads") else "",
                 "2 MiB" if st.get("shard_huge_pages") else "4 KiB", create_s, fill_s, args.threads,
                 "in place in engram's shard" if shard_addr is not None else "into a copy (%s)" % self.shared_why,
                 write_s, "ready" if self.torch_rows is not None else (self.torch_why or "not asked"), reg_s,
                 ", cache %d rows (%.1f s)" % (st.get("cache_rows", 0), self.cache_s) if args.cache_frac else ""),
              flush=True)

    def _unmap(self, addr):
        for i, (a, size) in enumerate(self.maps):
            if a == addr:
                unmap(a, size)
                del self.maps[i]
                return

    def expected(self, idx):
        """(rows uint8 [n, 256], scales uint8 [n, 8]) of indices idx."""
        return row_bytes(self.table, idx), row_scales(self.table, idx).astype("<u8").view(np.uint8).reshape(-1, 8)

    def close(self):
        for p in self.pinned:
            p.close()
        self.pinned = []
        self.torch_rows = self.torch_sf = None
        for addr, size in self.maps:
            unmap(addr, size)
        self.maps = []
        if self.buf is not None:
            self.buf.destroy()
            self.buf = None


class Uniform:
    """Uniform random token ids; the graph hashes them."""
    name = "uniform"
    width = HISTORY

    def __init__(self, seed):
        self.seed = seed

    def rounds(self, n, tokens):
        g = np.random.default_rng(self.seed * 7919 + tokens)
        return g.integers(0, VOCAB, size=(n, tokens, HISTORY), dtype=np.int64)

    def indices(self, inp, table, rows):
        return hash_np(inp, table, rows)

    def profile(self, table, rows):
        g = np.random.default_rng(self.seed * 104729 + 1)  # ids the replays do not draw
        return hash_np(g.integers(0, VOCAB, size=(PROFILE_TOKENS, HISTORY), dtype=np.int64), table, rows).reshape(-1)


class Trace:
    """An n-gram trace's rows (modulo each table's rows); the replays take
    windows of it after the first PROFILE_TOKENS lookups (the cache's
    profile), cyclically."""
    width = ENTRIES

    def __init__(self, path, flat):
        self.name, self.flat = os.path.basename(path), flat
        self.start = PROFILE_TOKENS if len(flat) > 2 * PROFILE_TOKENS else 0

    def rounds(self, n, tokens):
        span = len(self.flat) - self.start
        pos = (np.arange(n * tokens, dtype=np.int64) % span) + self.start
        return self.flat[pos].reshape(n, tokens, ENTRIES)

    def indices(self, inp, table, rows):
        return np.asarray(inp, dtype=np.int64) % rows

    def profile(self, table, rows):
        return (self.flat[:min(PROFILE_TOKENS, len(self.flat))] % rows).reshape(-1)


class Env:
    def __init__(self, args, source):
        self.args, self.source = args, source
        self.torch = need("torch")
        if not self.torch.cuda.is_available():
            raise SystemExit("%s: needs a CUDA GPU" % PROG)
        self.engram = need("engram")
        self.group = self.engram.Group.solo()
        self.dev = self.torch.device("cuda", self.torch.cuda.current_device())
        self.main = self.torch.cuda.Stream()
        self.side = self.torch.cuda.Stream(priority=-1)  # the lookups' blocks start first as GEMM blocks retire
        self.fp8 = getattr(self.torch, "float8_e4m3fn", None)


class Model:
    """The stand-in layers: two bf16 GEMMs each, h @ W1 -> a, a @ W2 -> h."""

    def __init__(self, env):
        torch, args = env.torch, env.args
        self.env, self.torch = env, torch
        self.target_us = args.layer_us * args.layer_scale
        g = torch.Generator(device=env.dev).manual_seed(args.seed)
        self.width = self.calibrate(g)
        f = self.width
        self.w1 = torch.randn(MODEL_HIDDEN, f, device=env.dev, dtype=torch.bfloat16, generator=g) / MODEL_HIDDEN**0.5
        self.w2 = torch.randn(f, MODEL_HIDDEN, device=env.dev, dtype=torch.bfloat16, generator=g) / f**0.5
        self.layer_us = {t: self.time_layer(t, self.w1, self.w2) for t in sorted(set(args.tokens) | {CAL_TOKENS})}

    def time_layer(self, tokens, w1, w2, iters=20):
        torch, dev = self.torch, self.env.dev
        h = torch.randn(tokens, MODEL_HIDDEN, device=dev, dtype=torch.bfloat16)
        a = torch.empty(tokens, w1.shape[1], device=dev, dtype=torch.bfloat16)
        with torch.cuda.stream(self.env.main):
            for _ in range(3):
                torch.matmul(h, w1, out=a)
                torch.matmul(a, w2, out=h)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(iters):
                torch.matmul(h, w1, out=a)
                torch.matmul(a, w2, out=h)
            e.record()
        e.synchronize()
        return s.elapsed_time(e) * 1e3 / iters

    def calibrate(self, g):
        """The width F whose layer takes target_us at CAL_TOKENS tokens."""
        torch, dev = self.torch, self.env.dev
        f = 8192
        for _ in range(4):
            w1 = torch.randn(MODEL_HIDDEN, f, device=dev, dtype=torch.bfloat16, generator=g) / MODEL_HIDDEN**0.5
            w2 = torch.randn(f, MODEL_HIDDEN, device=dev, dtype=torch.bfloat16, generator=g) / f**0.5
            us = self.time_layer(CAL_TOKENS, w1, w2)
            nxt = max(128, min(1 << 17, int(round(f * self.target_us / us / 128)) * 128))
            if nxt == f:
                break
            f = nxt
        return f

    def describe(self):
        return "h[T,%d] @ W1[%d,%d] @ W2[%d,%d] (bf16)" % (MODEL_HIDDEN, MODEL_HIDDEN, self.width, self.width,
                                                          MODEL_HIDDEN)


class Case:
    """One (size, tokens): its static tensors, a graph per variant, the
    interleaved replays, the checks."""

    def __init__(self, env, model, tables, tokens):
        torch = env.torch
        self.env, self.model, self.tables, self.tokens = env, model, tables, tokens
        dev, T = env.dev, tokens
        self.static_in = torch.zeros(T, env.source.width, dtype=torch.int64, device=dev)
        self.idx = [torch.zeros(T, ENTRIES, dtype=torch.int64, device=dev) for _ in tables]
        self.seeds = [torch.tensor(hash_seeds(t.table), dtype=torch.int64, device=dev) for t in tables]
        self.h0 = torch.randn(T, MODEL_HIDDEN, device=dev, dtype=torch.bfloat16)
        self.h = torch.empty_like(self.h0)
        self.a = torch.empty(T, model.width, device=dev, dtype=torch.bfloat16)
        # the none variant's rows: in GPU memory already (a fetch's worth of real rows)
        base = env.source.rounds(1, T)[0]
        self.static_rows, self.static_sf = [], []
        for t in tables:
            r, s = t.expected(env.source.indices(base, t.table, t.rows).reshape(-1))
            self.static_rows.append(torch.from_numpy(r.reshape(T, -1)).to(dev))
            self.static_sf.append(torch.from_numpy(s.reshape(T, -1)).to(dev))
        self.torch_out = None
        self.outputs = {}  # variant -> [(rows u8 [T, 6144], sf u8 [T, 192]) per table]
        self.keep = {}  # variant -> what must live as long as its graph

    # -- the step's pieces (captured, or run eagerly to warm up) --

    def indices_into(self, i):
        torch, t = self.env.torch, self.tables[i]
        if self.env.source.width == HISTORY:
            hash_torch(torch, self.static_in, self.seeds[i], t.rows, self.idx[i])
        else:
            torch.remainder(self.static_in, t.rows, out=self.idx[i])

    def lookup(self, variant, i):
        """(rows uint8 [T, 6144], scales uint8 [T, 192], keep) of table i, queued on the current stream."""
        torch, T, t = self.env.torch, self.tokens, self.tables[i]
        if variant == "none":
            return self.static_rows[i], self.static_sf[i], None
        if variant == "torch":
            if self.torch_out is None:
                self.torch_out = [(torch.empty(T * ENTRIES, ROW_WORDS, dtype=torch.int64, device=self.env.dev),
                                   torch.empty(T * ENTRIES, 1, dtype=torch.int64, device=self.env.dev))
                                  for _ in self.tables]
            rows, sf = self.torch_out[i]
            flat = self.idx[i].view(-1)
            torch.index_select(t.torch_rows.dev, 0, flat, out=rows)
            torch.index_select(t.torch_sf.dev, 0, flat, out=sf)
            return rows.view(torch.uint8).view(T, -1), sf.view(torch.uint8).view(T, -1), None
        hook = t.buf.engram_fetch(self.idx[i])
        rows, sf = hook()
        return rows.view(torch.uint8), sf.view(torch.uint8), (hook, rows, sf)

    def consume(self, rows, sf):
        """Dequantize a layer's rows (FP8 x 2^(ue8m0 - 127) per 32 elements) and add them into the hidden state."""
        torch, T = self.env.torch, self.tokens
        x = rows.view(self.env.fp8) if self.env.fp8 is not None else rows
        x = x.view(T, ENTRIES, SF_BYTES, ROW_BYTES // SF_BYTES).to(torch.bfloat16)
        sc = torch.exp2(sf.view(T, ENTRIES, SF_BYTES).to(torch.float32) - 127.0).to(torch.bfloat16)
        self.h[:, :ENTRIES * ROW_BYTES] += (x * sc.unsqueeze(-1)).view(T, ENTRIES * ROW_BYTES)

    def body(self, variant):
        """The whole step on the current stream (the main one), the side stream
        forked from it at the entry and joined at layer 14. Returns
        (outputs, keep, error): error is the lookup's refusal, after which
        the step still joins its streams (so a capture ends cleanly)."""
        torch, env = self.env.torch, self.env
        main = torch.cuda.current_stream()
        entry = torch.cuda.Event()
        ready = [torch.cuda.Event() for _ in self.tables]
        entry.record(main)
        env.side.wait_event(entry)
        outs, keep, err = [], [], None
        with torch.cuda.stream(env.side):
            for i in range(len(self.tables)):
                self.indices_into(i)
                if err is None:
                    try:
                        rows, sf, k = self.lookup(variant, i)
                        outs.append((rows, sf))
                        keep.append(k)
                    except Exception as e:  # noqa: BLE001 -- a refusal of any kind is reported, not raised
                        err = e
                ready[i].record(env.side)
        if err is not None:
            main.wait_event(ready[-1])  # join the side stream; nothing else in this step
            return outs, keep, err
        self.h.copy_(self.h0)
        w1, w2 = self.model.w1, self.model.w2
        for layer in range(env.args.layers):
            if layer in ENGRAM_LAYERS:
                i = ENGRAM_LAYERS.index(layer)
                main.wait_event(ready[i])
                self.consume(*outs[i])
            torch.matmul(self.h, w1, out=self.a)
            torch.matmul(self.a, w2, out=self.h)
        return outs, keep, None

    def capture(self, variant):
        """The variant's graph; Refused with the error where it cannot run."""
        torch, env = self.env.torch, self.env
        if variant == "torch" and any(t.torch_rows is None for t in self.tables):
            raise Refused("skipped: " + next(t.torch_why for t in self.tables if t.torch_rows is None))
        self.static_in.copy_(torch.from_numpy(env.source.rounds(1, self.tokens)[0]).to(env.dev))
        torch.cuda.synchronize()
        with torch.cuda.stream(env.main):  # warm up eagerly (cuBLAS, engram's first fetch), as torch asks
            outs, keep, err = self.body(variant)
        torch.cuda.synchronize()
        del outs, keep
        if err is not None:
            raise Refused("failed outside a graph: " + said(err))
        g = torch.cuda.CUDAGraph()
        err = None
        try:
            with torch.cuda.graph(g, stream=env.main):
                outs, keep, err = self.body(variant)
        except Exception as e:  # noqa: BLE001 -- the capture itself failed (invalidated, ...)
            torch.cuda.synchronize()
            raise Refused("refused: capture failed: " + said(e))
        if err is not None:
            del g, outs, keep
            torch.cuda.synchronize()
            raise Refused("refused: " + said(err))
        self.outputs[variant] = outs
        self.keep[variant] = keep
        return g

    def check(self, variant, inp):
        """Bit for bit: the indices the graph left in the static index tensors
        against the host's hash of inp, and (variants with a lookup) the rows
        and scales against the table's content at those indices. Returns the
        first mismatch's description or None."""
        for i, t in enumerate(self.tables):
            got_idx = self.idx[i].cpu().numpy()
            want_idx = self.env.source.indices(inp, t.table, t.rows)
            if not np.array_equal(got_idx, want_idx):
                bad = np.argwhere(got_idx != want_idx)[0]
                return "table %d: GPU hash gave row %d at token %d entry %d, the host %d" % (
                    t.table, got_idx[tuple(bad)], bad[0], bad[1], want_idx[tuple(bad)])
            if variant == "none":
                continue
            rows, sf = self.outputs[variant][i]
            want_rows, want_sf = t.expected(got_idx.reshape(-1))
            got_rows = rows.cpu().numpy().reshape(-1, ROW_BYTES)
            got_sf = sf.cpu().numpy().reshape(-1, SF_BYTES)
            for what, got, want in (("rows", got_rows, want_rows), ("scales", got_sf, want_sf)):
                if not np.array_equal(got, want):
                    k = int(np.argwhere((got != want).any(axis=1))[0][0])
                    return "table %d: %s of token %d entry %d (row %d) differ" % (
                        t.table, what, k // ENTRIES, k % ENTRIES, got_idx.reshape(-1)[k])
        return None

    def run(self, replays):
        """Captures every variant, replays them interleaved; (times, checks,
        status, notes)."""
        torch, env, args = self.env.torch, self.env, self.env.args
        status, graphs = {}, {}
        for v in args.variants:
            try:
                graphs[v] = self.capture(v)
                status[v] = "ok"
            except Refused as e:
                status[v] = str(e)
                print("  %s: %s" % (v, e), flush=True)
        rounds = args.warmup + replays
        pool = torch.from_numpy(env.source.rounds(rounds, self.tokens)).pin_memory()
        times = {v: [] for v in graphs}
        checks = {v: [0, 0] for v in graphs}
        notes = []
        pending = []
        order = [v for v in args.variants if v in graphs]

        def harvest():
            torch.cuda.synchronize()
            for v, s, e in pending:
                times[v].append(s.elapsed_time(e) * 1e3)
            pending.clear()

        with torch.cuda.stream(env.main):
            for r in range(rounds):
                timed = r >= args.warmup
                k = r - args.warmup
                for v in [order[(j + r) % len(order)] for j in range(len(order))]:
                    if v not in graphs:
                        continue  # failed in an earlier replay
                    self.static_in.copy_(pool[r], non_blocking=True)
                    if timed:
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record()
                    try:
                        graphs[v].replay()
                    except Exception as exc:  # noqa: BLE001 -- this variant ends here, the others go on
                        status[v] = "failed: %s %d: %s" % ("replay" if timed else "warm-up replay",
                                                          k if timed else r, said(exc))
                        print("  %s: %s" % (v, status[v]), flush=True)
                        del graphs[v]
                        continue
                    if timed:
                        e.record()
                        pending.append((v, s, e))
                    if timed and k % args.check_every == 0:
                        harvest()
                        why = self.check(v, pool[r].numpy())
                        checks[v][0] += 1
                        if why is not None:
                            checks[v][1] += 1
                            if len(notes) < 5:
                                notes.append("%s replay %d: %s" % (v, k, why))
                if len(pending) >= 300:
                    harvest()
            harvest()
        graphs.clear()
        self.release()
        return times, {v: tuple(c) for v, c in checks.items()}, status, notes

    def release(self):
        """Drops the captured rows (engram's receive slots) and the graphs' static outputs."""
        self.outputs.clear()
        self.keep.clear()
        self.torch_out = None
        try:
            self.env.torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 -- a sticky CUDA error is the case's failure, reported already
            pass


def case_fields(env, model, size_gib, rows, tokens):
    args = env.args
    return {"bench": "engine_step", "size_gib": size_gib, "tokens": tokens, "rows_per_table": rows,
            "indices": env.source.name, "gpu_path": args.gpu_path, "cache_frac": args.cache_frac,
            "layers": args.layers, "layer_us_target": round(model.target_us, 1),
            "layer_us": round(model.layer_us[tokens], 1), "gemm": model.describe(),
            "device": env.torch.cuda.get_device_name(env.dev)}


def failure(e):
    return "failed: " + said(e)


def run_size(env, model, size_gib, records):
    """Both tables of one size, every --tokens case on them; a failure is
    recorded for the cases it ends, and the run goes on."""
    args, torch = env.args, env.torch
    rows = int(size_gib * 2**30) // 2 // ROW_BYTES
    avail = mem_available()
    keep, why = host_plan(args.gpu_path == "host_gather", 2 * rows * ROW_BYTES, 2 * rows * 8, avail)
    print("== %g GiB: two tables of %d rows of %d B + %d scale bytes; %s%s"
          % (size_gib, rows, ROW_BYTES, SF_BYTES, why if "torch" in args.variants else "no torch variant",
             "" if avail is None else "; %.1f GiB available" % (avail / 2**30)), flush=True)
    tables, broken = [], None
    try:
        try:
            for table in range(len(ENGRAM_LAYERS)):
                tables.append(HostTable(env, table, rows, max(args.tokens), keep))
        except Exception as e:  # noqa: BLE001 -- reported for every case of this size
            broken = failure(e)
            print("  tables: " + broken, flush=True)
        for tokens, replays in zip(args.tokens, args.replays):
            case = case_fields(env, model, size_gib, rows, tokens)
            print("-- %g GiB, %d tokens: %d timed rounds of %s (about %.0f s)"
                  % (size_gib, tokens, replays, ",".join(args.variants),
                     len(args.variants) * (replays + args.warmup) * args.layers * model.layer_us[tokens] / 1e6),
                  flush=True)
            times, checks, notes = {}, {}, []
            status = {v: broken for v in args.variants}
            if broken is None:
                c = None
                try:
                    c = Case(env, model, tables, tokens)
                    times, checks, status, notes = c.run(replays)
                except Exception as e:  # noqa: BLE001 -- one case's failure is reported, the run goes on
                    status = {v: failure(e) for v in args.variants}
                    print("  " + status[args.variants[0]], flush=True)
                finally:
                    if c is not None:
                        c.release()  # engram's rows held by captured fetches: before the tables go
                    c = None
            for n in notes:
                print("  MISMATCH " + n, flush=True)
            recs = summarize(case, times, checks, status)
            for t in tables:
                s = t.buf.stats()
                for r in recs:
                    if r["variant"] == "engram":
                        r["cache_hits"] = r.get("cache_hits", 0) + s.get("cache_hits", 0) - t.stats0.get(
                            "cache_hits", 0)
                t.stats0 = s
            verdict = gemm_verdict(recs)
            for r in recs:
                if verdict and r["variant"] == "engram":
                    r["gemms_beside_engram"] = verdict
                env.emit(r)
                records.append(r)
            for line in table_lines(recs)[1:]:
                print("  " + line, flush=True)
    finally:
        for t in tables:
            try:
                t.close()
            except Exception as e:  # noqa: BLE001 -- the next size still runs
                print("  table %d: close %s" % (t.table, failure(e)), flush=True)
        torch.cuda.empty_cache()


class Out:
    def __init__(self, path):
        self.f = open(path, "a") if path else None

    def emit(self, rec):
        if self.f:
            self.f.write(json.dumps(rec) + "\n")
            self.f.flush()


def main(argv=None):
    args = parse_args(argv)
    source = Trace(args.indices, load_trace(args.indices)) if args.indices else Uniform(args.seed)
    if args.json:
        try:
            open(args.json, "a").close()  # an unwritable --json fails here, not after the runs
        except OSError as e:
            raise SystemExit("%s: --json %s: %s" % (PROG, args.json, e.strerror or e))
    import logging
    logging.basicConfig(format="%(name)s[%(process)d] %(levelname)s %(message)s")
    logging.getLogger("engram").setLevel(logging.INFO)
    env = Env(args, source)
    out = Out(args.json)
    env.emit = out.emit
    torch = env.torch
    t0 = time.perf_counter()
    model = Model(env)
    setup = {"bench": "engine_step", "record": "setup", "device": torch.cuda.get_device_name(env.dev),
             "torch": torch.__version__, "layers": args.layers, "engram_layers": list(ENGRAM_LAYERS),
             "gemm": model.describe(), "layer_us_target": round(model.target_us, 1),
             "layer_us": {str(t): round(u, 1) for t, u in model.layer_us.items()}, "indices": source.name,
             "gpu_path": args.gpu_path, "cache_frac": args.cache_frac, "sizes_gib": args.sizes,
             "tokens": args.tokens, "replays": args.replays, "variants": args.variants}
    out.emit(setup)
    print("%s: %s; %d layers, lookups consumed at layers %s; each layer %s, %.1f us at %d tokens (target %.1f us), "
          "%s; %s indices; engram gpu_path=%s%s"
          % (PROG, setup["device"], args.layers, " and ".join(map(str, ENGRAM_LAYERS)), model.describe(),
             model.layer_us[CAL_TOKENS], CAL_TOKENS, model.target_us,
             ", ".join("%.1f us at %d" % (u, t) for t, u in sorted(model.layer_us.items()) if t != CAL_TOKENS),
             source.name, args.gpu_path, ", cache %.3g of each table's rows" % args.cache_frac if args.cache_frac
             else ""), flush=True)
    est = sum(len(args.variants) * (r + args.warmup) * args.layers * model.layer_us[t] / 1e6
              for t, r in zip(args.tokens, args.replays)) * len(args.sizes)
    print("%s: the replays take about %.0f s (the tables' fill, write and registration come on top)"
          % (PROG, est), flush=True)
    records = []
    for size in args.sizes:
        run_size(env, model, size, records)
    print("\n%s: every case (%.0f s in all)" % (PROG, time.perf_counter() - t0))
    for line in table_lines(records):
        print(line)
    print(FOOTNOTES)
    for r in records:
        v = r.get("gemms_beside_engram")
        if v:
            print("%g GiB, %d tokens: GEMMs alone (none) %.1f us, beside engram's lookups %.1f us: x%.4f (none's "
                  "p10-p90 spread %.2f%%: %s)" % (r["size_gib"], r["tokens"], v["none_us"], v["engram_us"],
                                                 v["ratio"], 100 * v["none_spread"],
                                                 "within noise" if v["within_noise"] else "outside noise"))
    bad = [r for r in records if r["mismatches"] or r["status"].startswith("failed")]
    refused = [r for r in records if r["status"] != "ok"]
    return 1 if bad or (args.strict and refused) else 0


if __name__ == "__main__":
    sys.exit(main())
