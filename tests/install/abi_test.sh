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
# ENGRAM_<major>.<minor>, every ENGRAM_PLUGIN_API one (the plugin services
# of engram/plugin/) versioned ENGRAM_PLUGIN_<major>.<minor>, and nothing else.
declared() { # the functions the installed headers declare with marker $1
    cat "$PREFIX"/include/engram/*.h "$PREFIX"/include/engram/plugin/*.h | grep -v "^#" | tr '\n' ' ' |
        grep -oE "$1 [^;{(]*\(" | sed -E 's/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\($/\1/' | sort -u
}
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDRBVW]$/ {print $3}' | sort -u)
major=$(awk '$2 == "ENGRAM_VERSION_MAJOR" {print $3}' "$PREFIX/include/engram/engram.h")
minor=$(awk '$2 == "ENGRAM_VERSION_MINOR" {print $3}' "$PREFIX/include/engram/engram.h")
summary=
for pair in "ENGRAM_API ENGRAM_$major.$minor" "ENGRAM_PLUGIN_API ENGRAM_PLUGIN_$major.$minor"; do
    read -r marker node <<<"$pair"
    want=$(declared "$marker")
    [[ -n $want ]] || fail "no $marker declarations found in $PREFIX/include"
    # nm prints name@@NODE for versioned symbols.
    names=$(grep "@@$node\$" <<<"$exported" | sed 's/@.*//' | sort -u)
    missing=$(comm -23 <(echo "$want") <(echo "$names"))
    extra=$(comm -13 <(echo "$want") <(echo "$names"))
    [[ -z $missing ]] || fail "declared $marker but not exported in $node: $missing"
    [[ -z $extra ]] || fail "exported in $node but not declared $marker in the installed headers: $extra"
    summary+=" $(wc -l <<<"$names") symbols $node,"
done
# Besides those: the version nodes themselves (nm lists them as symbols).
others=$(grep -v "@@ENGRAM_\(PLUGIN_\)\?$major\.$minor\$" <<<"$exported" |
    grep -vx "ENGRAM_\(PLUGIN_\)\?$major\.$minor" || true)
[[ -z $others ]] || fail "symbols outside the version nodes: $others"
echo "abi_test: SONAME libengram.so.0, DT_NEEDED $(echo $needed),${summary%,}"
