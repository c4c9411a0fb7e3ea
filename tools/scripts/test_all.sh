#!/usr/bin/env bash
# The CPU-tier test suite: every test not tagged gpu/hardware, once in the
# default configuration and once under ASan+UBSan, then the Python package's
# pytest suite (python_tests.sh). Ends with "N passed, N failed", counted
# from Bazel's own per-test results and pytest's JUnit XML.
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
echo "=== python package (pytest)"
bash tools/scripts/python_tests.sh 2>&1 | tee -a "$log" || status=1
# Bazel's summary lines: "//pkg:target   PASSED in 0.1s", "(cached) PASSED",
# "FAILED in ...", "TIMEOUT in ...", "NO STATUS", "FAILED TO BUILD", "FLAKY".
passed=$(grep -E '^//[^ ]+ +(\(cached\) )?PASSED' "$log" | wc -l)
failed=$(grep -E '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)' "$log" | wc -l)
# pytest's, counted from its JUnit XML by python_tests.sh; no line means the
# stage broke before any result (build or install failed): one failure.
py=$(grep -E '^python: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
if [[ -n $py ]]; then
    read -r py_passed py_failed < <(sed -E 's/^python: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/' <<<"$py")
    passed=$((passed + py_passed))
    failed=$((failed + py_failed))
else
    echo "python package: no pytest results (see above)"
    failed=$((failed + 1))
fi
if ((status != 0 && failed == 0)); then
    echo "a stage exited nonzero: a target outside the tests failed to build, or the python package did not build (see above)"
fi
echo "${passed} passed, ${failed} failed"
((failed == 0 && status == 0))
