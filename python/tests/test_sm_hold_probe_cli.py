"""tools/sm_hold_probe.py refuses bad arguments before it imports torch or
cupy, and says which it lacks (it measures on the device: docs/BENCHMARKS.md,
"GPU fetch beside GEMMs")."""
import importlib.util
import os
import subprocess
import sys

import pytest

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "sm_hold_probe.py")


def run(*args):
    return subprocess.run([sys.executable, PROBE, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [["--sms", "3"], ["--sms", "0"], ["--sms", "x"], ["--sms", ""], ["--rounds", "0"],
                                  ["--gemms", "0"]])
def test_bad_arguments_are_refused(args):
    r = run(*args)
    assert r.returncode != 0 and "--sms wants even counts >= 2" in r.stderr, (r.returncode, r.stderr)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="cupy is here: the probe would measure")
def test_without_cupy_it_says_so():
    r = run("--sms", "2")
    assert r.returncode != 0 and "needs torch with CUDA and cupy" in r.stderr, (r.returncode, r.stderr)
