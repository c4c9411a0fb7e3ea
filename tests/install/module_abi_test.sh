#!/usr/bin/env bash
# Each installed module is built as an out-of-tree plugin is: its dynamic
# symbols are its plugin entry points alone, libengram.so.0 is its
# DT_NEEDED, it defines none of the library's functions (so none of hal's
# code is inside: its log, group and config calls are the library's), and
# every engram_* function it calls is one libengram.so.0 exports.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
lib=$PREFIX/lib/libengram.so.0
lib_exports=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
# Every function the library defines, hidden ones included, but the
# header-only utilities of the installed headers (static inline), which the
# built-in loopback and a module each compile a copy of.
inline_utils=$(cat "$PREFIX"/include/engram/*.h "$PREFIX"/include/engram/plugin/*.h | tr '\n' ' ' |
    grep -oE '(static inline|ENGRAM_HOST_DEVICE) [^;{(]*[^A-Za-z0-9_](engram_[A-Za-z0-9_]+)[[:space:]]*\(' |
    sed -E 's/.*[^A-Za-z0-9_](engram_[A-Za-z0-9_]+)[[:space:]]*\($/\1/' | sort -u)
lib_functions=$(nm "$lib" | awk '$2 ~ /^[Tt]$/ {print $3}' | sed 's/\..*//' | grep -E '^(engram_|fork_|callbacks_|config_)' |
    sort -u | comm -23 - <(echo "$inline_utils"))
entry='^engram_transport_plugin_v[0-9]+$'
checked=0
for m in "$PREFIX"/lib/engram/libengram_transport_*.so; do
    [[ -e $m ]] || continue
    name=$(basename "$m")
    exported=$(nm -D --defined-only "$m" | awk '{print $3}' | sed 's/@.*//' | sort -u)
    bad=$(grep -Ev "$entry" <<<"$exported" || true)
    [[ -n $exported && -z $bad ]] || fail "$name exports more than its plugin entry points: $(echo $bad)"
    readelf -d "$m" | grep -q '(NEEDED).*\[libengram\.so\.0\]' ||
        fail "$name does not have libengram.so.0 in DT_NEEDED: $(readelf -d "$m" | grep NEEDED)"
    own=$(nm "$m" | awk '$2 ~ /^[Tt]$/ {print $3}' | sed 's/\..*//' | sort -u)
    copies=$(comm -12 <(echo "$own") <(echo "$lib_functions"))
    [[ -z $copies ]] || fail "$name carries copies of the library's functions: $(echo $copies)"
    imported=$(nm -D --undefined-only "$m" | awk '{print $2}' | grep '^engram_' | sed 's/@.*//' | sort -u)
    unknown=$(comm -23 <(echo "$imported") <(echo "$lib_exports"))
    [[ -z $unknown ]] || fail "$name calls engram functions libengram.so.0 does not export: $unknown"
    echo "module_abi_test: $name exports $(echo $exported), needs libengram.so.0, no library code inside"
    checked=$((checked + 1))
done
((checked > 0)) || fail "no module installed in $PREFIX/lib/engram (none built here?)"
