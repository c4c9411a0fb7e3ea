#!/usr/bin/env bash
# An out-of-tree transport plugin: the worked example of
# docs/ADDING_A_TRANSPORT.md (hal/testdata/test_transport_plugin.c, its
# includes renamed to the installed ones) compiled with only the installed
# headers on the include path, then a one-rank fetch through it.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
work=$TEST_TMPDIR/plugin
mkdir -p "$work/plugins"
sed -e 's|#include "hal/log.h"|#include <engram/log.h>|' \
    -e 's|#include "hal/registry.h"|#include <engram/plugin/registry.h>|' \
    "$ROOT/hal/testdata/test_transport_plugin.c" >"$work/testplug.c"
if grep -n '"hal/' "$work/testplug.c"; then fail "the plugin still includes hal/ headers"; fi
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -shared -I"$PREFIX/include" "$work/testplug.c" \
    -o "$work/plugins/libengram_transport_testplug.so" || fail "building the plugin against $PREFIX/include"
cc -std=c11 "$ROOT/examples/fetch.c" $(pkg-config --cflags --libs engram) -o "$work/fetch"
LD_LIBRARY_PATH=$PREFIX/lib ENGRAM_PLUGIN_PATH=$work/plugins ENGRAM_TRANSPORT=testplug ENGRAM_LOG_LEVEL=info \
    ENGRAM_TESTPLUG_QUEUES=2 "$work/fetch" 1 >"$work/fetch.log" 2>&1 || { cat "$work/fetch.log"; fail "fetch through the plugin"; }
grep -q "transport plugin 'testplug' loaded from $work/plugins" "$work/fetch.log" ||
    fail "the plugin was not the one loaded: $(cat "$work/fetch.log")"
grep -q 'all correct' "$work/fetch.log" || fail "fetch: $(cat "$work/fetch.log")"
# The plugin's own key reaches it through the core (env > default), and a
# value outside what it declares is the library's error naming the key.
if LD_LIBRARY_PATH=$PREFIX/lib ENGRAM_PLUGIN_PATH=$work/plugins ENGRAM_TRANSPORT=testplug \
    ENGRAM_TESTPLUG_QUEUES=9 "$work/fetch" 1 >"$work/badkey.log" 2>&1; then
    fail "ENGRAM_TESTPLUG_QUEUES=9 (declared 1..4) was accepted"
fi
grep -q "testplug_queues" "$work/badkey.log" || fail "bad key value: $(cat "$work/badkey.log")"
echo "plugin_test: out-of-tree plugin built against $PREFIX/include fetched correctly"
