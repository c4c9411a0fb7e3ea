#!/usr/bin/env bash
# Builds the GPU tier (every target tagged gpu, --config=cuda) on this build
# host and packs a self-contained bundle for a GPU host without Bazel:
#   bin/      the test and bench binaries
#   lib/      the shared libraries they load, except glibc's own
#   lib/libengram.so.0*, lib/engram/, include/, lib/pkgconfig/, lib/cmake/
#             the installed layout (tools/scripts/install.sh), so a consumer
#             (the Python extension) builds against the bundle on the GPU host
#   examples/fetch.c  built against that layout by the runner
#   run_gpu_tier.sh   runs them all: bash run_gpu_tier.sh OUT_DIR
#                     (OUT_DIR/gpu_tier.log and OUT_DIR/gpu_tier.json), and an
#                     n-gram trace (tools/ngram_trace.py) through the bench
#   tools/            ngram_trace.py, for the runner
#   gpu_scale.sh      fetch rate against table size: bash gpu_scale.sh . OUT_DIR
# Usage: tools/scripts/gpu_bundle.sh [bundle_dir]   (default .gpubundle, git-ignored)
# ENGRAM_BAZEL_OUTPUT_BASE picks a Bazel output base. nccl_gin is always in
# the bundle, built against NCCL_HOME or, without it, the NCCL that
# build_nccl.sh builds from ENGRAM_NCCL_TARBALL (tools/scripts/nccl_home.sh);
# that libnccl.so.2 goes into lib/, stripped.
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=${1:-.gpubundle}
NCCL_HOME=$(bash tools/scripts/nccl_home.sh) || {
    echo "gpu_bundle: no NCCL to build nccl_gin against (above)" >&2
    exit 1
}
export NCCL_HOME
bazel_cmd=(bazel ${ENGRAM_BAZEL_OUTPUT_BASE:+--output_base=$ENGRAM_BAZEL_OUTPUT_BASE})
mapfile -t targets < <("${bazel_cmd[@]}" query --noshow_progress 'attr(tags, "\bgpu\b", //...)' 2>/dev/null)
if ((${#targets[@]} == 0)); then
    echo "gpu_bundle: no targets tagged gpu (is CUDA installed here?)" >&2
    exit 1
fi
if [[ " ${targets[*]} " != *" //transports/nccl_gin:nccl_gin_solo_test "* ]]; then
    echo "gpu_bundle: nccl_gin is not built against NCCL_HOME=$NCCL_HOME (engram_info says why)" >&2
    exit 1
fi
# Shared objects the GPU tests load at run time (tagged gpu_data) go into
# bin/ next to them, where the tests look by default.
mapfile -t data < <("${bazel_cmd[@]}" query --noshow_progress 'attr(tags, "\bgpu_data\b", //...)' 2>/dev/null)
install_targets=(//:libengram.so.0.1.0 //transports:modules //tools:engram_info //tools:engram_bench)
"${bazel_cmd[@]}" build --config=cuda "${targets[@]}" "${data[@]}" "${install_targets[@]}"
bin=$("${bazel_cmd[@]}" info --config=cuda bazel-bin 2>/dev/null)
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
: >"$bundle/tests.txt"
: >"$bundle/benches.txt"
# Copies a built file (label path) into bin/ and the shared libraries it
# loads into lib/; glibc (libc, libm, libdl, libpthread, librt, the loader)
# comes from the GPU host.
pack() {
    cp "$bin/$1" "$bundle/bin/"
    ldd "$bin/$1" | awk '$3 ~ /^\// {print $3}' |
        grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
}
for t in "${targets[@]}"; do
    path=${t#//}
    path=${path/://}
    pack "$path"
    kind=$("${bazel_cmd[@]}" query --noshow_progress --output=label_kind "$t" 2>/dev/null | cut -d' ' -f1)
    if [[ $kind == cc_test ]]; then echo "${path##*/}" >>"$bundle/tests.txt"; else echo "${path##*/}" >>"$bundle/benches.txt"; fi
done
for t in "${data[@]}"; do
    path=${t#//}
    pack "${path/://}"
done
# The NCCL the binaries were linked and their kernels compiled against
# (nccl_gin needs >= 2.30.4); stripped, since it is most of the bundle.
cp -L "$NCCL_HOME/lib/libnccl.so.2" "$bundle/lib/libnccl.so.2"
chmod u+w "$bundle/lib/libnccl.so.2"
strip --strip-unneeded "$bundle/lib/libnccl.so.2"
bash tools/scripts/install.sh --built "$bin" "$bundle"
mkdir -p "$bundle/examples"
cp examples/fetch.c examples/CMakeLists.txt "$bundle/examples/"
cp tools/scripts/run_gpu_tier.sh "$bundle/run_gpu_tier.sh"
mkdir -p "$bundle/tools"
cp tools/ngram_trace.py "$bundle/tools/" # the runner's trace
cp tools/scripts/gpu_scale.sh "$bundle/gpu_scale.sh"
git rev-parse HEAD >"$bundle/commit.txt" 2>/dev/null || true
echo "gpu_bundle: $(wc -l <"$bundle/tests.txt") tests, $(wc -l <"$bundle/benches.txt") benches," \
    "$(ls "$bundle/lib" | wc -l) libraries, $(du -sh "$bundle" | cut -f1) in $bundle"
# The device machine takes at most 64 MiB of carried (git-ignored) files.
mib=$(du -sm "$bundle" | cut -f1)
if ((mib > 64)); then
    echo "gpu_bundle: $mib MiB is over the 64 MiB a device run can carry" >&2
    exit 1
fi
