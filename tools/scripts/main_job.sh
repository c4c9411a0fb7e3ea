#!/usr/bin/env bash
# The main job: engram_bench with DeepEP test_engram's defaults on the
# embedded default (loopback transport, forked local ranks). Extra
# arguments go to engram_bench.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/install_deps.sh
bazel build //tools:engram_bench //tools:engram_info >&2
./bazel-bin/tools/engram_bench "$@"
