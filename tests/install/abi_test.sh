#!/usr/bin/env bash
# The installed libengram.so.0 as a dynamic linker and a consumer see it.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
lib=$PREFIX/lib/libengram.so.0
[[ -L $lib && -f $lib ]] || fail "$lib is not a symlink to the library"
dyn=$(readelf -d "$lib")
grep -q '(SONAME).*\[libengram\.so\.0\]' <<<"$dyn" || fail "SONAME is not libengram.so.0: $dyn"
# glibc's own libraries only: nothing a host without UCX, rdma-core, libnuma,
# CUDA or a C++ runtime lacks.
glibc='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64)\.so\.[0-9]+$'
needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dyn")
for n in $needed; do
    [[ $n =~ $glibc ]] || fail "DT_NEEDED $n is not one of glibc's libraries"
done
if grep -Eq '\((RUNPATH|RPATH)\)' <<<"$dyn"; then
    fail "the library carries a run path: $(grep -E 'RUNPATH|RPATH' <<<"$dyn")"
fi
# Exports: every ENGRAM_API declaration of the installed headers, versioned
# ENGRAM_<major>.<minor>, and nothing else.
declared=$(cat "$PREFIX"/include/engram/*.h "$PREFIX"/include/engram/plugin/*.h | grep -v "^#" | tr '\n' ' ' |
    grep -oE 'ENGRAM_API [^;{(]*\(' | sed -E 's/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\($/\1/' | sort -u)
[[ -n $declared ]] || fail "no ENGRAM_API declarations found in $PREFIX/include"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDRBVW]$/ {print $3}' | sort -u)
major=$(awk '$2 == "ENGRAM_VERSION_MAJOR" {print $3}' "$PREFIX/include/engram/engram.h")
minor=$(awk '$2 == "ENGRAM_VERSION_MINOR" {print $3}' "$PREFIX/include/engram/engram.h")
node=ENGRAM_$major.$minor
# nm prints name@@NODE for versioned symbols and the node itself as a symbol.
unversioned=$(grep -v "@@$node\$" <<<"$exported" | grep -vx "$node" || true)
[[ -z $unversioned ]] || fail "symbols outside the $node version node: $unversioned"
names=$(grep -vx "$node" <<<"$exported" | sed 's/@.*//' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$names"))
extra=$(comm -13 <(echo "$declared") <(echo "$names"))
[[ -z $missing ]] || fail "declared ENGRAM_API but not exported: $missing"
[[ -z $extra ]] || fail "exported but not declared ENGRAM_API in the installed headers: $extra"
echo "abi_test: SONAME libengram.so.0, DT_NEEDED $(echo $needed), $(wc -l <<<"$names") symbols $node"
