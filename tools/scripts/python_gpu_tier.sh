#!/usr/bin/env bash
# The Python package's device tier, on a GPU host without Bazel (Ubuntu,
# python3 with torch, setuptools and gcc): builds python/ against an
# installed CUDA-enabled libengram, then runs
#   python/tests/test_cuda.py     recv='cuda', table in host memory and in GPU
#                                 memory, fp8 + scales, CUDA graph capture/replay
#   python/tests/test_launch.py   the fork launcher, Ctrl-C, torch blocked (CPU)
#   examples/python/engram_fetch.py   DeepEP's default shape, recv=cuda, both
#                                 gpu_table placements, and --overhead (C API vs Python);
#                                 with a GPU bundle's RMA plugin in PREFIX, also
#                                 transport=nccl_gin on 2 emulated nodes x 2 and x 4
#                                 ranks, hybrid and direct
#   tools/overlap_bench.py        fetch beside a bf16 GEMM (OVERLAP=0 skips it)
#   tools/engine_step_bench.py    a decode step captured whole in a CUDA graph, with
#                                 and without the lookups, at 1 GiB (ENGINE_STEP=0 skips it)
#   tools/elastic_overhead.py     engram.ElasticBuffer's cost per fetch over Buffer
#   tools/deepep/run_deepep_engram_test.py   DeepEP's test_engram.py against
#                                 engram.ElasticBuffer, where DEEPEP_DIR names a
#                                 DeepEP checkout (DEEPEP_PROCESSES: 1)
# and writes under OUT_DIR: python_gpu_tier.log (everything), pytest.xml,
# engram_fetch_<placement>.txt, and a last line "python gpu tier: N passed,
# N failed, N skipped; examples: N ok, N failed".
#
#   bash tools/scripts/python_gpu_tier.sh PREFIX OUT_DIR
#
# PREFIX holds lib/pkgconfig/engram.pc (pkg-config not needed: setup.py reads
# the file when pkg-config is absent). PYTHON picks the interpreter (default
# python3). The DLPack header comes from the system, else from torch
# (ATen/dlpack.h, the same structs).
set -uo pipefail
if (($# != 2)); then
    echo "usage: $0 PREFIX OUT_DIR" >&2
    exit 2
fi
prefix=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
exec > >(tee "$out/python_gpu_tier.log") 2>&1
work=$(mktemp -d /tmp/engram-python-gpu.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "== $(date -u) $(uname -n); $($py --version 2>&1); torch $($py -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1)"
nvidia-smi -L 2>&1 | head -8

if ! echo '#include <dlpack/dlpack.h>' | gcc -E -x c - >/dev/null 2>&1; then
    tinc=$($py -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))')
    mkdir -p "$work/include/dlpack"
    echo '#include <ATen/dlpack.h>' >"$work/include/dlpack/dlpack.h"
    export CFLAGS="-I$work/include -I$tinc ${CFLAGS:-}"
    echo "== dlpack/dlpack.h from torch: $tinc/ATen/dlpack.h"
fi

cp -r "$root/python" "$work/python"
echo "== building the extension against $prefix"
if ! (cd "$work/python" && PKG_CONFIG_PATH=$prefix/lib/pkgconfig "$py" setup.py -q build_ext --inplace); then
    echo "python gpu tier: 0 passed, 1 failed, 0 skipped; examples: 0 ok, 0 failed (the extension did not build)"
    exit 1
fi
export PYTHONPATH=$work/python
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ENGRAM_LOG_LEVEL=${ENGRAM_LOG_LEVEL:-warn}
"$py" -m engram.info | tee "$out/engram_info.txt"

echo "== pytest"
(cd "$work/python/tests" && "$py" -m pytest -rA -p no:cacheprovider --junitxml="$out/pytest.xml" \
    test_cuda.py test_launch.py)
counts=$("$py" - "$out/pytest.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("0 passed, 1 failed, 0 skipped")
    sys.exit()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
n = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
bad = n["failures"] + n["errors"]
print("%d passed, %d failed, %d skipped" % (n["tests"] - bad - n["skipped"], bad, n["skipped"]))
PY
)

ok=0
bad=0
for placement in host_numa device; do
    echo "== engram_fetch.py --gpu-table $placement (DeepEP's default shape)"
    extra=()
    [[ $placement == host_numa ]] && extra=(--overhead)
    if timeout 600 "$py" "$root/examples/python/engram_fetch.py" --recv cuda --gpu-table "$placement" "${extra[@]}" \
        | tee "$out/engram_fetch_$placement.txt"; then
        ok=$((ok + 1))
    else
        bad=$((bad + 1))
    fi
done
# nccl_gin through the Python layer (engram.launch with local_size): 2
# emulated nodes of 2 and of 4 ranks on this host's GPUs, hybrid and direct,
# FP8 + scales, the rows checked bit for bit. Where PREFIX is a GPU bundle
# (it carries the NIC-less RMA plugin): GIN runs in NCCL's proxy mode there.
# torch loads its own libnccl.so.2 (older: 2.28.9 in torch 2.11), which the
# module would then bind to: the bundle's is preloaded.
if [[ -f $prefix/bin/libnccl-rma-engram.so && -f $prefix/lib/libnccl.so.2 ]]; then
    for shape in "4 2" "8 4"; do
        read -r ranks local <<<"$shape"
        for mode in hybrid direct; do
            echo "== engram_fetch.py --transport nccl_gin --ranks $ranks --local-size $local ($mode, fp8)"
            flags=()
            [[ $mode == hybrid ]] && flags=(--hybrid)
            if LD_PRELOAD=$prefix/lib/libnccl.so.2 NCCL_RMA_PLUGIN=$prefix/bin/libnccl-rma-engram.so \
                NCCL_MULTI_RANK_GPU_ENABLE=1 \
                CUDA_DEVICE_MAX_CONNECTIONS=32 timeout 300 "$py" "$root/examples/python/engram_fetch.py" \
                --recv cuda --transport nccl_gin --ranks "$ranks" --local-size "$local" "${flags[@]}" --fp8 \
                --entries 4096 --tokens 64 --warmup 1 --iters 3; then
                ok=$((ok + 1))
            else
                bad=$((bad + 1))
            fi
        done
    done
fi
# Fetch beside compute (tools/overlap_bench.py): skipped with OVERLAP=0; one rank, then
# the table sharded over OVERLAP_RANKS (default 4; 1 skips it) ranks of
# this node. JSON lines and tables go to OUT_DIR/overlap[_ranksN].jsonl/.txt.
if [[ ${OVERLAP:-1} != 0 ]]; then
    overlap_ranks=(1)
    [[ ${OVERLAP_RANKS:-4} != 1 ]] && overlap_ranks+=("${OVERLAP_RANKS:-4}")
    for ranks in "${overlap_ranks[@]}"; do
        name=overlap
        [[ $ranks != 1 ]] && name=overlap_ranks$ranks
        echo "== overlap_bench.py --ranks $ranks"
        # info: gpu_sms=auto logs the budget it picked.
        if ENGRAM_LOG_LEVEL=info timeout "${OVERLAP_TIMEOUT_S:-420}" "$py" "$root/tools/overlap_bench.py" \
            --ranks "$ranks" --json "$out/$name.jsonl" 2>&1 \
            | tee "$out/$name.txt"; then
            ok=$((ok + 1))
        else
            bad=$((bad + 1))
        fi
    done
fi
# The engine-shaped step (tools/engine_step_bench.py), small: 1 GiB, 512
# tokens, 16 layers, every tenth of 100 replays checked bit for bit, per
# gpu_path; both must capture (--strict). JSON lines and tables go to
# OUT_DIR/engine_step_<path>.jsonl/.txt.
if [[ ${ENGINE_STEP:-1} != 0 ]]; then
    for path in uva host_gather; do
        strict=(--strict)
        echo "== engine_step_bench.py --gpu-path $path (1 GiB, 512 tokens, 16 layers, 100 replays)"
        if timeout 600 "$py" "$root/tools/engine_step_bench.py" --gpu-path "$path" --sizes 1 --tokens 512 \
            --replays 100 --layers 16 --check-every 10 "${strict[@]}" --json "$out/engine_step_$path.jsonl" 2>&1 \
            | tee "$out/engine_step_$path.txt"; then
            ok=$((ok + 1))
        else
            bad=$((bad + 1))
        fi
    done
fi
echo "== elastic_overhead.py --recv cuda (ElasticBuffer's cost per fetch over Buffer; target <= 2 us)"
if timeout 600 "$py" "$root/tools/elastic_overhead.py" --recv cuda --target-us 2 | tee "$out/elastic_overhead.txt"; then
    ok=$((ok + 1))
else
    bad=$((bad + 1))
fi
# DeepEP's own engram test, unmodified, against engram.ElasticBuffer
# (tools/deepep/run_deepep_engram_test.py): only where DEEPEP_DIR names a
# DeepEP checkout (its tests/elastic/test_engram.py and deep_ep/utils/*.py),
# which is never part of this repository.
if [[ -n ${DEEPEP_DIR:-} ]]; then
    echo "== DeepEP test_engram.py against engram ($DEEPEP_DIR), with engram's bench and torch's UVA gather"
    if timeout "${DEEPEP_TIMEOUT_S:-900}" "$py" "$root/tools/deepep/run_deepep_engram_test.py" "$DEEPEP_DIR" \
        --num-processes "${DEEPEP_PROCESSES:-1}" --compare 2>&1 | tee "$out/deepep_engram.txt"; then
        ok=$((ok + 1))
    else
        bad=$((bad + 1))
    fi
fi
echo "python gpu tier: $counts; examples: $ok ok, $bad failed"
