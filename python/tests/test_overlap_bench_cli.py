"""tools/overlap_bench.py refuses bad arguments before any GPU work, and
says so where there is no GPU (its measurements run in the device tier:
tools/scripts/python_gpu_tier.sh)."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "overlap_bench.py")


def run(*args):
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, message", [
    (["--ranks", "0"], "--ranks must be >= 1"),
    (["--ranks", "3"], "divide --rows"),
    (["--sms", "0"], "--sms values"),
    (["--shapes", "512"], "--shapes wants"),
    (["--repeats", "0"], "--repeats must be >= 1"),
    (["--gemms", "0"], "--gemms must be >= 1"),
    (["--gemm-size", "-1"], "--gemm-size must be >= 1"),
    (["--rows", "0"], "--rows must be >= 1"),
    (["--hidden", "0"], "--hidden must be >= 1"),
    (["--fetches", "-1"], "--fetches must be >= 0"),
    (["--indices", "/nonexistent/trace.npy"], "--indices /nonexistent/trace.npy"),
    (["--indices", __file__], "--indices"),  # not an .npy
    (["--json", "/nonexistent/dir/out.jsonl"], "--json /nonexistent/dir/out.jsonl"),
])
def test_bad_arguments_are_refused(args, message):
    r = run(*args)
    assert r.returncode != 0 and message in r.stdout + r.stderr, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="the device tier measures on a GPU")
@pytest.mark.parametrize("ranks", ["1", "2"])
def test_no_gpu_is_an_error(ranks):
    r = run("--ranks", ranks, "--rows", "1024", "--shapes", "4x2", "--sms", "8")
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert "needs a CUDA GPU" in r.stdout + r.stderr or "launch: ranks exited" in r.stdout + r.stderr, r.stderr
