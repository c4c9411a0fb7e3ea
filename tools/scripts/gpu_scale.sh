#!/usr/bin/env bash
# Fetch rate against table size on a GPU host: engram_gpu_bench from a GPU
# bundle (gpu_bundle.sh) at each table size, one table at a time, on
#   uva          the gather kernel reading host memory (every SM)
#   host_gather  host threads and the copy engine, on 4 KiB pages, then on
#                2 MiB pages (vm.nr_hugepages set for the largest size and
#                released after: needs root)
#   auto         what the table chooses (the reach probe)
# each line beside the same run's contiguous host-to-device copy of the same
# bytes. Then DeepSeek-V4.1's decode shape (512 tokens x 48 FP8 rows of 256
# bytes + scales) and zipf traffic at the largest size.
# Writes OUT_DIR/scale.log and OUT_DIR/scale.jsonl (engram_gpu_bench's JSON).
# Usage: bash gpu_scale.sh BUNDLE OUT_DIR [GiB ...]   (default 0.25 1 4 16 64)
set -uo pipefail
if (($# < 2)); then
    echo "usage: $0 BUNDLE OUT_DIR [GiB ...]" >&2
    exit 2
fi
bundle=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
shift 2
sizes=("$@")
((${#sizes[@]})) || sizes=(0.25 1 4 16 64)
largest=${sizes[-1]}
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bench=$bundle/bin/engram_gpu_bench
jsonl=$out/scale.jsonl
exec > >(tee -a "$out/scale.log") 2>&1
echo "=== gpu_scale $(date -u +%FT%TZ) $(hostname), bundle of $(cat "$bundle/commit.txt" 2>/dev/null)"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
echo "cpus $(nproc), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)," \
    "shmem THP $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)"
failed=0
run() { # label, then engram_gpu_bench's flags
    local label=$1
    shift
    echo "=== $label: engram_gpu_bench $*"
    "$bench" "$@" "$jsonl" || { failed=$((failed + 1)); echo "=== $label: FAILED"; }
}
hugepages() { # count
    sysctl -q -w vm.nr_hugepages="$1" >/dev/null 2>&1
    echo "=== vm.nr_hugepages=$(cat /proc/sys/vm/nr_hugepages) (asked $1)"
}
hugepages 0
for gib in "${sizes[@]}"; do
    run "uva $gib GiB" --table-gib "$gib" --paths uva --sms 0
    ENGRAM_HUGE_PAGES=off run "host_gather 4 KiB pages $gib GiB" --table-gib "$gib" --paths host_gather
done
run "auto ${sizes[0]} GiB" --table-gib "${sizes[0]}" --paths auto --tokens 512
run "auto $largest GiB" --table-gib "$largest" --paths auto --tokens 512
# 2 MiB pages for the largest table, its staging and a little more
hugepages "$(awk -v g="$largest" 'BEGIN { printf "%d", g * 512 + 1024 }')"
for gib in "${sizes[@]}"; do
    ENGRAM_HUGE_PAGES=on run "host_gather 2 MiB pages $gib GiB" --table-gib "$gib" --paths host_gather
done
ENGRAM_HUGE_PAGES=on run "DeepSeek-V4.1 decode, host_gather, $largest GiB" --table-gib "$largest" \
    --paths host_gather --tokens 512 --ept 48 --packs 1
ENGRAM_HUGE_PAGES=on run "zipf, host_gather, $largest GiB" --table-gib "$largest" --paths host_gather --dist zipf
hugepages 0
run "DeepSeek-V4.1 decode, uva, $largest GiB" --table-gib "$largest" --paths uva --sms 0 --tokens 512 --ept 48 \
    --packs 1
echo "=== gpu_scale: $failed failed"
((failed == 0))
