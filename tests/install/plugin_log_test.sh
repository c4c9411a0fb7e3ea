#!/usr/bin/env bash
# Plugins and modules log through the core: a transport whose open fails
# inside an out-of-tree plugin (failplug.c) or an installed module (ucx
# with UCX_TLS=cma, which cannot reach even its own rank) leaves its error
# in the host's engram_last_error() and its log lines in the host's
# handler (plugin_log_host.c). By construction: no module carries log code
# of its own (module_abi_test).
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
work=$TEST_TMPDIR/plugin_log
mkdir -p "$work/plugins"
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -shared -I"$PREFIX/include" \
    "$ROOT/tests/install/failplug.c" $(pkg-config --libs engram) -o "$work/plugins/libengram_transport_failplug.so" ||
    fail "building failplug against $PREFIX/include"
cc -std=c11 -Wall -Wextra -Werror "$ROOT/tests/install/plugin_log_host.c" $(pkg-config --cflags --libs engram) \
    -o "$work/host" || fail "building plugin_log_host"
host() { LD_LIBRARY_PATH=$PREFIX/lib ENGRAM_LOG_LEVEL=warn "$work/host" "$@"; }
ENGRAM_PLUGIN_PATH=$work/plugins host failplug failplug.c "open refused on purpose" "refusing to open" ||
    fail "failplug's error did not reach the host"

if [[ -e $PREFIX/lib/engram/libengram_transport_ucx.so ]]; then
    UCX_TLS=cma host ucx ucx_context.c "no endpoint to rank 0" || fail "the ucx module's error did not reach the host"
else
    echo "plugin_log_test: no ucx module installed; its case skipped"
fi
echo "plugin_log_test: plugin and module errors and log lines reached the host"
