#!/usr/bin/env bash
# engram_bench --transport ucx beside ucx_perftest -t ucp_get on the same
# UCX_TLS over loopback, with the ratio of message rates (engram/perftest).
#   tools/scripts/bench_ucx.sh [engram_bench options]   e.g. --ranks 2
# Environment: UCX_TLS (default posix), PERFTEST_ITERS (default 1000000),
# BAZEL_OUTPUT_BASE (optional --output_base for the build), BENCH_BIN
# (an engram_bench binary to run instead of building one).
# perftest runs once per row size the bench reports (from its JSON), so
# options such as --row-bytes and --sweep need no parsing here.
set -euo pipefail
cd "$(dirname "$0")/../.."
export UCX_TLS=${UCX_TLS:-posix}
iters=${PERFTEST_ITERS:-1000000}
bazel_cmd=(bazel)
[[ -n ${BAZEL_OUTPUT_BASE:-} ]] && bazel_cmd+=(--output_base="$BAZEL_OUTPUT_BASE")

command -v ucx_perftest >/dev/null || { echo "bench_ucx: ucx_perftest not found (Debian: ucx-utils)" >&2; exit 1; }
server_pid=
stop_server() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    server_pid=
    return 0
}
trap stop_server EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Overall message rate (msg/s) of ucx_perftest -t ucp_get -s $1.
perftest_rate() {
    local port log
    port=$(free_port)
    log=$(mktemp)
    timeout 120 ucx_perftest -p "$port" >/dev/null 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do # the server listens once its UCX context is up
        ss -ltnH "sport = :$port" | grep -q . && break
        sleep 0.05
    done
    timeout 120 ucx_perftest -p "$port" localhost -t ucp_get -s "$1" -n "$iters" >"$log" 2>&1 || true
    stop_server
    # Final: iters lat50 lat_avg lat_overall bw_avg bw_overall rate_avg rate_overall
    local rate
    rate=$(awk '$1 == "Final:" { print $9 }' "$log")
    [[ -n $rate ]] || { echo "bench_ucx: ucx_perftest -s $1 gave no Final line:" >&2; cat "$log" >&2; }
    rm -f "$log"
    echo "$rate"
}

bin=${BENCH_BIN:-}
if [[ -z $bin ]]; then
    "${bazel_cmd[@]}" build //tools:engram_bench >&2
    bin=$("${bazel_cmd[@]}" info bazel-bin 2>/dev/null)/tools/engram_bench
fi
# UCX logs to stdout too: keep the JSON lines.
out=$(timeout 600 "$bin" --transport ucx --json "$@" | grep '^{' || true)
[[ -n $out ]] || { echo "bench_ucx: engram_bench reported no case" >&2; exit 1; }

declare -A perftest
status=0
while read -r case_json; do
    # row_bytes, mpps and a short description of the case
    read -r row_bytes mpps desc < <(python3 -c 'import json, sys; c = json.loads(sys.argv[1]); print(c["row_bytes"], c["mpps"], "%s ranks=%d rows=%d fp8=%s check=%s" % (c["mode"], c["ranks"], c["rows"], c["fp8"], c["check"]))' "$case_json")
    [[ -n ${perftest[$row_bytes]:-} ]] || perftest[$row_bytes]=$(perftest_rate "$row_bytes")
    ref=${perftest[$row_bytes]}
    if [[ -z $ref ]]; then
        status=1
        continue
    fi
    awk -v tls="$UCX_TLS" -v c="$desc" -v e="$mpps" -v p="$ref" -v s="$row_bytes" \
        'BEGIN { printf "UCX_TLS=%s %s: engram %.3f MPPS | ucx_perftest -t ucp_get -s %d %.2f Mmsg/s | ratio %.3f\n",
                 tls, c, e, s, p / 1e6, e / (p / 1e6) }'
done <<<"$out"
exit "$status"
