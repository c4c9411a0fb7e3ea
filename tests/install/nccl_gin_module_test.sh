#!/usr/bin/env bash
# nccl_gin as this build made it (CPU tier; it exists where NCCL >= 2.30.4
# was found, e.g. NCCL_HOME from tools/scripts/build_nccl.sh): the module is
# installed and loads; it and the GPU-tier binaries (built, not run here)
# that link nccl_gin in load the libnccl.so.2 of the NCCL they were
# compiled against, not an older one on the system; engram_info lists nccl_gin with that library
# accepted (on a host without a GPU: "no CUDA GPU visible"; with one:
# available, NCCL's version and GIN type), and transport=nccl_gin names
# the same reason where it cannot run.
# args: NCCL version (@sys_nccl's), then the GPU-tier binaries.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
version=$1
shift
module=$PREFIX/lib/engram/libengram_transport_nccl_gin.so
[[ -f $module ]] || fail "no nccl_gin module installed ($module)"
# the library a binary loads for libnccl.so.2: its path, "not found" fails
nccl_of() {
    local lib
    lib=$(ldd "$1" | awk '$1 == "libnccl.so.2" {print $3}')
    [[ -n $lib && $lib != not ]] || fail "$(basename "$1") does not find libnccl.so.2: $(ldd "$1")"
    readlink -f "$lib"
}
want=$(nccl_of "$module")
[[ $(basename "$want") == "libnccl.so.$version" ]] ||
    fail "the module loads $want, not NCCL $version's libnccl.so.$version"
for bin in "$@"; do
    [[ -x $ROOT/$bin ]] || fail "$bin was not built"
    # those that link nccl_gin in (the others load the module)
    readelf -d "$ROOT/$bin" | grep -qF '[libnccl.so.2]' || continue
    got=$(nccl_of "$ROOT/$bin")
    [[ $got == "$want" ]] || fail "$bin loads $got, the module $want"
done
out=$("$PREFIX/bin/engram_info" 2>&1) || fail "engram_info exited $?: $out"
line=$(grep -E '^  nccl_gin +available: ' <<<"$out") || fail "engram_info does not list nccl_gin: $out"
case $line in
*"available: no  (no CUDA GPU visible ("*"); NCCL $version loaded, the kernels' version)") gpu=no ;;
*"available: yes"*)
    gpu=yes
    grep -qE "^      selected: NCCL $version, GIN " <<<"$out" || fail "no NCCL version and GIN type: $out"
    ;;
*) fail "nccl_gin is not available for a reason other than the GPU: $line" ;;
esac
if [[ $gpu == no ]]; then
    if out=$(ENGRAM_TRANSPORT=nccl_gin "$PREFIX/bin/engram_info" 2>&1); then
        fail "transport=nccl_gin ran without a GPU: $out"
    fi
    grep -qF "transport 'nccl_gin' cannot run here: no CUDA GPU visible" <<<"$out" ||
        fail "transport=nccl_gin refused without the reason: $out"
fi
echo "nccl_gin_module_test: module and GPU-tier binaries ($*) built against NCCL $version ($want);" \
    "engram_info: $line"
