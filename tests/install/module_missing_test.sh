#!/usr/bin/env bash
# The ucx module installed on a host without UCX: its DT_NEEDED libucp.so.0
# is renamed to a library that does not exist, as dlopen sees it there.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
module=$PREFIX/lib/engram/libengram_transport_ucx.so
if [[ ! -f $module ]]; then
    echo "module_missing_test: no ucx module in this build (UCX not found); nothing to check"
    exit 0
fi
chmod u+w "$module"
perl -pi -e 's/libucp\.so\.0/libucX.so.0/g' "$module"
readelf -d "$module" | grep -q 'libucX\.so\.0' || fail "could not rename the module's DT_NEEDED"
# mlx5dv too (it comes before loopback in auto's order), so auto has to
# pass over an unloadable module on its way to loopback.
mlx5=$PREFIX/lib/engram/libengram_transport_mlx5dv.so
if [[ -f $mlx5 ]]; then
    chmod u+w "$mlx5"
    perl -pi -e 's/libmlx5\.so\.1/libmlxX.so.1/g' "$mlx5"  # same length: only the name changes
fi
reason='libucX.so.0: cannot open shared object file'
out=$("$PREFIX/bin/engram_info" 2>&1) || fail "engram_info exited $? with the ucx module unloadable"
# A module this host cannot load is normal: listed, not logged as an error.
if grep -E '^engram\[[0-9]+\] error ' <<<"$out"; then fail "engram_info logged an error"; fi
grep -E '^  ucx +available: no .*module not loaded.*'"$reason" <<<"$out" ||
    fail "engram_info does not list ucx unavailable with the loader's message: $out"
work=$TEST_TMPDIR/missing
mkdir -p "$work"
cc -std=c11 "$ROOT/examples/fetch.c" -I"$PREFIX/include" -L"$PREFIX/lib" -lengram -o "$work/fetch"
export LD_LIBRARY_PATH=$PREFIX/lib
ENGRAM_TRANSPORT=auto "$work/fetch" >"$work/auto.log" 2>&1 || { cat "$work/auto.log"; fail "transport=auto"; }
grep -q 'all correct' "$work/auto.log" || fail "transport=auto did not fetch: $(cat "$work/auto.log")"
# Passing over a module this host cannot load is normal: no error logged.
if grep -E '^engram\[[0-9]+\] error ' "$work/auto.log"; then fail "transport=auto logged an error"; fi
if ENGRAM_TRANSPORT=ucx "$work/fetch" >"$work/ucx.log" 2>&1; then
    fail "transport=ucx ran without its module's library"
fi
grep -q "transport 'ucx' cannot run here: module not loaded: .*$reason" "$work/ucx.log" ||
    fail "transport=ucx failed without the loader's reason: $(cat "$work/ucx.log")"
echo "module_missing_test: ucx listed unavailable, auto ran, ucx refused with the reason"
