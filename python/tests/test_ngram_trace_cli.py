"""tools/ngram_trace.py: the trace's shape, range and hashing (a repeated
n-gram is the same rows wherever it stands), and its refusals."""
import os
import subprocess
import sys

import numpy as np
import pytest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "ngram_trace.py")
WORDS = ("the memory of a model is a table of rows looked up by the last words it has seen and the rows "
         "it finds are added to what it computes").split()


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=120)


def text(tmp_path, repeats):
    p = tmp_path / "text.txt"
    p.write_text(" ".join(WORDS * repeats) + "\n")
    return str(p)


def test_trace_shape_range_and_repeats(tmp_path):
    src, out = text(tmp_path, 16), str(tmp_path / "t.npy")
    r = run(out, src, "--table-rows", "100000", "--tokens", "32", "--warmup", "2", "--cache-pct", "1")
    assert r.returncode == 0, r.stderr
    t = np.load(out)
    n = len(WORDS)
    assert t.dtype == np.int64 and t.shape == (16 * n // 32, 32, 16), t.shape
    sub = 100000 // 16
    for s in range(16):  # each (order, head) in its own sub-table
        assert ((t[:, :, s] >= s * sub) & (t[:, :, s] < (s + 1) * sub)).all()
    flat = t.reshape(-1, 16)
    assert (flat[n + 2:2 * n] == flat[2 * n + 2:3 * n]).all()  # the same n-grams, the same rows
    assert len(np.unique(flat[:, 0])) > 1 and not (flat[:, 0] == flat[:, 8]).all()  # heads differ
    assert "most frequent rows' share of lookups" in r.stdout and "cache chosen from the first 2 steps" in r.stdout
    again = str(tmp_path / "again.npy")
    assert run(again, src, "--table-rows", "100000", "--tokens", "32").returncode == 0
    assert (np.load(again) == t).all()  # deterministic


@pytest.mark.parametrize("args, message", [
    (["--tokens", "0"], "wants an integer >= 1"),
    (["--orders", "2,2"], "wants distinct orders"),
    (["--orders", "x"], "wants distinct orders"),
    (["--cache-pct", "0"], "--cache-pct wants a share"),
    (["--tokens", "100000"], "fewer than one step"),
    (["--table-rows", "10", "--tokens", "8"], "too small for 16 sub-tables"),
])
def test_refusals(tmp_path, args, message):
    r = run(str(tmp_path / "t.npy"), text(tmp_path, 2), *args)
    assert r.returncode == 2 and message in r.stderr, (r.returncode, r.stderr)


def test_unreadable_text_and_unwritable_out(tmp_path):
    r = run(str(tmp_path / "t.npy"), str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "reading" in r.stderr and "missing.txt" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = run(str(tmp_path / "no" / "such" / "dir" / "t.npy"), text(tmp_path, 16), "--tokens", "32")
    assert r.returncode == 2 and "writing" in r.stderr and "Traceback" not in r.stderr, r.stderr
