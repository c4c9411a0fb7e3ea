#!/usr/bin/env bash
# build_nccl.sh SRC_TARBALL PREFIX
#
# Builds NCCL from a source tarball (a `git archive` of an NCCL release) for
# the GPUs engram targets (sm_90) with the collectives engram uses only, and
# installs its headers and libnccl.so.2 into PREFIX (PREFIX/include,
# PREFIX/lib). The build is cached under
#   ${ENGRAM_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/engram}/nccl-<key>
# where <key> is the tarball's sha256 prefix plus a hash of the build
# options, so a second run only copies the files. A build is a long
# compilation; it runs under nice, with ENGRAM_NCCL_JOBS jobs (default:
# all cores).
#
# NCCL_HOME=PREFIX then builds the nccl_gin transport against it.
set -euo pipefail

die() { echo "build_nccl: $*" >&2; exit 1; }

(($# == 2)) || die "usage: build_nccl.sh SRC_TARBALL PREFIX"
tarball=$1
prefix=$2
[[ -f $tarball && -r $tarball ]] || die "source tarball '$tarball' not found or not readable"
cuda_home=${CUDA_HOME:-/usr/local/cuda}
[[ -x $cuda_home/bin/nvcc ]] || die "nvcc not found at $cuda_home/bin/nvcc (set CUDA_HOME)"
for tool in sha256sum tar make flock; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed"
done

# What the build is for. NCCL's generator takes ONLY_FUNCS as
# "Coll [RedOp [Type [Algo [Proto]]]]|..."; engram needs GIN (built
# regardless), AllReduce of f32 sums (group agreement), AllGather,
# Broadcast and SendRecv.
gencode="-gencode=arch=compute_90,code=sm_90"
only_funcs="AllReduce Sum f32 * *|SendRecv|AllGather * *|Broadcast * *"

tar_sha=$(sha256sum "$tarball" | cut -d' ' -f1)
opt_sha=$(printf '%s\n%s\n' "$gencode" "$only_funcs" | sha256sum | cut -c1-8)
cache_root=${ENGRAM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}
cache=$cache_root/nccl-${tar_sha:0:16}-$opt_sha
mkdir -p "$cache_root" || die "cannot create cache directory $cache_root"

# One build per key at a time: a second caller waits, then finds it done.
exec 9>"$cache.lock"
flock 9

if [[ ! -f $cache/complete ]]; then
    work=$(mktemp -d "$cache.build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    log=$work/build.log
    tar -xzf "$tarball" -C "$work" || die "cannot unpack $tarball"
    src=$(find "$work" -mindepth 2 -maxdepth 2 -name Makefile -path '*/Makefile' -printf '%h\n' | head -1)
    [[ -n $src && -f $src/src/nccl.h.in ]] || die "$tarball is not an NCCL source tree (no src/nccl.h.in)"
    version=$(sed -n 's/^NCCL_\(MAJOR\|MINOR\|PATCH\) *:= *\([0-9]*\)/\2/p' "$src/makefiles/version.mk" | paste -sd.)

    # CUDA's own include directory may carry another NCCL's headers
    # (include/nccl*.h, include/nccl_device/), which would shadow the tree's:
    # build against a CUDA_HOME made of links to CUDA's, without those.
    cuda=$work/cuda
    mkdir -p "$cuda/include"
    for e in "$cuda_home"/*; do
        [[ $(basename "$e") == include ]] || ln -s "$(readlink -f "$e")" "$cuda/$(basename "$e")"
    done
    for e in "$cuda_home"/include/*; do
        [[ $(basename "$e") == nccl* ]] || ln -s "$(readlink -f "$e")" "$cuda/include/$(basename "$e")"
    done

    echo "build_nccl: building NCCL $version (sm_90, reduced collective set) from $tarball;" \
         "log in $log (about 27 CPU-minutes)" >&2
    start=$SECONDS
    if ! nice -n 10 make -C "$src" -j"${ENGRAM_NCCL_JOBS:-$(nproc)}" src.lib \
            CUDA_HOME="$cuda" NVCC_GENCODE="$gencode" ONLY_FUNCS="$only_funcs" \
            BUILDDIR="$work/out" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        keep=$cache.failed.log
        cp "$log" "$keep"
        die "NCCL build failed (full log: $keep)"
    fi
    lib=$(find "$work/out/lib" -maxdepth 1 -name 'libnccl.so.*.*' -type f | head -1)
    [[ -n $lib && -f $work/out/include/nccl.h ]] || die "NCCL build left no libnccl.so or nccl.h in $work/out"
    echo "build_nccl: built in $((SECONDS - start)) s" >&2

    # The cached install: headers, and the library stripped of its local
    # symbols (NCCL's device code, the bulk of it, is untouched).
    rm -rf "$cache.new"
    mkdir -p "$cache.new/lib"
    cp -r "$work/out/include" "$cache.new/include"
    strip --strip-unneeded -o "$cache.new/lib/$(basename "$lib")" "$lib"
    ln -s "$(basename "$lib")" "$cache.new/lib/libnccl.so.2"
    ln -s libnccl.so.2 "$cache.new/lib/libnccl.so"
    echo "$version $tar_sha" >"$cache.new/complete"
    rm -rf "$cache" "$cache.failed.log"
    mv "$cache.new" "$cache"
fi

mkdir -p "$prefix/lib" "$prefix/include" || die "cannot create $prefix"
cp -ru "$cache/include/." "$prefix/include/" # only what the cache has newer
# Each library file replaced by a rename, and only where it differs: a
# program running against the prefix keeps the file it mapped (copying over
# it in place would change the pages under that program).
for f in "$cache"/lib/libnccl.so*; do
    dst=$prefix/lib/$(basename "$f")
    if [[ -L $f ]]; then
        [[ -L $dst && $(readlink "$dst") == $(readlink "$f") ]] && continue
    elif [[ -f $dst && ! -L $dst ]] && cmp -s "$f" "$dst"; then
        continue
    fi
    cp -P "$f" "$dst.tmp.$$" && mv -fT "$dst.tmp.$$" "$dst" || die "cannot install $dst"
done
echo "build_nccl: NCCL $(cut -d' ' -f1 "$cache/complete") installed in $prefix" >&2
