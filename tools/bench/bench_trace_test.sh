#!/bin/bash
# engram_bench --indices replays a trace written by numpy (.npy int64 and
# int32, and raw little-endian int64) with the bit-exact check on, and
# refuses traces it cannot replay with a message naming the problem.
set -uo pipefail
bin="$1"
py=/usr/bin/python3
dir="${TEST_TMPDIR:-$(mktemp -d)}"
fails=0
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "bench_trace_test: $py has no numpy" >&2
    exit 1
fi
# 2 ranks x 1000 rows: every index in [0, 2000); [5 steps, 16 tokens, 3 entries]
"$py" - "$dir" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(7)
t = rng.integers(0, 2000, size=(5, 16, 3), dtype=np.int64)
t[0, 0, :] = [0, 1999, 1000]  # first and last rows, and the second rank's first
np.save(f"{d}/t64.npy", t)
np.save(f"{d}/t32.npy", t.astype(np.int32))
t.astype("<i8").tofile(f"{d}/t.raw")
np.save(f"{d}/fortran.npy", np.asfortranarray(t))
np.save(f"{d}/float.npy", t.astype(np.float32))
np.save(f"{d}/big_endian.npy", t.astype(">i8"))
np.save(f"{d}/two_d.npy", t.reshape(5, 48))
bad = t.copy(); bad[3, 7, 2] = 2000
np.save(f"{d}/out_of_range.npy", bad)
neg = t.astype(np.int32); neg[1, 2, 0] = -1
np.save(f"{d}/negative.npy", neg)
np.save(f"{d}/empty.npy", t[:0])
t.astype("<i8").tofile(f"{d}/short.raw"); open(f"{d}/short.raw", "ab").write(b"\0" * 8)
PY
common=(--ranks 2 --entries 1000 --row-bytes 72 --iters 6 --warmup 1 --json)
replay() { # replay 'label' args...
    local label="$1"
    shift
    local out rc
    out=$(timeout 120 "$bin" "${common[@]}" "$@" 2>&1)
    rc=$?
    if [ "$rc" != 0 ] || [[ $out != *'"rows": 48,'* ]] || [[ $out != *'"indices": "trace"'* ]] ||
        [[ $out != *'"check": "ok"'* ]]; then
        echo "FAIL: replay $label exited $rc: $out" >&2
        fails=$((fails + 1))
    fi
}
refuse() { # refuse 'message part' args...
    local want="$1"
    shift
    local err rc
    err=$(timeout 60 "$bin" "${common[@]}" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" != 2 ] || [[ $err != *"$want"* ]]; then
        echo "FAIL: engram_bench $* exited $rc with '$err' (wanted 2 and '$want')" >&2
        fails=$((fails + 1))
    fi
}
replay "int64 .npy" --indices "$dir/t64.npy"
replay "int32 .npy" --indices "$dir/t32.npy"
replay "int64 .npy, fp8 scales column-major, hybrid" --indices "$dir/t64.npy" --fp8 --sf-col-major --mode hybrid
replay "shape flags that agree" --indices "$dir/t64.npy" --tokens 16 --entries-per-token 3
replay "raw int64" --indices "$dir/t.raw" --tokens 16 --entries-per-token 3
refuse "Fortran-order arrays are not supported" --indices "$dir/fortran.npy"
refuse "dtype '<f4' is not supported" --indices "$dir/float.npy"
refuse "dtype '>i8' is not supported" --indices "$dir/big_endian.npy"
refuse "shape has 2 dimensions; needs [steps, tokens, entries_per_token]" --indices "$dir/two_d.npy"
refuse "step 3 token 7 entry 2 is 2000, outside the table's rows [0, 2000)" --indices "$dir/out_of_range.npy"
refuse "step 1 token 2 entry 0 is -1, outside" --indices "$dir/negative.npy"
refuse "holds no fetch" --indices "$dir/empty.npy"
refuse "the file has 16 tokens per step but --tokens is 8" --indices "$dir/t64.npy" --tokens 8
refuse "the file has 3 entries per token but --entries-per-token is 4" --indices "$dir/t64.npy" --entries-per-token 4
refuse "are not a whole number of raw int64 steps of 16 tokens x 3 entries" --indices "$dir/short.raw" --tokens 16 --entries-per-token 3
refuse "are not a whole number of raw int64 steps of 512 tokens x 24 entries" --indices "$dir/t.raw"
refuse "No such file or directory" --indices "$dir/missing.npy"
refuse "not a regular file" --indices "$dir"
: >"$dir/empty.raw"
refuse "the file is empty" --indices "$dir/empty.raw"
refuse "not a regular file" --indices /dev/null
[ "$fails" = 0 ] && echo "bench_trace_test: all passed"
exit $((fails > 0))
