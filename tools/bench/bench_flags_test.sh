#!/bin/bash
# engram_bench refuses every numeric flag that is not a decimal integer in
# its range (exit 2, the flag named), instead of wrapping it (wrapped,
# --row-bytes 4294967297 would run 1-byte rows and --ranks 99999999999
# 1215752191 ranks).
set -uo pipefail
bin="$1"
fails=0
refuse() { # refuse 'message part' args...
    local want="$1"
    shift
    local err rc
    err=$(timeout 20 "$bin" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" != 2 ] || [[ $err != *"$want"* ]]; then
        echo "FAIL: engram_bench $* exited $rc with '$err' (wanted 2 and '$want')" >&2
        fails=$((fails + 1))
    fi
}
refuse "--row-bytes needs an integer in [1, 4294967295], got '4294967297'" --row-bytes 4294967297
refuse "--ranks needs an integer in [1, 2147483647], got '99999999999'" --ranks 99999999999
refuse "--ranks needs an integer" --ranks -1
refuse "--ranks needs an integer" --ranks 0
refuse "--ranks needs an integer" --ranks ' 4'
refuse "--ranks needs an integer" --ranks 4x
refuse "--ranks needs an integer" --ranks 0x10
refuse "--local-size needs an integer in [0, 2147483647]" --local-size 2147483648
refuse "--entries needs an integer in [1, 9223372036854775807]" --entries 9223372036854775808
refuse "--entries needs an integer" --entries 0
refuse "--entries needs an integer" --entries=-5
refuse "--tokens needs an integer in [1, 4294967295]" --tokens 0
refuse "--tokens needs an integer" --tokens 4294967296
refuse "--entries-per-token needs an integer in [1, 4294967295]" --entries-per-token 4294967296
refuse "--iters needs an integer in [1, 2147483647]" --iters 2147483648
refuse "--iters needs an integer" --iters 1e3
refuse "--warmup needs an integer in [0, 2147483647]" --warmup -1
refuse "--seed needs an integer in [0, 18446744073709551615]" --seed 18446744073709551616
refuse "--seed needs an integer" --seed -1
refuse "--iters 2147483647 + --warmup 1 exceed 2147483647" --iters 2147483647 --warmup 1
refuse "--indices replays a trace; it does not take --dist" --indices /dev/null --dist zipf
refuse "--local-size 3 must divide --ranks 4" --ranks 4 --local-size 3
refuse "--local-size 5 must divide --ranks 4" --local-size 5
[ "$fails" = 0 ] && echo "bench_flags_test: all passed"
exit $((fails > 0))
