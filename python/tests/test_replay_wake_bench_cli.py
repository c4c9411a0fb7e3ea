"""tools/replay_wake_bench.py refuses bad arguments before it imports torch,
and says what it lacks where there is no GPU (it measures on the device:
docs/BENCHMARKS.md, "Captured host_gather fetches")."""
import os
import subprocess
import sys

import pytest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "replay_wake_bench.py")


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,msg", [(["--tokens", "0"], "--tokens must be at least 1"),
                                      (["--replays", "0"], "--replays must be at least 1"),
                                      (["--watch-us", "0"], "--watch-us must be at least 1"),
                                      (["--idle-s", "0"], "--idle-s > 0"),
                                      (["--tokens", "x"], "invalid int value")])
def test_bad_arguments_are_refused(args, msg):
    r = run(*args)
    assert r.returncode == 2 and msg in r.stderr, (r.returncode, r.stderr)


def test_help_says_what_it_measures():
    r = run("--help")
    assert r.returncode == 0 and "gather_wake=watch" in r.stdout and "--watch-us" in r.stdout


def test_without_a_gpu_it_says_so():
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is here: the tool would measure")
    except ImportError:
        pass
    r = run("--replays", "1")
    assert r.returncode != 0 and "replay_wake_bench: needs" in r.stderr, (r.returncode, r.stderr)
