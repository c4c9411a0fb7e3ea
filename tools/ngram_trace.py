#!/usr/bin/env python3
"""An Engram-style lookup trace from text, in the benches' --indices format.

Each word of the text files (lower-cased, punctuation stripped) is a token;
for every token and every n-gram order (2 and 3 by default) ending at it,
each of the heads (8 by default) hashes the n-gram's token ids with a
multiplicative-XOR hash of its own seed into a sub-table of prime size: a
row of the table, one sub-table per (order, head) laid out back to back
over --table-rows rows. The trace is an int64 .npy of [steps, tokens,
orders x heads] (engram_bench / engram_gpu_bench --indices FILE), and the
tool prints how skewed it is: the share of lookups the most frequent 1%,
2% and 5% of the table's rows take, and what a static cache of --cache-pct
of the table's rows chosen from the first --warmup steps serves of the
steps after them (the hot-row cache's case, engram_table_cache_profile).

    python3 tools/ngram_trace.py OUT.npy TEXT_FILE... [--table-rows N] [--tokens T]
        [--orders 2,3] [--heads 8] [--warmup K] [--cache-pct P]
"""
import argparse
import re
import sys

import numpy as np

MULT = np.uint64(0x9E3779B97F4A7C15)
WORD = re.compile(r"[a-z0-9]+")


def positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError("wants an integer >= 1, got %s" % text)
    return v


def orders_list(text):
    try:
        v = [int(x) for x in text.split(",")]
    except ValueError:
        v = []
    if not v or any(n < 1 or n > 8 for n in v) or len(set(v)) != len(v):
        raise argparse.ArgumentTypeError("wants distinct orders in 1..8, e.g. 2,3; got %r" % text)
    return v


def is_prime(n):
    if n < 2:
        return False
    f = 2
    while f * f <= n:
        if n % f == 0:
            return False
        f += 1
    return True


def primes_below(limit, count):
    """The `count` largest primes <= limit, largest first."""
    out, n = [], limit
    while len(out) < count and n >= 2:
        if is_prime(n):
            out.append(n)
        n -= 1
    if len(out) < count:
        raise ValueError("the table is too small for %d sub-tables" % count)
    return out


def token_ids(paths):
    vocab, ids = {}, []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            for w in WORD.findall(f.read().lower()):
                ids.append(vocab.setdefault(w, len(vocab) + 1))  # 0: before the text
    return np.array(ids, dtype=np.uint64), len(vocab)


def lookups(ids, orders, heads, table_rows):
    """[len(ids), len(orders) * heads] global rows."""
    subs = len(orders) * heads
    primes = primes_below(table_rows // subs, subs)
    out = np.empty((len(ids), subs), dtype=np.int64)
    with np.errstate(over="ignore"):
        for o, n in enumerate(orders):
            window = [np.concatenate([np.zeros(k, np.uint64), ids[:len(ids) - k]]) for k in range(n)]
            for h in range(heads):
                s = o * heads + h
                x = np.full(len(ids), np.uint64(s + 1) * MULT, dtype=np.uint64)
                for w in window:
                    x = (x * MULT) ^ w
                x ^= x >> np.uint64(29)
                out[:, s] = (x % np.uint64(primes[s])).astype(np.int64) + (table_rows // subs) * s
    return out


def top_share(rows, table_rows, pct):
    _, counts = np.unique(rows, return_counts=True)
    k = max(1, int(table_rows * pct / 100))
    return np.sort(counts)[::-1][:k].sum() / rows.size


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("text", nargs="+")
    p.add_argument("--table-rows", type=positive, default=1 << 24)
    p.add_argument("--tokens", type=positive, default=512)
    p.add_argument("--orders", type=orders_list, default=[2, 3])
    p.add_argument("--heads", type=positive, default=8)
    p.add_argument("--warmup", type=positive, default=16)
    p.add_argument("--cache-pct", type=float, default=2.0)
    a = p.parse_args(argv)
    if not 0 < a.cache_pct <= 100:
        p.error("--cache-pct wants a share in (0, 100], got %s" % a.cache_pct)
    try:
        ids, vocab = token_ids(a.text)
    except OSError as e:
        p.error("reading %s: %s" % (e.filename, e.strerror))
    steps = len(ids) // a.tokens
    if steps < 1:
        p.error("the text has %d words: fewer than one step of --tokens %d" % (len(ids), a.tokens))
    try:
        rows = lookups(ids[:steps * a.tokens], a.orders, a.heads, a.table_rows)
    except ValueError as e:
        p.error(str(e))
    trace = rows.reshape(steps, a.tokens, rows.shape[1])
    try:
        np.save(a.out, trace)
    except OSError as e:
        p.error("writing %s: %s" % (a.out, e.strerror or e))
    print("%s: %d steps x %d tokens x %d rows (orders %s, %d heads) over %d table rows, %d words of %d distinct"
          % (a.out, steps, a.tokens, rows.shape[1], ",".join(map(str, a.orders)), a.heads, a.table_rows,
             len(ids), vocab))
    print("most frequent rows' share of lookups: 1%% %.3f, 2%% %.3f, 5%% %.3f"
          % tuple(top_share(rows, a.table_rows, pct) for pct in (1, 2, 5)))
    if steps > a.warmup:
        warm, rest = trace[:a.warmup].reshape(-1), trace[a.warmup:].reshape(-1)
        uniq, counts = np.unique(warm, return_counts=True)
        k = max(1, int(a.table_rows * a.cache_pct / 100))
        cache = uniq[np.argsort(-counts, kind="stable")[:k]]
        print("a %.3g%% cache chosen from the first %d steps (%d rows) serves %.3f of the %d steps after them"
              % (a.cache_pct, a.warmup, len(cache), np.isin(rest, cache).mean(), steps - a.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
