"""examples/python/engram_fetch.py refuses its own counts out of range
before any rank starts (argparse's usage error, exit 2), and --overhead
times the C API's loop (c_fetch_loop.c, built against the installed
library) against the Python hook's."""
import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python",
                       "engram_fetch.py")


@pytest.mark.parametrize("args, message", [
    (["--iters", "0"], "--iters must be >= 1"),
    (["--rounds", "0", "--overhead"], "--rounds must be >= 1"),
    (["--warmup", "-1"], "--warmup must be >= 0"),
    (["--ranks", "-2"], "--ranks must be >= 0"),
    (["--local-size", "-1"], "--local-size must be >= 0"),
])
def test_bad_counts_are_refused(args, message):
    r = subprocess.run([sys.executable, EXAMPLE, "--recv", "host", *args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and message in r.stderr, (r.returncode, r.stdout, r.stderr)


def test_overhead_compares_the_c_loop_with_python():
    r = subprocess.run([sys.executable, EXAMPLE, "--recv", "host", "--ranks", "2", "--tokens", "8",
                        "--entries-per-token", "4", "--iters", "5", "--warmup", "1", "--rounds", "2",
                        "--overhead"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout, r.stderr)
    # the ranks print at once, so their lines may interleave: counted, not split
    assert r.stdout.count("overhead rank ") == 2 and r.stdout.count("Python adds") == 2, r.stdout
