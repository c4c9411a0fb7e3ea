#!/usr/bin/env bash
# Runs a GPU-tier bundle (made by gpu_bundle.sh) on a GPU host: every test,
# then every bench. Writes OUT_DIR/gpu_tier.log (everything printed) and
# OUT_DIR/gpu_tier.json (per binary: exit code, seconds; the benches' JSON
# lines). Exit code 0 only if every binary passed.
# Usage: bash run_gpu_tier.sh OUT_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_gpu_tier.sh OUT_DIR}
mkdir -p "$out"
log=$out/gpu_tier.log
bench_lines=$out/gpu_bench.jsonl
: >"$log"
: >"$bench_lines"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ENGRAM_TIMEOUT_MS=${ENGRAM_TIMEOUT_MS:-120000}
# nccl_gin on a host without a GIN NIC: NCCL's GIN proxy over the bundle's
# NIC-less RMA plugin (transports/nccl_gin/README.md).
if [[ -z ${NCCL_RMA_PLUGIN:-} && -f $here/bin/libnccl-rma-engram.so ]]; then
    export NCCL_RMA_PLUGIN=$here/bin/libnccl-rma-engram.so
fi
# The plugin's copy streams need hardware queues of their own, apart from
# GIN kernels that spin until those copies finish (rma_plugin/README.md).
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
{
    echo "=== GPU tier, $(date -u +%FT%TZ), host $(hostname), bundle of $(cat "$here/commit.txt" 2>/dev/null)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
        --format=csv,noheader 2>&1
    nvidia-smi topo -m 2>&1 | head -5
} | tee -a "$log"
results=()
failed=0
run_one() { # kind name args...
    local kind=$1 name=$2
    shift 2
    echo "=== $kind $name" | tee -a "$log"
    local t0=$(date +%s%N)
    timeout ${GPU_TIER_TIMEOUT_S:-240} "$here/bin/$name" "$@" 2>&1 | tee -a "$log"
    local rc=${PIPESTATUS[0]}
    local secs=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
    echo "=== $name: exit $rc in ${secs}s" | tee -a "$log"
    ((rc == 0)) || failed=$((failed + 1))
    results+=("{\"kind\":\"$kind\",\"name\":\"$name\",\"exit\":$rc,\"seconds\":$secs}")
}
while read -r t; do [[ -n $t ]] && run_one test "$t"; done <"$here/tests.txt"
# The installed layout: examples/fetch.c built against the bundle's
# include/ and lib/ (pkg-config), run on 4 ranks; engram_info lists the
# modules found in lib/engram.
if command -v cc >/dev/null && command -v pkg-config >/dev/null && [[ -f $here/lib/pkgconfig/engram.pc ]]; then
    # shellcheck disable=SC2046
    cc -std=c11 "$here/examples/fetch.c" $(PKG_CONFIG_PATH=$here/lib/pkgconfig pkg-config --cflags --libs engram) \
        -o "$here/bin/installed_fetch" 2>&1 | tee -a "$log"
    run_one test installed_fetch
    run_one test engram_info
fi
while read -r b; do [[ -n $b ]] && run_one bench "$b" "$bench_lines"; done <"$here/benches.txt"
# An n-gram trace (tools/ngram_trace.py) from this host's license texts over
# a 1 GiB table, replayed on both paths with and without a 2% cache: every
# fetch checked bit for bit (a failed check fails the bench).
trace=$out/ngram_trace.npy
texts=$(find /usr/share/doc -name copyright 2>/dev/null | head -2000)
if command -v python3 >/dev/null && python3 -c 'import numpy' 2>/dev/null && [[ -n $texts ]]; then
    # shellcheck disable=SC2086
    cat $texts /usr/share/common-licenses/* 2>/dev/null | head -c 3000000 >"$out/ngram_text.txt"
    if python3 "$here/tools/ngram_trace.py" "$trace" "$out/ngram_text.txt" --table-rows 4194304 2>&1 | tee -a "$log"; then
        run_one bench engram_gpu_bench --table-gib 1 --indices "$trace" --paths uva,host_gather --sms 0 \
            --cache-pct 2 "$bench_lines"
        run_one bench engram_gpu_bench --table-gib 1 --indices "$trace" --paths host_gather "$bench_lines"
    fi
else
    echo "=== trace: not run (it needs python3 with numpy and license texts under /usr/share/doc)" | tee -a "$log"
fi
{
    printf '{"date":"%s","host":"%s","gpu":"%s","failed":%d,"results":[' "$(date -u +%FT%TZ)" "$(hostname)" \
        "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" "$failed"
    (IFS=,; printf '%s' "${results[*]}")
    printf '],"bench":['
    paste -sd, "$bench_lines" | tr -d '\n'
    printf ']}\n'
} >"$out/gpu_tier.json"
echo "=== GPU tier: ${#results[@]} binaries, $failed failed" | tee -a "$log"
((failed == 0))
