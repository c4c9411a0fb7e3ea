"""tools/engine_step_bench.py without a GPU: its arguments and refusals, the
n-gram hash (numpy and torch against Python ints), the table's content
(the threaded fill against the per-row functions and a byte-by-byte
reference), finding and mapping a memfd as it finds engram's shard, the
figures (percentiles, exposed time, ratios), the JSON records and the
table. The captured step itself runs in the device tier
(tools/scripts/python_gpu_tier.sh)."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "engine_step_bench.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("engine_step_bench", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(*args):
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, timeout=120)


def test_help():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    for flag in ("--sizes", "--tokens", "--replays", "--gpu-path", "--cache-frac", "--layer-us", "--layer-scale",
                 "--indices", "--json", "--layers", "--variants"):
        assert flag in r.stdout, flag


def trace(tmp_path, shape, dtype=np.int64, low=0):
    p = tmp_path / "t.npy"
    np.save(p, np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) + low)
    return str(p)


@pytest.mark.parametrize("args, message", [
    (["--sizes", "0"], "--sizes wants"),
    (["--sizes", "1,x"], "--sizes wants"),
    (["--sizes", "nan"], "--sizes wants"),
    (["--tokens", "0"], "--tokens wants"),
    (["--replays", "0"], "--replays wants"),
    (["--replays", "1,2,3"], "--replays gives 3 values for 2 --tokens"),
    (["--variants", "none,gpu"], "--variants wants"),
    (["--variants", "none,none"], "--variants wants"),
    (["--gpu-path", "auto"], "invalid choice"),
    (["--layers", "14"], "--layers must be > 14"),
    (["--layer-us", "0"], "--layer-us must be > 0"),
    (["--layer-scale", "-1"], "--layer-scale must be > 0"),
    (["--cache-frac", "1"], "--cache-frac wants a share"),
    (["--check-every", "0"], "--check-every must be >= 1"),
    (["--warmup", "-1"], "--warmup must be >= 0"),
    (["--indices", "/nonexistent/trace.npy"], "--indices /nonexistent/trace.npy"),
    (["--indices", BENCH], "--indices"),  # not an .npy
    (["--json", "/nonexistent/dir/out.jsonl"], "--json /nonexistent/dir/out.jsonl"),
])
def test_bad_arguments_are_refused(args, message):
    r = run(*args)
    assert r.returncode not in (0, None) and message in r.stdout + r.stderr, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("shape, dtype, low, message", [
    ((4, 8, 16), np.int64, 0, "wants 24 rows per token"),
    ((4, 8 * 24), np.int64, 0, "wants int32/int64 [steps, tokens, 24]"),
    ((2, 4, 24), np.float32, 0, "wants int32/int64"),
    ((2, 4, 24), np.int32, -5, "negative indices"),
    ((0, 4, 24), np.int64, 0, "holds no indices"),
])
def test_bad_traces_are_refused(tmp_path, shape, dtype, low, message):
    r = run("--indices", trace(tmp_path, shape, dtype, low))
    assert r.returncode not in (0, None) and message in r.stderr, (r.returncode, r.stderr)


def test_arguments_parse(bench):
    a = bench.parse_args(["--sizes", "0.25,2", "--tokens", "64,128,256", "--replays", "7",
                          "--variants", "engram,none", "--threads", "3"])
    assert a.sizes == [0.25, 2.0] and a.tokens == [64, 128, 256] and a.replays == [7, 7, 7]
    assert a.variants == ["none", "engram"] and a.threads == 3  # the canonical order
    d = bench.parse_args([])
    assert d.sizes == [1.0, 16.0, 64.0] and d.tokens == [512, 8192] and d.replays == [1000, 30]
    assert d.gpu_path == "host_gather" and d.layers == 61 and d.layer_us == 330 and d.layer_scale == 1
    assert d.variants == ["none", "torch", "engram"] and d.check_every == 50 and d.threads >= 1


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_no_gpu_is_an_error():
    import torch
    if torch.cuda.is_available():
        pytest.skip("the device tier measures on a GPU")
    r = run("--sizes", "0.01", "--tokens", "16", "--replays", "2")
    assert r.returncode != 0 and "needs a CUDA GPU" in r.stderr, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr


# -- the hash --------------------------------------------------------------------

def tokens_for_hash(n, seed):
    g = np.random.default_rng(seed)
    t = g.integers(0, 129280, size=(n, 3), dtype=np.int64)
    t[0] = [0, 0, 0]
    t[1] = [2**62 + 12345, 2**63 - 1, 7]  # large ids: every product wraps
    return t


@pytest.mark.parametrize("rows", [1, 7, 1000003, 2**27])
def test_hash_numpy_matches_python_ints(bench, rows):
    t = tokens_for_hash(64, rows)
    for table in (0, 1):
        want = np.array(bench.hash_ref(t.tolist(), table, rows), dtype=np.int64)
        got = bench.hash_np(t, table, rows)
        assert got.shape == (64, 24) and got.dtype == np.int64
        assert np.array_equal(got, want)
        assert got.min() >= 0 and got.max() < rows


def test_hash_torch_matches_numpy(bench):
    torch = pytest.importorskip("torch")
    t = tokens_for_hash(257, 3)
    for table in (0, 1):
        out = torch.empty(257, 24, dtype=torch.int64)
        seeds = torch.tensor(bench.hash_seeds(table), dtype=torch.int64)
        got = bench.hash_torch(torch, torch.from_numpy(t), seeds, 123457, out)
        assert got is out or got.data_ptr() == out.data_ptr()
        assert np.array_equal(out.numpy(), bench.hash_np(t, table, 123457))


def test_hash_spreads(bench):
    t = tokens_for_hash(4096, 5)
    a, b = bench.hash_np(t, 0, 1 << 20), bench.hash_np(t, 1, 1 << 20)
    assert not np.array_equal(a, b)  # each table its own seeds
    assert len(np.unique(a)) > 0.9 * a.size  # uniform ids: nearly every lookup another row
    assert all(len(np.unique(a[:, e])) > 3000 for e in range(24))
    # order 2 reads tokens 0 and 1 only, order 3 also token 2
    t2 = t.copy()
    t2[:, 2] += 1
    c = bench.hash_np(t2, 0, 1 << 20)
    assert np.array_equal(a[:, :12], c[:, :12]) and not np.array_equal(a[:, 12:], c[:, 12:])


# -- the table's content --------------------------------------------------------------

def test_fill_matches_row_functions_and_bytes(bench):
    rows = 5003
    for table in (0, 1):
        words = np.zeros((rows, 32), dtype=np.uint64)
        scales = np.zeros(rows, dtype=np.uint64)
        bench.fill(table, words, scales, threads=4, chunk_rows=1000)
        assert np.array_equal(words, bench.row_words(table, np.arange(rows)))
        assert np.array_equal(scales, bench.row_scales(table, np.arange(rows)))
        b = words.view(np.uint8)
        sf = scales.view(np.uint8).reshape(rows, 8)
        assert np.array_equal(bench.row_bytes(table, np.arange(rows)), b)
        g = np.random.default_rng(table)
        for r, c in zip(g.integers(0, rows, 200), g.integers(0, 256, 200)):
            assert b[r, c] == bench.row_byte_py(table, int(r), int(c)), (r, c)
        for r, k in zip(g.integers(0, rows, 50), g.integers(0, 8, 50)):
            assert sf[r, k] == bench.scale_byte_py(table, int(r), int(k)), (r, k)
        assert not np.isin(b, [0x7F, 0xFF]).any()  # no e4m3fn NaN
        assert sf.min() >= 0x78 and sf.max() <= 0x87  # ue8m0 2^-7 .. 2^8
        assert len(np.unique(words[:, 0])) == rows  # every row its own
    w0 = bench.row_words(0, np.arange(100))
    assert not np.array_equal(w0, bench.row_words(1, np.arange(100)))  # each table its own
    assert len(np.unique(w0[0])) == 32  # each word of a row its own


def test_expected_rows_of_indices(bench):
    """What a check compares a replay's rows with: recomputed from the indices alone."""
    import types
    idx = np.array([5, 0, 5, 9999999, 1, 2], dtype=np.int64)  # repeats and a row far past any table filled here
    rows, sf = bench.HostTable.expected(types.SimpleNamespace(table=1), idx)
    assert rows.shape == (6, 256) and rows.dtype == np.uint8 and sf.shape == (6, 8) and sf.dtype == np.uint8
    want = np.array([[bench.row_byte_py(1, int(r), c) for c in range(256)] for r in idx], dtype=np.uint8)
    want_sf = np.array([[bench.scale_byte_py(1, int(r), k) for k in range(8)] for r in idx], dtype=np.uint8)
    assert np.array_equal(rows, want) and np.array_equal(sf, want_sf)
    assert np.array_equal(rows[0], rows[2]) and not np.array_equal(rows[0], rows[1])


# -- engram's shard, as found by its memfd -------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd_create")
def test_memfd_found_mapped_and_shared(bench):
    size = 4 << 20
    before = bench.memfds()
    other = os.memfd_create(bench.SEGMENT, os.MFD_CLOEXEC)  # the right name, another size
    os.ftruncate(other, size // 2)
    fd = os.memfd_create(bench.SEGMENT, os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    decoy = os.memfd_create("another_segment", os.MFD_CLOEXEC)  # the right size, another name
    os.ftruncate(decoy, size)
    first = second = None
    try:
        ino, found = bench.find_shard_fd(before, size)
        assert found == fd and ino == os.fstat(fd).st_ino
        with pytest.raises(LookupError, match="0 new memfds"):
            bench.find_shard_fd(bench.memfds(), size)  # nothing new since
        with pytest.raises(LookupError, match="no read-write mapping"):
            bench.mapping_of(ino, size)  # not mapped yet
        first = bench.map_fd(fd, size)  # "engram's" mapping
        assert bench.mapping_of(ino, size) == first
        rows = size // 256
        words = bench.array_at(first, rows * 32, np.uint64).reshape(rows, 32)
        scales = np.zeros(rows, dtype=np.uint64)
        bench.fill(0, words, scales, threads=2, chunk_rows=4096)
        second = bench.map_fd(fd, size)  # the tool's own view: the same pages
        assert second != first
        view = bench.array_at(second, rows * 32, np.uint64).reshape(rows, 32)
        assert np.array_equal(view, bench.row_words(0, np.arange(rows)))
        with pytest.raises(LookupError, match="covers"):
            bench.mapping_of(ino, 2 * size)
    finally:
        for addr in (first, second):
            if addr is not None:
                bench.unmap(addr, size)
        for f in (fd, other, decoy):
            os.close(f)


def test_anonymous_map(bench):
    addr = bench.map_anon(1 << 20)
    try:
        a = bench.array_at(addr, (1 << 20) // 8, np.uint64)
        a[:] = 7
        assert int(a.sum()) == 7 * (1 << 17)
    finally:
        bench.unmap(addr, 1 << 20)


def test_host_plan(bench):
    keep, why = bench.host_plan(True, 64 << 30, 2 << 30, 10 << 30)
    assert keep and "one host copy" in why
    keep, why = bench.host_plan(False, 32 << 30, 1 << 30, 120 << 30)
    assert keep and "own copy" in why
    keep, why = bench.host_plan(False, 64 << 30, 2 << 30, 120 << 30)
    assert not keep and "no room" in why and "140.0 GiB wanted" in why
    assert not bench.host_plan(False, 1 << 30, 0, None)[0]


def test_mem_available(bench, tmp_path):
    p = tmp_path / "meminfo"
    p.write_text("MemTotal:       1000 kB\nMemAvailable:    512 kB\n")
    assert bench.mem_available(str(p)) == 512 * 1024
    assert bench.mem_available(str(tmp_path / "none")) is None


# -- index sources --------------------------------------------------------------------------

def test_trace_source(bench, tmp_path):
    steps, tokens = 40, 512
    a = np.arange(steps * tokens * 24, dtype=np.int64).reshape(steps, tokens, 24)
    p = tmp_path / "t.npy"
    np.save(p, a.astype(np.int32))
    flat = bench.load_trace(str(p))
    assert flat.dtype == np.int64 and flat.shape == (steps * tokens, 24)
    src = bench.Trace(str(p), flat)
    assert src.width == 24 and src.start == bench.PROFILE_TOKENS  # long enough: the profile's lookups skipped
    r = src.rounds(3, 1000)
    assert r.shape == (3, 1000, 24) and np.array_equal(r[0, 0], flat[bench.PROFILE_TOKENS])
    span = len(flat) - bench.PROFILE_TOKENS
    assert np.array_equal(r.reshape(-1, 24), flat[bench.PROFILE_TOKENS + np.arange(3000) % span])
    assert np.array_equal(src.indices(r[1], 0, 1000), r[1] % 1000)
    assert src.profile(0, 1000).shape == (bench.PROFILE_TOKENS * 24,)
    short = bench.Trace(str(p), flat[:100])
    assert short.start == 0 and short.rounds(1, 250).shape == (1, 250, 24)


def test_uniform_source(bench):
    src = bench.Uniform(3)
    r = src.rounds(4, 64)
    assert r.shape == (4, 64, 3) and r.min() >= 0 and r.max() < bench.VOCAB
    assert np.array_equal(r, bench.Uniform(3).rounds(4, 64))  # deterministic
    assert np.array_equal(src.indices(r[2], 1, 999), bench.hash_np(r[2], 1, 999))
    prof = src.profile(0, 1 << 20)
    assert prof.shape == (bench.PROFILE_TOKENS * 24,) and prof.max() < 1 << 20


# -- the figures ------------------------------------------------------------------------------

def test_percentile_is_numpys(bench):
    g = np.random.default_rng(1)
    for n in (1, 2, 5, 100, 1001):
        v = list(g.normal(1000, 50, n))
        for q in (0, 10, 50, 90, 100):
            assert bench.percentile(v, q) == pytest.approx(float(np.percentile(v, q)))
    assert bench.percentile([], 50) is None


CASE = {"bench": "engine_step", "size_gib": 64, "tokens": 512, "layers": 61}


def test_summarize_exposed_and_ratios(bench):
    times = {"none": [1000.0, 1002.0, 1001.0, 999.0, 1004.0],  # median 1001
             "torch": [1100.0, 1120.0, 1111.0, 1090.0, 1200.0],  # median 1111: exposed 110
             "engram": [1012.0, 1011.0, 1010.0, 1013.0, 1030.0]}  # median 1012: exposed 11
    checks = {"none": (1, 0), "torch": (1, 0), "engram": (1, 1)}
    status = {"none": "ok", "torch": "ok", "engram": "ok"}
    recs = bench.summarize(CASE, times, checks, status)
    by = {r["variant"]: r for r in recs}
    assert [r["variant"] for r in recs] == ["none", "torch", "engram"]
    assert by["none"]["step_us"] == 1001 and by["none"]["exposed_us"] == 0 and by["none"]["step_over_none"] == 1
    assert by["torch"]["exposed_us"] == 110 and by["torch"]["exposed_pct"] == pytest.approx(10.989, abs=1e-3)
    assert by["engram"]["exposed_us"] == 11 and by["engram"]["exposed_pct"] == pytest.approx(1.099, abs=1e-3)
    assert by["engram"]["torch_exposed_us"] == 110 and by["engram"]["engram_over_torch"] == 0.1
    assert by["engram"]["step_over_none"] == pytest.approx(1012 / 1001, abs=1e-4)
    assert by["engram"]["p10_us"] == pytest.approx(np.percentile(times["engram"], 10))
    assert by["engram"]["p90_us"] == pytest.approx(np.percentile(times["engram"], 90))
    assert by["engram"]["checked"] == 1 and by["engram"]["mismatches"] == 1 and by["engram"]["replays"] == 5
    for r in recs:
        assert r["size_gib"] == 64 and r["tokens"] == 512 and r["none_us"] == 1001
    v = bench.gemm_verdict(recs)
    assert v["ratio"] == pytest.approx(1012 / 1001, abs=1e-4)
    assert v["none_spread"] == pytest.approx((np.percentile(times["none"], 90) - np.percentile(times["none"], 10))
                                             / 1001, abs=1e-4)
    assert v["within_noise"] is False  # 1.1% against a 0.4% spread


def test_summarize_refused_and_missing_reference(bench):
    status = {"none": "ok", "torch": "skipped: no room", "engram": "refused: StateError: cannot be captured"}
    recs = bench.summarize(CASE, {"none": [5.0, 6.0, 7.0]}, {"none": (1, 0)}, status)
    by = {r["variant"]: r for r in recs}
    assert by["torch"]["status"].startswith("skipped") and by["torch"]["step_us"] is None
    assert by["engram"]["exposed_us"] is None and by["engram"]["engram_over_torch"] is None
    assert by["engram"]["replays"] == 0 and by["engram"]["checked"] == 0
    assert bench.gemm_verdict(recs) is None
    # no none variant: no reference, no exposed time
    recs = bench.summarize(CASE, {"engram": [5.0, 6.0]}, {"engram": (1, 0)}, {"engram": "ok"})
    assert recs[0]["step_us"] == 5.5 and recs[0]["none_us"] is None and recs[0]["exposed_us"] is None
    # torch's exposed time zero: no ratio
    recs = bench.summarize(CASE, {"none": [5.0], "torch": [5.0], "engram": [6.0]}, {},
                           {"none": "ok", "torch": "ok", "engram": "ok"})
    assert recs[2]["engram_over_torch"] is None and recs[2]["torch_exposed_us"] == 0


def test_json_records_and_table(bench):
    times = {"none": [100.0, 101.0], "torch": [150.0, 151.0], "engram": [102.0, 103.0]}
    recs = bench.summarize(CASE, times, {"torch": (2, 0), "engram": (2, 0)}, dict.fromkeys(times, "ok"))
    back = [json.loads(json.dumps(r)) for r in recs]
    keys = {"bench", "size_gib", "tokens", "layers", "variant", "status", "replays", "step_us", "p10_us", "p90_us",
            "none_us", "step_over_none", "exposed_us", "exposed_pct", "checked", "mismatches"}
    for r in back:
        assert keys <= set(r), keys - set(r)
    assert {"torch_exposed_us", "engram_over_torch"} <= set(back[2])
    lines = bench.table_lines(recs)
    assert len(lines) == 4 and "exposed" in lines[0] and "vs torch" in lines[0]
    assert "engram" in lines[3] and "0.040" in lines[3] and "2, 0 bad" in lines[3]  # 2 / 50 exposed
    assert "100.5" in lines[1] and "-" in lines[1].split()[-2]
    assert "the lookups held no SM" in bench.FOOTNOTES
