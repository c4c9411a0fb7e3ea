"""engram.ElasticBuffer on 2 gloo ranks, host receive (elastic_cases.py):
DeepEP's constructor and sizes, the table made at the first write, the
scales' dtype, the refusals."""
import pytest

torch = pytest.importorskip("torch")

import elastic_cases  # noqa: E402
import ranks  # noqa: E402

WORLD = 2
_results = {}


def results(tmp_path_factory):
    if not _results:
        env = {"ENGRAM_TIMEOUT_MS": "20000", "ENGRAM_LOG_LEVEL": "error"}
        _results.update(ranks.run("elastic_cases", WORLD, {"transport": "loopback"},
                                  tmp_path_factory.mktemp("elastic"), env))
    return _results


@pytest.mark.parametrize("case", [name for name, _ in elastic_cases.CASES])
def test_elastic_case(case, tmp_path_factory):
    res = results(tmp_path_factory).get(case)
    assert res is not None, "case %s did not run (an earlier case hung or killed a rank?)" % case
    failed = {r: tb for r, tb in res.items() if tb != "ok"}
    assert not failed, "\n".join("rank %d:\n%s" % (r, tb) for r, tb in sorted(failed.items()))
