#!/usr/bin/env bash
# libengram.so carries no code that exists only for tests: the seams tests
# need (the software NIC model's rings, the WQE decoder, a forked rank's
# socket) live in testonly targets. nm lists local symbols too, so a hidden
# hook is caught as well as an exported one.
# Usage: no_test_hooks_test.sh path/to/libengram.so.0.x.y [module.so ...]
# (the transport modules ship too: the mlx5 hooks would live in one).
set -euo pipefail
core=$1
# A symbol every build has, so an empty or stripped listing cannot pass.
core_syms=$(nm --defined-only "$core" | awk '{ print $3 }')
grep -qx fork_rank_group_create <<<"$core_syms" || { echo "FAIL: nm $core lists no internal symbols" >&2; exit 1; }
fail=0
for lib in "$@"; do
syms=$(nm --defined-only "$lib" | awk '{ print $3 }')
for hook in engram_mlx5_rings_install engram_mlx5_wqe_decode fork_rank_fd; do
    if grep -qx "$hook" <<<"$syms"; then
        echo "FAIL: $lib defines the test hook $hook" >&2
        fail=1
    else
        echo "ok: no $hook"
    fi
done
# Nothing of the model or any other testing/ code either.
if found=$(grep -E '^(__wrap_|engram_mlx5_model_)' <<<"$syms"); then
    echo "FAIL: $lib defines test-only symbols: $found" >&2
    fail=1
else
    echo "ok: no __wrap_* or engram_mlx5_model_*"
fi
done
exit "$fail"
