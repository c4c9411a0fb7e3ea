#!/usr/bin/env bash
# ucx_rate_bench runs a short case and reports a positive rate.
set -euo pipefail
out=$(transports/ucx/ucx_rate_bench --rows-per-batch 1024 --batches 3 --seg-mb 4 --window 16 --flush-depth 8)
echo "$out"
awk '/Mgets\/s/ { ok = $(NF - 1) > 0 } END { exit !ok }' <<<"$out"
