#!/usr/bin/env bash
# Builds one libFuzzer target with clang (ASan + UBSan + fuzzer coverage)
# from the sources given, and runs it for a bounded time on a copy of its
# seed corpus (tests/fuzz/corpus/<name>). Any crash, leak, sanitizer report
# or assertion (abort) fails the test; the input is kept in the test's
# undeclared outputs.
#   run_fuzz.sh <name> <seconds> [--template <plugin template .c>] <sources...>
# Bazel builds with gcc, which has no libFuzzer, hence the separate clang
# build here. FUZZ_SECONDS overrides the time (e.g. longer local runs).
set -euo pipefail
name=$1 seconds=${FUZZ_SECONDS:-$2}
shift 2
template=
if [[ ${1:-} == --template ]]; then
    template=$2
    shift 2
fi
clang=$(command -v clang-14 || command -v clang || true)
if [[ -z $clang ]]; then
    echo "run_fuzz: clang not found (tools/scripts/install_deps.sh installs clang-14 and libclang-rt-14-dev)" >&2
    exit 1
fi
work=${TEST_TMPDIR:-$(mktemp -d)}/fuzz_$name
artifacts=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}/
mkdir -p "$work/corpus"
cflags=(-std=c11 -D_GNU_SOURCE -I. -Iinclude -g -O1 -Wall -Werror)
"$clang" "${cflags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -o "$work/$name" "$@" -ldl
if [[ -n $template ]]; then
    # The template is foreign code to the loader: built plainly, like a plugin.
    "$clang" "${cflags[@]}" -fPIC -shared -o "$work/template.so" "$template"
    "$clang" "${cflags[@]}" -fPIC -shared -DFUZZ_NO_SYMBOL -o "$work/template_nosym.so" "$template"
    export FUZZ_PLUGIN_TEMPLATE=$work/template.so FUZZ_PLUGIN_TEMPLATE_NOSYM=$work/template_nosym.so
fi
cp tests/fuzz/corpus/"$name"/* "$work/corpus/"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# -close_fd_mask=2: the library's error lines (every malformed input logs one)
# would dominate the run; libFuzzer and the sanitizers report on a dup of stderr.
set +e
"$work/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 -close_fd_mask=2 -artifact_prefix="$artifacts" "$work/corpus" 2>&1 | tee "$work/log"
status=${PIPESTATUS[0]}
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
echo "run_fuzz: $name: ${runs:-?} inputs executed in ${seconds}s, exit status $status"
exit "$status"
