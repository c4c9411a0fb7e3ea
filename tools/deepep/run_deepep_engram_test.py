#!/usr/bin/env python3
"""run_deepep_engram_test.py: DeepEP's own engram test, unmodified, against engram.

    python3 tools/deepep/run_deepep_engram_test.py DEEPEP_DIR [--num-processes N] [--fp8 both|off|on]
                                                   [--compare] [--keep] [-- more test_engram.py arguments]

DEEPEP_DIR is a DeepEP checkout (github.com/deepseek-ai/DeepEP); of it only
tests/elastic/test_engram.py and deep_ep/utils/*.py are read. In a temporary
directory the script builds a `deep_ep` package whose ElasticBuffer is
engram.ElasticBuffer and whose deep_ep.utils is DeepEP's own (every .py file
of the checkout's deep_ep/utils, copied as it is: init_dist,
per_token_cast_to_fp8, bench_kineto, ...), puts it first on PYTHONPATH and
runs the checkout's tests/elastic/test_engram.py with --num-processes N
(default 1), in bf16 and with --use-fp8 (--fp8 picks). DeepEP's utils
import deep_ep._C, DeepEP's compiled extension, at module level (and its
EventHandle by name); the package's _C is engram's stand-in, which has
nothing else: anything asked of it raises, naming what is missing.

What the test does with engram: its init_dist makes an NCCL process group
(the buffer wraps it with engram.Group.from_torch, which makes a gloo side
group for engram's collectives); its constructor passes num_bytes and
num_cpu_bytes from get_engram_storage_size_hint, explicitly_destroy=True,
num_allocated_qps = the GPU's SM count (--num-qps 0), allow_hybrid_mode
(False unless --allow-hybrid-mode) and allow_multiple_reduction=False; its
benchmark (bench_kineto) profiles CUDA kernels by name: engram_fetch_impl is
engram's fetch kernel (the UVA path: ENGRAM_GPU_PATH=uva is set unless the
environment sets it, as the host_gather path runs no kernel to time) and
engram_fetch_wait_impl its completion kernel for rows of other nodes (none
on one node: the test prints wait 0.0 us, as the stream-ordered hook queues
nothing). MASTER_PORT is a free port unless set.

--compare also runs, for the same shape, engram's own bench
(examples/python/engram_fetch.py --ranks 1 --recv cuda) and torch's UVA
gather (torch.index_select on a pinned, mapped host table), and prints the
three side by side. Needs a CUDA GPU; engram importable (installed, or on
PYTHONPATH).
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TEST = os.path.join("tests", "elastic", "test_engram.py")
UTILS = os.path.join("deep_ep", "utils")

PACKAGE_INIT = '''"""deep_ep as engram's DeepEP runner builds it: ElasticBuffer is
engram.ElasticBuffer; deep_ep.utils is DeepEP's own, copied from a checkout."""
from engram import ElasticBuffer  # noqa: F401
'''

C_STANDIN = '''"""deep_ep._C in engram's deep_ep package: DeepEP's compiled extension is
not here. DeepEP's utils import it at module level and EventHandle by name;
anything else asked of it raises AttributeError naming what is missing."""

_MISSING = ("deep_ep._C.%s: DeepEP's compiled extension is not in engram's deep_ep package, which has "
            "engram.ElasticBuffer and DeepEP's pure-Python utils only")


class EventHandle:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_MISSING % "EventHandle")


def __getattr__(name):
    raise AttributeError(_MISSING % name)
'''

# The result line of DeepEP's test ("issue: 1.0 us, wait: ...") and of engram_fetch.py ("issue 1.0 us, wait ...")
RESULT = re.compile(r"issue:? ([\d.]+) us, wait:? ([\d.]+) us.*?([\d.]+) GB/s.*?([\d.]+) MPPS")


def build_package(deepep_dir, dest):
    """The deep_ep package under dest (dest/deep_ep); returns the test's path
    in the checkout. Refuses a checkout without the files it reads."""
    test = os.path.join(deepep_dir, TEST)
    utils = os.path.join(deepep_dir, UTILS)
    missing = [p for p in (test, os.path.join(utils, "__init__.py")) if not os.path.isfile(p)]
    if missing:
        raise SystemExit("run_deepep_engram_test: %s is not a DeepEP checkout (no %s)"
                         % (deepep_dir, ", ".join(missing)))
    pkg = os.path.join(dest, "deep_ep")
    os.makedirs(os.path.join(pkg, "utils"))
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write(PACKAGE_INIT)
    with open(os.path.join(pkg, "_C.py"), "w") as f:
        f.write(C_STANDIN)
    for name in sorted(os.listdir(utils)):
        if name.endswith(".py"):
            shutil.copyfile(os.path.join(utils, name), os.path.join(pkg, "utils", name))
    return test


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, env, cwd):
    """Runs cmd, its output passed through; (exit code, output)."""
    print("== %s" % " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    for line in p.stdout:
        sys.stdout.write(line)
        out.append(line)
    return p.wait(), "".join(out)


def parse_result(text):
    """(issue us, wait us, GB/s, MPPS) of the last result line, or None."""
    found = RESULT.findall(text)
    return tuple(float(x) for x in found[-1]) if found else None


def torch_uva_gather(fp8, entries=524288, hidden=128, tokens=512, per_token=24, iters=100):
    """torch.index_select of tokens x per_token rows from a pinned, mapped
    host table of DeepEP's default shape: (us per gather, GB/s, MPPS)."""
    import torch

    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from overlap_bench import UvaTable

    row_bytes = hidden * (1 if fp8 else 2)
    host = torch.randint(-32768, 32767, (entries, row_bytes // 2), dtype=torch.int16)
    uva = UvaTable(torch, host)
    try:
        idx = torch.randint(0, entries, (tokens * per_token,), device="cuda")
        out = torch.empty((tokens * per_token, row_bytes // 2), dtype=torch.int16, device="cuda")
        for _ in range(10):
            torch.index_select(uva.dev, 0, idx, out=out)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            torch.index_select(uva.dev, 0, idx, out=out)
        end.record()
        torch.cuda.synchronize()
        us = start.elapsed_time(end) * 1e3 / iters
    finally:
        uva.close()
    rows = tokens * per_token
    return us, rows * row_bytes / us / 1e3, rows / us


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("deepep_dir", help="a DeepEP checkout (tests/elastic/test_engram.py, deep_ep/utils/*.py)")
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--fp8", choices=["both", "off", "on"], default="both", help="bf16, --use-fp8, or both runs")
    p.add_argument("--compare", action="store_true", help="also engram's own bench and torch's UVA gather")
    p.add_argument("--keep", action="store_true", help="keep the temporary deep_ep package (its path is printed)")
    p.add_argument("test_args", nargs="*", help="more arguments for test_engram.py (after --)")
    a = p.parse_args(argv)
    if a.num_processes < 1:
        p.error("--num-processes must be >= 1")
    deepep_dir = os.path.abspath(a.deepep_dir)
    work = tempfile.mkdtemp(prefix="engram-deepep.")
    try:
        test = build_package(deepep_dir, work)
        print("== deep_ep package: %s (ElasticBuffer: engram's; utils: %s)" % (work, os.path.join(deepep_dir, UTILS)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([work] + [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x])
        env.setdefault("ENGRAM_GPU_PATH", "uva")
        env.setdefault("MASTER_PORT", str(free_port()))
        results, failed = [], 0
        for fp8 in {"both": (False, True), "off": (False,), "on": (True,)}[a.fp8]:
            cmd = [sys.executable, test, "--num-processes", str(a.num_processes)] + (["--use-fp8"] if fp8 else [])
            rc, out = run(cmd + a.test_args, env, work)
            failed += rc != 0
            results.append(("DeepEP test_engram.py" + (" --use-fp8" if fp8 else ""), rc, parse_result(out)))
            if a.compare:
                bench = [sys.executable, os.path.join(ROOT, "examples", "python", "engram_fetch.py"), "--ranks", "1",
                         "--recv", "cuda"] + (["--fp8"] if fp8 else [])
                rc, out = run(bench, env, work)
                failed += rc != 0
                results.append(("engram_fetch.py" + (" --fp8" if fp8 else ""), rc, parse_result(out)))
                us, gbps, mpps = torch_uva_gather(fp8)
                results.append(("torch UVA index_select" + (" fp8-sized rows" if fp8 else ""), 0,
                                (us, 0.0, gbps, mpps)))
        print("\n%-36s %6s %10s %10s %8s %8s" % ("run", "exit", "issue us", "wait us", "GB/s", "MPPS"))
        for name, rc, r in results:
            cells = ("%10.1f %10.1f %8.1f %8.2f" % r) if r else "%10s %10s %8s %8s" % ("-", "-", "-", "-")
            print("%-36s %6d %s" % (name, rc, cells))
        return 1 if failed else 0
    finally:
        if a.keep:
            print("== kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
