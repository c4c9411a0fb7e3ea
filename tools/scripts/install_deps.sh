#!/usr/bin/env bash
# Installs, with apt, whatever of the build and test dependencies is missing
# (Debian 12, as root). Quiet when everything is there already.
set -euo pipefail
pkgs=(bazel-bootstrap bazel-rules-java default-jdk-headless gcc g++ libc6-dev
      libucx-dev ucx-utils libibverbs-dev rdma-core cmake pkg-config
      libopenmpi-dev openmpi-bin valgrind clang libclang-rt-14-dev
      gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu libc6-dev-arm64-cross
      python3-dev python3-venv python3-setuptools python3-numpy python3-pytest python3-torch
      python3-mpi4py libdlpack-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "install_deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2
    apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
