"""tools/overlap_bench.py takes the GEMM's slowdown and max/both within each
repeat (GEMMs alone, fetches alone, both, back to back) before the median,
so a GEMM whose own time drifts over the run does not skew them
(docs/BENCHMARKS.md, "GPU fetch beside GEMMs"). Pure arithmetic: runs without a GPU."""
import importlib.util
import os

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "overlap_bench.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("overlap_bench", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ratios_are_taken_within_each_repeat(bench):
    R = bench.Repeat
    # The GEMMs slow by 10% beside the fetches in two repeats of three while
    # their own time drifts 28 -> 30 ms: the ratio of the medians would be
    # 30.8 / 29 = 1.062, the median of the ratios is 1.1.
    repeats = [R(30.0, 20.0, 33.5, 33.0, 21.0), R(28.0, 22.0, 31.0, 30.8, 23.0), R(29.0, 21.0, 29.5, 29.0, 22.0)]
    rec = bench.paired_summary(repeats, 44_000_000, 2.0)
    assert rec["gemm_slowdown"] == pytest.approx(1.1)
    assert rec["max_over_both"] == pytest.approx(0.9032)  # 30/33.5, 28/31, 29/29.5: the middle one
    assert rec["gemm_alone_ms"] == 29.0 and rec["gemm_beside_ms"] == 30.8
    assert rec["fetch_alone_ms"] == 21.0 and rec["fetch_beside_ms"] == 22.0 and rec["both_ms"] == 31.0
    assert rec["fetch_gbps_alone"] == pytest.approx(44e6 / 21.0 / 1e6, abs=0.01)
    assert rec["fetch_gbps_beside"] == pytest.approx(2.0) and rec["fetch_over_h2d_beside"] == pytest.approx(1.0)


def test_even_repeats_take_the_middle_pair_and_no_reference_is_none(bench):
    R = bench.Repeat
    repeats = [R(10.0, 5.0, 10.0, 11.0, 5.0), R(10.0, 5.0, 10.0, 13.0, 5.0)]
    rec = bench.paired_summary(repeats, 1_000_000, 0.0)
    assert rec["gemm_slowdown"] == pytest.approx(1.2)
    assert rec["fetch_over_h2d_beside"] is None
