#!/usr/bin/env bash
# The conformance test the in-tree transports pass (tests/engram_fetch_test.c:
# bf16 and fp8 + scales, direct and hybrid, 4 ranks on one node and 2 x 2,
# dedup off and on, bit for bit against the host reference), run on an
# out-of-tree plugin: shmplug.c, built against the installed headers alone
# and linked against the installed library, loaded through plugin_path. The
# test program is the tree's, built against the installed library as any
# consumer is.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
work=$TEST_TMPDIR/conformance
mkdir -p "$work/plugins" "$work/src/tests"
cp "$ROOT/tests/install/shmplug.c" "$work/shmplug.c"
if grep -n '#include "' "$work/shmplug.c"; then fail "shmplug includes headers of the source tree"; fi
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -shared -I"$PREFIX/include" "$work/shmplug.c" \
    -L"$PREFIX/lib" -lengram -Wl,--no-undefined -o "$work/plugins/libengram_transport_shmplug.so" ||
    fail "building shmplug against $PREFIX/include"
nm -D --undefined-only "$work/plugins/libengram_transport_shmplug.so" | grep -q 'engram_group_agree_step@ENGRAM_PLUGIN_0.1' ||
    fail "shmplug does not call the agreement service"
for f in check.h engram_harness.h engram_harness.c table_gen.h table_gen.c engram_fetch_test.c; do
    cp "$ROOT/tests/$f" "$work/src/tests/"
done
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$work/src" $(pkg-config --cflags engram) \
    "$work/src/tests/engram_fetch_test.c" "$work/src/tests/engram_harness.c" "$work/src/tests/table_gen.c" \
    $(pkg-config --libs engram) -lm -o "$work/engram_fetch_test" || fail "building engram_fetch_test against $PREFIX"
LD_LIBRARY_PATH=$PREFIX/lib ENGRAM_PLUGIN_PATH=$work/plugins ENGRAM_LOG_LEVEL=info ENGRAM_TIMEOUT_MS=60000 \
    "$work/engram_fetch_test" shmplug >"$work/fetch.log" 2>&1 || { tail -40 "$work/fetch.log"; fail "engram_fetch_test shmplug"; }
grep -q "transport plugin 'shmplug' loaded from $work/plugins" "$work/fetch.log" ||
    fail "shmplug was not the transport loaded: $(tail -20 "$work/fetch.log")"
grep -q 'engram_fetch_test(shmplug): ok' "$work/fetch.log" || fail "$(tail -20 "$work/fetch.log")"
echo "plugin_conformance_test: engram_fetch_test passed on the out-of-tree plugin shmplug"
