#!/usr/bin/env bash
# Runs host test binaries under valgrind memcheck (forked ranks included):
# any invalid access, use of uninitialised memory or definite/indirect leak
# fails the test. Arguments: the test binaries (Bazel runfiles paths), each
# optionally followed by ":<argument>" for tests that take one.
# Under --config=asan the binaries carry ASan, which cannot run under
# valgrind: the test then says so and passes (ASan itself covers them).
set -uo pipefail
if ! command -v valgrind >/dev/null; then
    echo "valgrind_test: valgrind not found (tools/scripts/install_deps.sh installs it)" >&2
    exit 1
fi
status=0
for entry in "$@"; do
    bin=${entry%%:*}
    args=()
    [[ $entry == *:* ]] && args=("${entry#*:}")
    if grep -q __asan_init "$bin"; then
        echo "valgrind_test: $bin is built with ASan; skipped under valgrind"
        continue
    fi
    start=$SECONDS
    # still-reachable blocks (stdio buffers, libc caches in forked children
    # that _exit) and "possibly lost" ones (system libraries' constructors, e.g.
    # libnl under UCX) are not counted; definite and indirect leaks are.
    # --vgdb=no: its /tmp pipe mapping would trip engram_security_test.
    valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
        --errors-for-leak-kinds=definite,indirect --trace-children=yes --child-silent-after-fork=no \
        --track-origins=no --vgdb=no --quiet "$bin" "${args[@]}" >"$TEST_TMPDIR/out" 2>&1
    rc=$?
    echo "valgrind_test: $bin: exit $rc after $((SECONDS - start)) s"
    if ((rc != 0)); then
        tail -60 "$TEST_TMPDIR/out"
        status=1
    fi
done
exit $status
