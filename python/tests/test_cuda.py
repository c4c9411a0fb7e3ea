"""Device tier: the cuda_cases.py cases on min(4, max(2, GPUs)) ranks
(ENGRAM_PY_GPU_RANKS overrides), gloo group, ranks sharing GPUs round-robin,
and the cuda_solo_cases.py cases on one rank. Skips without a CUDA device."""
import os

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

import cuda_cases  # noqa: E402
import cuda_solo_cases  # noqa: E402
import ranks  # noqa: E402

_results = {}


def results(tmp_path_factory, module, world):
    """{case: {rank: outcome}} of every case of `module`, run once on `world` ranks."""
    if module not in _results:
        env = {"ENGRAM_TIMEOUT_MS": "30000", "ENGRAM_LOG_LEVEL": "error"}
        _results[module] = ranks.run(module, world, {}, tmp_path_factory.mktemp(module), env)
    return _results[module]


@pytest.mark.parametrize("case", [name for name, _ in cuda_cases.CASES])
def test_cuda_case(case, tmp_path_factory):
    world = int(os.environ.get("ENGRAM_PY_GPU_RANKS", min(4, max(2, torch.cuda.device_count()))))
    assert_outcome(results(tmp_path_factory, "cuda_cases", world).get(case), case)


@pytest.mark.parametrize("case", [name for name, _ in cuda_solo_cases.CASES])
def test_cuda_solo_case(case, tmp_path_factory):
    assert_outcome(results(tmp_path_factory, "cuda_solo_cases", 1).get(case), case)


def assert_outcome(res, case):
    assert res is not None, "case %s did not run" % case
    skips = {tb for tb in res.values() if tb.startswith("skip: ")}
    if skips and len(skips) == 1 and all(tb.startswith("skip: ") for tb in res.values()):
        pytest.skip(skips.pop()[len("skip: "):])
    failed = {r: tb for r, tb in res.items() if tb != "ok"}
    assert not failed, "\n".join("rank %d:\n%s" % (r, tb) for r, tb in sorted(failed.items()))
