#!/usr/bin/env bash
# Prints the NCCL to build nccl_gin against (an NCCL_HOME): $NCCL_HOME when
# set, else the NCCL that build_nccl.sh builds (once; then cached by
# checksum) from the source tarball ENGRAM_NCCL_TARBALL, by default
# ../shared/deps/nccl-2.30.7-1.tar.gz beside the repository. Exits 1,
# saying why on stderr, when there is neither or the build fails.
# Usage: NCCL_HOME=$(bash tools/scripts/nccl_home.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ -n ${NCCL_HOME:-} ]]; then
    echo "$NCCL_HOME"
    exit 0
fi
tarball=$(realpath -m "${ENGRAM_NCCL_TARBALL:-../shared/deps/nccl-2.30.7-1.tar.gz}")
if [[ ! -f $tarball ]]; then
    echo "nccl_home: NCCL source tarball $tarball not found: set ENGRAM_NCCL_TARBALL to one, or NCCL_HOME to" \
         "an NCCL >= 2.30.4" >&2
    exit 1
fi
cache=${ENGRAM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}
prefix=$cache/nccl-prefix-$(sha256sum "$tarball" | cut -c1-16)
bash tools/scripts/build_nccl.sh "$tarball" "$prefix" >&2 || {
    echo "nccl_home: build_nccl.sh $tarball failed (above)" >&2
    exit 1
}
echo "$prefix"
