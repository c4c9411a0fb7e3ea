#!/usr/bin/env bash
# An out-of-tree GPU-initiated transport: the skeleton tests/install/gpuplug.c
# built with only the installed headers on the include path and linked
# against the installed library, its kernel (gpuplug_kernel.cu) compiled
# against the same headers where this build found nvcc (argument 1, empty
# without), and the plugin loaded by the installed engram_info: accepted by
# the loader (a launcher and no host op), listed with its own reason for not
# running, and named by transport= it is refused with that reason.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
nvcc=${1:-}
work=$TEST_TMPDIR/gpuplug
mkdir -p "$work/plugins"
cp "$ROOT/tests/install/gpuplug.c" "$ROOT/tests/install/gpuplug_kernel.cu" "$work/"
if grep -n '#include "' "$work/gpuplug.c" "$work/gpuplug_kernel.cu"; then
    fail "the skeleton includes headers of the source tree"
fi
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -shared -I"$PREFIX/include" "$work/gpuplug.c" \
    -L"$PREFIX/lib" -lengram -Wl,--no-undefined -o "$work/plugins/libengram_transport_gpuplug.so" ||
    fail "building the skeleton against $PREFIX/include"
if [[ -n $nvcc ]]; then
    "$nvcc" -std=c++17 -Werror all-warnings -I"$PREFIX/include" -c "$work/gpuplug_kernel.cu" -o "$work/kernel.o" ||
        fail "compiling the skeleton's kernel against $PREFIX/include"
    kernel="kernel compiled with $nvcc"
else
    kernel="kernel not compiled: this build found no nvcc"
fi
out=$(ENGRAM_PLUGIN_PATH=$work/plugins "$PREFIX/bin/engram_info" 2>&1) || fail "engram_info exited $?: $out"
grep -qF "gpuplug    available: no  (gpuplug is a skeleton: its launcher moves no rows)" <<<"$out" ||
    fail "engram_info does not list the skeleton as loaded and not running: $out"
if out=$(ENGRAM_PLUGIN_PATH=$work/plugins ENGRAM_TRANSPORT=gpuplug "$PREFIX/bin/engram_info" 2>&1); then
    fail "transport=gpuplug ran: $out"
fi
grep -qF "transport 'gpuplug' (plugin) cannot run here: gpuplug is a skeleton" <<<"$out" ||
    fail "transport=gpuplug was not refused with the skeleton's reason: $out"
echo "gpu_plugin_test: the GPU-launcher skeleton built against $PREFIX/include and loaded ($kernel)"
