#!/usr/bin/env bash
# engram_bench --transport ucx per UCX_TLS, with two ratios from one run and
# a "target" line checking the one that counts for that UCX_TLS against its
# bound:
#   posix: engram MPPS / the same run's memcpy-gather reference (>= 0.8)
#   tcp:   engram MPPS / ucx_perftest -t ucp_get Mmsg/s over loopback with
#          the same row size and outstanding window (-O = ucx_window) (>= 1.0)
#   tools/scripts/bench_ucx.sh [engram_bench options]   e.g. --ranks 2
# Environment:
#   BENCH_UCX_TLS     UCX_TLS values to run, in turn      [posix tcp]
#   ENGRAM_UCX_WINDOW outstanding gets per worker, passed to engram and as
#                     perftest's -O                       [256, the config default]
#   ENGRAM_TIMEOUT_MS engram's bound on waits and barriers [600000]
#   PERFTEST_SECONDS  how long perftest's timed run should take; its
#                     iteration count comes from a short calibration run [5]
#   BENCH_BIN         an installed engram_bench to run instead of installing
#                     one (ucx is a module: a bazel-bin binary cannot load it)
# perftest runs once per (UCX_TLS, row size) the bench reports (from its
# JSON), so options such as --row-bytes and --sweep need no parsing here.
set -euo pipefail
cd "$(dirname "$0")/../.."
tls_list=${BENCH_UCX_TLS:-posix tcp}
export ENGRAM_UCX_WINDOW=${ENGRAM_UCX_WINDOW:-256}
window=$ENGRAM_UCX_WINDOW
seconds=${PERFTEST_SECONDS:-5}
# While one rank runs all its timed fetches the others wait in one barrier,
# which over tcp on a small, loaded host can outlast the 30 s default.
export ENGRAM_TIMEOUT_MS=${ENGRAM_TIMEOUT_MS:-600000}
[[ $window =~ ^[1-9][0-9]*$ ]] || { echo "bench_ucx: ENGRAM_UCX_WINDOW must be a positive integer, got '$window'" >&2; exit 2; }
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "bench_ucx: PERFTEST_SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }

command -v ucx_perftest >/dev/null || { echo "bench_ucx: ucx_perftest not found (Debian: ucx-utils)" >&2; exit 1; }
server_pid=
stop_server() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    server_pid=
    return 0
}
prefix=
trap 'stop_server; [[ -n $prefix ]] && rm -rf "$prefix"' EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Overall message rate (msg/s) of ucx_perftest -t ucp_get -s $1 -O $window
# with $2 iterations (the warm-up a tenth of them), bounded by 120 s.
perftest_run() {
    local port log rate
    port=$(free_port)
    log=$(mktemp)
    timeout 120 ucx_perftest -p "$port" >/dev/null 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do # the server listens once its UCX context is up
        ss -ltnH "sport = :$port" | grep -q . && break
        sleep 0.05
    done
    timeout 120 ucx_perftest -p "$port" localhost -t ucp_get -s "$1" -O "$window" -n "$2" \
        -w $(($2 / 10 + 1)) >"$log" 2>&1 || true
    stop_server
    # Final: iters lat50 lat_avg lat_overall bw_avg bw_overall rate_avg rate_overall
    rate=$(awk '$1 == "Final:" { print $9 }' "$log")
    [[ -n $rate ]] || { echo "bench_ucx: ucx_perftest -s $1 -n $2 gave no Final line:" >&2; cat "$log" >&2; }
    rm -f "$log"
    echo "$rate"
}

# A 2,000-get calibration sets the iteration count for about $seconds s
# (1e6 gets at one outstanding never finished over tcp).
perftest_rate() {
    local calib iters
    calib=$(perftest_run "$1" 2000)
    [[ -n $calib ]] || return 0
    iters=$(awk -v r="$calib" -v s="$seconds" 'BEGIN { n = int(r * s); print n < 2000 ? 2000 : (n > 20000000 ? 20000000 : n) }')
    echo "bench_ucx: UCX_TLS=$UCX_TLS perftest -s $1 -O $window: calibration $calib msg/s, timed run $iters gets" >&2
    perftest_run "$1" "$iters"
}

bin=${BENCH_BIN:-}
if [[ -z $bin ]]; then
    # installed, so the binary finds its transport modules in ../lib/engram
    prefix=$(mktemp -d /tmp/engram-bench-ucx.XXXXXX)
    bash tools/scripts/install.sh "$prefix" >&2
    bin=$prefix/bin/engram_bench
fi

status=0
for tls in $tls_list; do
    export UCX_TLS=$tls
    echo "bench_ucx: UCX_TLS=$tls load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    # UCX logs to stdout too: keep the JSON lines.
    out=$(timeout 900 "$bin" --transport ucx --json "$@" | grep '^{' || true)
    if [[ -z $out ]]; then
        echo "bench_ucx: UCX_TLS=$tls: engram_bench reported no case" >&2
        status=1
        continue
    fi
    declare -A perftest=()
    while read -r case_json; do
        # row_bytes, mpps, the memcpy-gather reference and a short description of the case
        read -r row_bytes mpps ref_mpps desc < <(python3 -c 'import json, sys; c = json.loads(sys.argv[1]); print(c["row_bytes"], c["mpps"], c["ref_mpps"], "%s ranks=%d rows=%d fp8=%s check=%s" % (c["mode"], c["ranks"], c["rows"], c["fp8"], c["check"]))' "$case_json")
        [[ -n ${perftest[$row_bytes]:-} ]] || perftest[$row_bytes]=$(perftest_rate "$row_bytes")
        ref=${perftest[$row_bytes]}
        if [[ -z $ref ]]; then
            status=1
            continue
        fi
        awk -v tls="$tls" -v c="$desc" -v e="$mpps" -v g="$ref_mpps" -v p="$ref" -v s="$row_bytes" -v w="$window" \
            'BEGIN { rg = e / g; rp = e / (p / 1e6)
                     printf "UCX_TLS=%s %s: engram %.3f MPPS | ref memcpy-gather %.3f MPPS | ratio %.3f | ucx_perftest -t ucp_get -s %d -O %d %.4f Mmsg/s | ratio %.3f\n",
                            tls, c, e, g, rg, s, w, p / 1e6, rp
                     if (tls == "posix") printf "  target UCX_TLS=posix: memcpy-gather ratio %.3f >= 0.8: %s\n", rg, (rg >= 0.8 ? "met" : "NOT met")
                     else if (tls == "tcp") printf "  target UCX_TLS=tcp: ucx_perftest ratio %.3f >= 1.0: %s\n", rp, (rp >= 1.0 ? "met" : "NOT met") }'
    done <<<"$out"
    unset perftest
done
exit "$status"
