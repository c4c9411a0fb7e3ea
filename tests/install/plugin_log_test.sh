#!/usr/bin/env bash
# Plugins and modules log through the core: a transport whose open fails
# inside an out-of-tree plugin (failplug.c) or an installed module (ucx
# with UCX_TLS=cma, which cannot reach even its own rank) leaves its error
# in the host's engram_last_error() and its log lines in the host's
# handler (plugin_log_host.c). By construction: no module carries log code
# of its own; each exports only its plugin record, and every engram_*
# function it calls is one libengram.so.0 exports.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
work=$TEST_TMPDIR/plugin_log
mkdir -p "$work/plugins"
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -shared -I"$PREFIX/include" \
    "$ROOT/tests/install/failplug.c" -o "$work/plugins/libengram_transport_failplug.so" ||
    fail "building failplug against $PREFIX/include"
cc -std=c11 -Wall -Wextra -Werror "$ROOT/tests/install/plugin_log_host.c" $(pkg-config --cflags --libs engram) \
    -o "$work/host" || fail "building plugin_log_host"
host() { LD_LIBRARY_PATH=$PREFIX/lib ENGRAM_LOG_LEVEL=warn "$work/host" "$@"; }
ENGRAM_PLUGIN_PATH=$work/plugins host failplug failplug.c "open refused on purpose" "refusing to open" ||
    fail "failplug's error did not reach the host"

lib_exports=$(nm -D --defined-only "$PREFIX/lib/libengram.so.0" | awk '{print $3}' | sed 's/@.*//' | sort -u)
log_functions='^engram_(log_[a-z_]+|error_at|last_error|status_str)$'
for m in "$PREFIX"/lib/engram/libengram_transport_*.so; do
    [[ -e $m ]] || continue
    exported=$(nm -D --defined-only "$m" | awk '{print $3}' | sed 's/@.*//' | sort -u)
    [[ $exported == engram_transport_plugin_v1 ]] ||
        fail "$(basename "$m") exports more than its plugin record: $(echo $exported)"
    if nm "$m" | awk '$2 ~ /^[TtDdBb]$/ {print $3}' | grep -E "$log_functions|^(last_error|handler_fn)$"; then
        fail "$(basename "$m") carries its own log code (above): its errors would not be the host's"
    fi
    imported=$(nm -D --undefined-only "$m" | awk '{print $2}' | grep '^engram_' | sed 's/@.*//' | sort -u)
    unknown=$(comm -23 <(echo "$imported") <(echo "$lib_exports"))
    [[ -z $unknown ]] || fail "$(basename "$m") calls engram functions libengram.so.0 does not export: $unknown"
done
if [[ -e $PREFIX/lib/engram/libengram_transport_ucx.so ]]; then
    UCX_TLS=cma host ucx ucx_context.c "no endpoint to rank 0" || fail "the ucx module's error did not reach the host"
else
    echo "plugin_log_test: no ucx module installed; its case skipped"
fi
echo "plugin_log_test: plugin and module errors and log lines reached the host"
