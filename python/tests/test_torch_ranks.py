"""4 ranks (torch.multiprocessing, gloo): every case of cpu_cases.py on the
loopback transport and on ucx over shared memory (posix)."""
import pytest

torch = pytest.importorskip("torch")

import cpu_cases  # noqa: E402
import ranks  # noqa: E402

WORLD = 4
TRANSPORTS = {
    "loopback": ({"transport": "loopback"}, {}),
    "ucx": ({"transport": "ucx"}, {"UCX_TLS": "posix"}),
}
_results = {}


def results(transport, tmp_path_factory):
    if transport not in _results:
        config, env = TRANSPORTS[transport]
        env = dict(env, ENGRAM_TIMEOUT_MS="20000", ENGRAM_LOG_LEVEL="error")
        _results[transport] = ranks.run("cpu_cases", WORLD, config, tmp_path_factory.mktemp(transport), env)
    return _results[transport]


@pytest.mark.parametrize("case", [name for name, _ in cpu_cases.CASES])
@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_case(transport, case, tmp_path_factory):
    res = results(transport, tmp_path_factory).get(case)
    assert res is not None, "case %s did not run (an earlier case hung or killed a rank?)" % case
    skips = {tb for tb in res.values() if tb.startswith("skip: ")}
    if skips and len(skips) == 1 and all(tb.startswith("skip: ") for tb in res.values()):
        pytest.skip(skips.pop()[len("skip: "):])
    failed = {r: tb for r, tb in res.items() if tb != "ok"}
    assert not failed, "\n".join("rank %d:\n%s" % (r, tb) for r, tb in sorted(failed.items()))
