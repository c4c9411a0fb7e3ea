#!/bin/bash
# engram_info diagnoses: it lists every plugin found
# (loaded, or the loader's reason), every key with its source (the
# transports' too), and exits 1 with the library's own message when the
# configuration cannot run, a table create included.
# args: engram_info, then the test plugins (all in one directory), then
# a plugin that opens host-proxied (in a directory of its own).
set -u
info="$1"
plugins="$(cd "$(dirname "$2")" && pwd)"
proxied="$(cd "$(dirname "$3")" && pwd)"
fails=0
out="$TEST_TMPDIR/out" err="$TEST_TMPDIR/err"

# expect RC VAR=VALUE... -- TEXT...: runs engram_info with the variables,
# checks its exit status and that stdout+stderr hold each TEXT.
expect() {
    local want_rc="$1"
    shift
    local vars=()
    while [ "$1" != "--" ]; do vars+=("$1"); shift; done
    shift
    env -u ENGRAM_PLUGIN_PATH -u ENGRAM_TRANSPORT "${vars[@]}" "$info" >"$out" 2>"$err"
    local rc=$?
    if [ "$rc" != "$want_rc" ]; then
        echo "FAIL (${vars[*]}): exit $rc, wanted $want_rc"; cat "$out" "$err"; fails=$((fails + 1)); return
    fi
    for text in "$@"; do
        if ! cat "$out" "$err" | grep -qF -- "$text"; then
            echo "FAIL (${vars[*]}): output lacks '$text'"; cat "$out" "$err"; fails=$((fails + 1))
        fi
    done
}

expect 0 ENGRAM_LOG_LEVEL=warn -- "loopback   available: yes" "plugins (" "  none found" \
    "transport    = auto         [default]" "check: transport=auto runs on loopback"
expect 1 ENGRAM_TRANSPORT=nonesuch -- \
    "engram_info: configuration error: transport 'nonesuch' is not a built-in" "check: transport=nonesuch cannot run"
expect 1 ENGRAM_PLUGIN_PATH=. -- \
    "engram_info: configuration error: ENGRAM_PLUGIN_PATH: plugin_path: entry '.' is relative"
expect 1 ENGRAM_PLUGIN_PATH="$plugins" ENGRAM_TRANSPORT=badver -- \
    "badver     not loaded: plugin $plugins/libengram_transport_badver.so exports engram_transport_plugin_v3 with transport ABI version 4" \
    "engram_info: configuration error: plugin $plugins/libengram_transport_badver.so exports engram_transport_plugin_v3 with transport ABI version 4"
# auto passes over the broken plugins, and says why for each.
expect 0 ENGRAM_PLUGIN_PATH="$plugins" ENGRAM_TESTPLUG_QUEUES=2 -- \
    "badkeys    not loaded: plugin $plugins/libengram_transport_badkeys.so: default of badkeys_depth" \
    "nosym      not loaded: plugin $plugins/libengram_transport_nosym.so exports none of engram_transport_plugin_v4" \
    "gpuonly    available: no  (loader test plugin)" "testplug   available: yes" \
    "testplug_queues = 2            [env] accepted: 1..4; testplug:" "check: transport=auto runs on testplug"
expect 1 ENGRAM_NO_SUCH_KEY=1 -- \
    "engram_info: configuration error: ENGRAM_NO_SUCH_KEY: unknown key 'no_such_key'"
expect 1 ENGRAM_TESTPLUG_QUEUES=7 ENGRAM_PLUGIN_PATH="$plugins" -- \
    "configuration error: ENGRAM_TESTPLUG_QUEUES: testplug's testplug_queues: '7' is out of range 1..4"
expect 1 ENGRAM_CONFIG_FILE="$TEST_TMPDIR" -- "configuration error: ENGRAM_CONFIG_FILE=$TEST_TMPDIR is a directory"
printf 'ucx_window = 0\n' >"$TEST_TMPDIR/bad.conf"
if "$info" 2>/dev/null | grep -q "^  ucx        available: yes"; then
    expect 1 ENGRAM_CONFIG_FILE="$TEST_TMPDIR/bad.conf" -- \
        "configuration error: $TEST_TMPDIR/bad.conf:1: ucx's ucx_window: '0' is out of range 1..65536"
fi

# A backend that opens host-proxied (nccl_gin in NCCL's GIN proxy mode) is
# listed with what it selected and the cap; auto passes it over.
expect 0 ENGRAM_PLUGIN_PATH="$proxied" ENGRAM_LOG_LEVEL=info -- "proxied    available: yes" \
    "caps: host-initiated host-proxied (transport=auto passes it over)" "selected: test proxy thread" \
    "transport=auto passes over proxied: every get goes through a host proxy thread here (test proxy thread)" \
    "check: transport=auto runs on loopback"
# named, it runs (the context opens on it; this one registers no table)
expect 1 ENGRAM_PLUGIN_PATH="$proxied" ENGRAM_TRANSPORT=proxied -- \
    "check: transport=proxied cannot create a table on proxied"

# What a table create needs is checked too (a small host table, created and
# destroyed): a configuration whose every table create fails does not run.
expect 0 -- "check: transport=auto runs on loopback (a table created and destroyed)"
expect 1 ENGRAM_NUMA_NODE=1023 -- "check: transport=auto cannot create a table on loopback" \
    "engram_info: configuration error: a table (64 rows of 256 bytes, recv=HOST) cannot be created: host segment: NUMA node 1023 is not a node with memory"
huge_free=$(awk '$1 == "HugePages_Free:" {print $2}' /proc/meminfo)
if [ "${huge_free:-0}" = 0 ]; then
    expect 1 ENGRAM_HUGE_PAGES=on -- "check: transport=auto cannot create a table on loopback" \
        "engram_info: configuration error: a table (64 rows of 256 bytes, recv=HOST) cannot be created: host segment alloc: huge_pages=on but"
elif [ "$huge_free" -ge 8 ]; then # the table's few segments of one 2 MiB page each
    expect 0 ENGRAM_HUGE_PAGES=on -- "check: transport=auto runs on loopback (a table created and destroyed)"
fi

# recv=CUDA: the path rule, or why there is none (this build has no GPU path).
expect 0 ENGRAM_GPU_PATH=host_gather -- "gpu (recv=CUDA tables, gpu_path=host_gather):" \
    "  none: recv=CUDA needs the GPU fetch path: build with --config=cuda"
# Flags: --table-gib N (1..65536); anything else is a usage error (exit 2).
for args in "--bogus" "--table-gib 0" "--table-gib" "--table-gib 65537" "--table-gib 1x"; do
    # shellcheck disable=SC2086 # split on purpose: each case is several words
    "$info" $args >"$out" 2>"$err"
    rc=$?
    if [ "$rc" != 2 ] || ! grep -qE "usage: |--table-gib needs an integer" "$err"; then
        echo "FAIL ($args): exit $rc, wanted 2 with a usage message"; cat "$out" "$err"; fails=$((fails + 1))
    fi
done
"$info" --table-gib 16 >"$out" 2>"$err" || { echo "FAIL (--table-gib 16): exit $?"; fails=$((fails + 1)); }
for args in "--help" "-h"; do
    "$info" $args >"$out" 2>"$err"
    rc=$?
    if [ "$rc" != 0 ] || ! grep -q "^usage: " "$out" || [ -s "$err" ]; then
        echo "FAIL ($args): exit $rc, wanted 0 with the usage on stdout"; cat "$out" "$err"; fails=$((fails + 1))
    fi
done

if [ "$fails" != 0 ]; then echo "$fails failed"; exit 1; fi
echo "engram_info_test: all passed"
