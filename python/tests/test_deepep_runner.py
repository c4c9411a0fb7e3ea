"""tools/deepep/run_deepep_engram_test.py on a stand-in DeepEP checkout: the
deep_ep package it builds has engram's ElasticBuffer and the checkout's own
utils (copied as they are), deep_ep._C names what it lacks, and the test
runs once in bf16 and once with --use-fp8, its result line parsed. (The
real test_engram.py needs a CUDA GPU: the device tier runs it.)"""
import importlib.util
import os
import textwrap

import pytest

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "deepep",
                      "run_deepep_engram_test.py")

STAND_IN_TEST = '''
import sys
import deep_ep
import engram
from deep_ep.utils.envs import MARK
import deep_ep._C as _C
assert deep_ep.ElasticBuffer is engram.ElasticBuffer
assert MARK == "the checkout's own file"
try:
    _C.get_local_nccl_unique_id
except AttributeError as e:
    assert "DeepEP's compiled extension" in str(e)
else:
    raise AssertionError("deep_ep._C has what it should not")
try:
    _C.EventHandle()
except NotImplementedError:
    pass
with open("runs.txt", "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
print(" > Rank   0/  1 | issue: 12.5 us, wait: 0.0 us, 250.0 GB/s, bytes: 3.0 MB, 20.00 MPPS (256 B/msg)")
'''


@pytest.fixture
def runner():
    spec = importlib.util.spec_from_file_location("run_deepep_engram_test", RUNNER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def stand_in_checkout(root):
    utils = root / "deep_ep" / "utils"
    utils.mkdir(parents=True)
    (utils / "__init__.py").write_text("from .event import EventHandle  # noqa: F401\n")
    (utils / "event.py").write_text("from deep_ep._C import EventHandle  # noqa: F401\n")
    (utils / "envs.py").write_text("import deep_ep._C as _C  # noqa: F401\nMARK = \"the checkout's own file\"\n")
    (root / "tests" / "elastic").mkdir(parents=True)
    (root / "tests" / "elastic" / "test_engram.py").write_text(textwrap.dedent(STAND_IN_TEST))
    return root


def test_runs_the_checkouts_test_on_engrams_package(runner, tmp_path, capsys, monkeypatch):
    checkout = stand_in_checkout(tmp_path / "DeepEP")
    work = str(tmp_path / "work")
    os.mkdir(work)
    monkeypatch.setattr(runner.tempfile, "mkdtemp", lambda prefix: work)  # kept under tmp_path, for a look
    assert runner.main([str(checkout), "--keep"]) == 0
    out = capsys.readouterr().out
    assert open(os.path.join(work, "runs.txt")).read().splitlines() == ["--num-processes 1",
                                                                       "--num-processes 1 --use-fp8"]
    assert "DeepEP test_engram.py --use-fp8" in out and "12.5" in out and "20.00" in out, out
    assert open(os.path.join(work, "deep_ep", "utils", "envs.py")).read() == (
        checkout / "deep_ep" / "utils" / "envs.py").read_text()


def test_refuses_a_directory_that_is_no_checkout(runner, tmp_path):
    with pytest.raises(SystemExit, match="not a DeepEP checkout"):
        runner.main([str(tmp_path)])


def test_a_failing_test_fails_the_run(runner, tmp_path):
    checkout = stand_in_checkout(tmp_path / "DeepEP")
    (checkout / "tests" / "elastic" / "test_engram.py").write_text("raise SystemExit(3)\n")
    assert runner.main([str(checkout), "--fp8", "off"]) == 1


def test_result_lines_of_both_formats(runner):
    deepep = " > Rank   0/  1 | issue: 20.1 us, wait: 0.0 us, 120.3 GB/s, bytes: 3.0 MB, 0.61 MPPS (256 B/msg)"
    ours = ("rank 0/1 transport=loopback recv=cuda gpu_table=host_numa: issue 4.2 us, wait 60.3 us (medians of 200), "
            "48.70 GB/s, 190.23 MPPS")
    assert runner.parse_result(deepep) == (20.1, 0.0, 120.3, 0.61)
    assert runner.parse_result(ours) == (4.2, 60.3, 48.70, 190.23)
    assert runner.parse_result("no result") is None
