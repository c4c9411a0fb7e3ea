#!/usr/bin/env bash
# The CPU-tier test suite: every test not tagged gpu/hardware, once in the
# default configuration and once under ASan+UBSan. Ends with
# "N passed, N failed", counted from Bazel's own per-test results.
set -uo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/install_deps.sh || exit 1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for config in default asan; do
    flags=()
    [[ $config == asan ]] && flags=(--config=asan)
    echo "=== bazel test //... (${config})"
    bazel test "${flags[@]}" --keep_going --test_summary=short //... 2>&1 | tee -a "$log" || status=1
done
# Bazel's summary lines: "//pkg:target   PASSED in 0.1s", "(cached) PASSED",
# "FAILED in ...", "TIMEOUT in ...", "NO STATUS", "FAILED TO BUILD", "FLAKY".
passed=$(grep -E '^//[^ ]+ +(\(cached\) )?PASSED' "$log" | wc -l)
failed=$(grep -E '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)' "$log" | wc -l)
if ((status != 0 && failed == 0)); then
    echo "bazel exited nonzero: a target outside the tests failed to build (see above)"
fi
echo "${passed} passed, ${failed} failed"
((failed == 0 && status == 0))
