#!/usr/bin/env bash
# An out-of-tree transport plugin: the worked example of
# docs/ADDING_A_TRANSPORT.md (tests/install/testplug.c, which includes only
# <engram/...> headers) compiled with only the installed headers on the
# include path and linked against the installed library, then a one-rank
# fetch through it; the same plugin as one of transport ABI version 2
# exported it (hal/testdata/testplug_v3.c: version 3's frozen structs under
# version 2's symbol, not linked against the library) loads, converted, and
# fetches too.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
work=$TEST_TMPDIR/plugin
mkdir -p "$work/plugins" "$work/plugins_v2"
cp "$ROOT/tests/install/testplug.c" "$work/testplug.c"
if grep -n '#include "' "$work/testplug.c"; then fail "the plugin includes headers of the source tree"; fi
# Current ABI: against the installed headers, linked against libengram.so.0.
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -shared -I"$PREFIX/include" "$work/testplug.c" \
    -L"$PREFIX/lib" -lengram -Wl,--no-undefined -o "$work/plugins/libengram_transport_testplug.so" ||
    fail "building the plugin against $PREFIX/include"
readelf -d "$work/plugins/libengram_transport_testplug.so" | grep -q '(NEEDED).*\[libengram\.so\.0\]' ||
    fail "the plugin does not need libengram.so.0"
nm -D --undefined-only "$work/plugins/libengram_transport_testplug.so" | grep -q 'engram_group_agree_step@ENGRAM_PLUGIN_0.1' ||
    fail "the plugin does not call the agreement service"
nm -D --defined-only "$work/plugins/libengram_transport_testplug.so" | grep -q ' engram_transport_plugin_v4$' ||
    fail "the plugin does not export engram_transport_plugin_v4"
# Version 2: not linked against the library, as such plugins were built.
cc -std=c11 -D_GNU_SOURCE -DTESTPLUG_V2 -Wall -Wextra -Werror -fPIC -shared -I"$ROOT" -I"$PREFIX/include" \
    "$ROOT/hal/testdata/testplug_v3.c" -o "$work/plugins_v2/libengram_transport_testplug.so" ||
    fail "building the version 2 plugin"
cc -std=c11 "$ROOT/examples/fetch.c" $(pkg-config --cflags --libs engram) -o "$work/fetch"
LD_LIBRARY_PATH=$PREFIX/lib ENGRAM_PLUGIN_PATH=$work/plugins ENGRAM_TRANSPORT=testplug ENGRAM_LOG_LEVEL=info \
    ENGRAM_TESTPLUG_QUEUES=2 "$work/fetch" 1 >"$work/fetch.log" 2>&1 || { cat "$work/fetch.log"; fail "fetch through the plugin"; }
grep -q "transport plugin 'testplug' loaded from $work/plugins" "$work/fetch.log" ||
    fail "the plugin was not the one loaded: $(cat "$work/fetch.log")"
grep -q 'all correct' "$work/fetch.log" || fail "fetch: $(cat "$work/fetch.log")"
LD_LIBRARY_PATH=$PREFIX/lib ENGRAM_PLUGIN_PATH=$work/plugins_v2 ENGRAM_TRANSPORT=testplug ENGRAM_LOG_LEVEL=info \
    "$work/fetch" 1 >"$work/fetch_v2.log" 2>&1 || { cat "$work/fetch_v2.log"; fail "fetch through the version 2 plugin"; }
grep -q "is of transport ABI version 2 (engram_transport_plugin_v1); converted to version 4" "$work/fetch_v2.log" ||
    fail "the version 2 plugin was not read as such: $(cat "$work/fetch_v2.log")"
grep -q 'all correct' "$work/fetch_v2.log" || fail "fetch through the version 2 plugin: $(cat "$work/fetch_v2.log")"
# The plugin's own key reaches it through the core (env > default), and a
# value outside what it declares is the library's error naming the key.
if LD_LIBRARY_PATH=$PREFIX/lib ENGRAM_PLUGIN_PATH=$work/plugins ENGRAM_TRANSPORT=testplug \
    ENGRAM_TESTPLUG_QUEUES=9 "$work/fetch" 1 >"$work/badkey.log" 2>&1; then
    fail "ENGRAM_TESTPLUG_QUEUES=9 (declared 1..4) was accepted"
fi
grep -q "testplug_queues" "$work/badkey.log" || fail "bad key value: $(cat "$work/badkey.log")"
echo "plugin_test: out-of-tree plugins (ABI versions 4 and 2) built against $PREFIX/include fetched correctly"
