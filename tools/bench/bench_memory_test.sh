#!/bin/bash
# engram_bench refuses, before forking a rank, a case the host cannot hold,
# saying what it needs (a case that does not fit would otherwise be
# OOM-killed, leaving only "killed by signal 9"), and a shape whose sizes
# overflow.
set -uo pipefail
bin="$1"
fails=0
refuse() { # refuse 'message part' args...
    local want="$1"
    shift
    local err rc start=$SECONDS
    err=$(timeout 20 "$bin" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" != 1 ] || [[ $err != *"$want"* ]] || ((SECONDS - start > 5)); then
        echo "FAIL: engram_bench $* exited $rc after $((SECONDS - start)) s with '$err' (wanted 1 and '$want')" >&2
        fails=$((fails + 1))
    fi
}
# 4 ranks x 2^40 rows of 4 KiB: 16 PiB, on no host
refuse "this case needs about" --entries 4294967296 --row-bytes 4096
refuse "4 ranks x 16777464.1 MiB each (shard 16777216.0, receive slots 192.0" --entries 4294967296 --row-bytes 4096
refuse "MiB shared (the memcpy reference table); the host has" --entries 4294967296 --row-bytes 4096
# many ranks of tiny tables still cost each rank a process
refuse "this case needs about" --ranks 2000000000 --entries 1 --row-bytes 1 --tokens 1 --entries-per-token 1
refuse "rows exceed int64 indices" --entries 4611686018427387904
refuse "overflow" --entries 4294967296 --row-bytes 4294967295 --ranks 1
refuse "overflow" --entries 1 --tokens 4294967295 --entries-per-token 4294967295 --row-bytes 4096 --ranks 1
[ "$fails" = 0 ] && echo "bench_memory_test: all passed"
exit $((fails > 0))
