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
reason='libucX.so.0: cannot open shared object file'
out=$("$PREFIX/bin/engram_info") || fail "engram_info exited $? with the ucx module unloadable"
grep -E '^  ucx +available: no .*module not loaded.*'"$reason" <<<"$out" ||
    fail "engram_info does not list ucx unavailable with the loader's message: $out"
work=$TEST_TMPDIR/missing
mkdir -p "$work"
cc -std=c11 "$ROOT/examples/fetch.c" -I"$PREFIX/include" -L"$PREFIX/lib" -lengram -o "$work/fetch"
export LD_LIBRARY_PATH=$PREFIX/lib
ENGRAM_TRANSPORT=auto "$work/fetch" >"$work/auto.log" 2>&1 || { cat "$work/auto.log"; fail "transport=auto"; }
grep -q 'all correct' "$work/auto.log" || fail "transport=auto did not fetch: $(cat "$work/auto.log")"
if ENGRAM_TRANSPORT=ucx "$work/fetch" >"$work/ucx.log" 2>&1; then
    fail "transport=ucx ran without its module's library"
fi
grep -q "transport 'ucx' cannot run here: module not loaded: .*$reason" "$work/ucx.log" ||
    fail "transport=ucx failed without the loader's reason: $(cat "$work/ucx.log")"
echo "module_missing_test: ucx listed unavailable, auto ran, ucx refused with the reason"
