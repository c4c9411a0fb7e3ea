#!/usr/bin/env bash
# Installs engram into a prefix:
#   lib/libengram.so.0.<minor>.<patch>, libengram.so.0, libengram.so
#   lib/engram/libengram_transport_<name>.so   (ucx, mlx5dv, nccl_gin: those built here)
#   include/engram/*.h, include/engram/plugin/*.h   (the transport plugin API)
#   lib/pkgconfig/engram.pc, lib/cmake/engram/engramConfig{,Version}.cmake
#   bin/engram_info, bin/engram_bench
# Usage: bash tools/scripts/install.sh PREFIX
#   builds with Bazel first (extra Bazel flags in ENGRAM_BAZEL_FLAGS, e.g.
#   --config=cuda). With --built DIR the files are taken from DIR instead
#   (a Bazel runfiles tree or bazel-bin beside the sources: what the
#   install tests use, since Bazel cannot run inside a Bazel test).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
built=
if [[ ${1:-} == --built ]]; then
    built=$2
    shift 2
fi
if (($# != 1)); then
    echo "usage: install.sh [--built DIR] PREFIX" >&2
    exit 2
fi
prefix=$1
header=$src/include/engram/engram.h
version_part() { awk -v m="ENGRAM_VERSION_$1" '$1 == "#define" && $2 == m {print $3}' "$header"; }
major=$(version_part MAJOR) minor=$(version_part MINOR) patch=$(version_part PATCH)
version=$major.$minor.$patch
if [[ -z $built ]]; then
    cd "$src"
    # shellcheck disable=SC2086
    bazel build ${ENGRAM_BAZEL_FLAGS:-} //:libengram.so.$version //transports:modules \
        //tools:engram_info //tools:engram_bench >&2
    built=$(bazel info ${ENGRAM_BAZEL_FLAGS:-} bazel-bin 2>/dev/null)
fi
lib=$built/libengram.so.$version
if [[ ! -f $lib ]]; then
    echo "install.sh: $lib not found (include/engram/engram.h says version $version)" >&2
    exit 1
fi
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
install -d "$prefix/lib/engram" "$prefix/include/engram/plugin" "$prefix/lib/pkgconfig" \
    "$prefix/lib/cmake/engram" "$prefix/bin"
install -m 755 "$lib" "$prefix/lib/"
ln -sf "libengram.so.$version" "$prefix/lib/libengram.so.$major"
ln -sf "libengram.so.$major" "$prefix/lib/libengram.so"
for m in "$built"/transports/libengram_transport_*.so; do
    [[ -e $m ]] && install -m 755 "$m" "$prefix/lib/engram/"
done
install -m 755 "$built/tools/engram_info" "$built/tools/engram_bench" "$prefix/bin/"
install -m 644 "$src"/include/engram/*.h "$prefix/include/engram/"
install -m 644 "$src"/include/engram/plugin/*.h "$prefix/include/engram/plugin/"
# Relocatable (pkg-config's pcfiledir): a prefix copied elsewhere, as the
# GPU bundle is, still points at itself.
cat >"$prefix/lib/pkgconfig/engram.pc" <<PC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include
moduledir=\${libdir}/engram

Name: engram
Description: One-sided remote row lookups over a table sharded across ranks
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lengram
PC
cat >"$prefix/lib/cmake/engram/engramConfig.cmake" <<'CMAKE'
# engram::engram, the installed libengram (prefix found from this file).
get_filename_component(_engram_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET engram::engram)
  add_library(engram::engram SHARED IMPORTED)
  set_target_properties(engram::engram PROPERTIES
    IMPORTED_LOCATION "${_engram_prefix}/lib/libengram.so.@MAJOR@"
    IMPORTED_SONAME "libengram.so.@MAJOR@"
    INTERFACE_INCLUDE_DIRECTORIES "${_engram_prefix}/include")
endif()
set(engram_INCLUDE_DIRS "${_engram_prefix}/include")
set(engram_LIBRARIES engram::engram)
set(engram_MODULE_DIR "${_engram_prefix}/lib/engram")
unset(_engram_prefix)
CMAKE
sed -i "s/@MAJOR@/$major/g" "$prefix/lib/cmake/engram/engramConfig.cmake"
cat >"$prefix/lib/cmake/engram/engramConfigVersion.cmake" <<CMAKE
# Compatible with a request of the same major version, not newer than this.
# (Before 1.0 the minor version is part of the ABI: libengram.so.0 keeps
# ENGRAM_0.<minor> symbols, so an older 0.x request is satisfied.)
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION_MAJOR STREQUAL "$major" AND NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
CMAKE
echo "install.sh: engram $version into $prefix" >&2
