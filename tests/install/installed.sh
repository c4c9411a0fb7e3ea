# Sourced by the install tests: installs the built artifacts (this test's
# runfiles) into $TEST_TMPDIR/prefix and sets ROOT, PREFIX and fail().
set -euo pipefail
ROOT=${TEST_SRCDIR:?run under bazel test}/engram
PREFIX=$TEST_TMPDIR/prefix
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
bash "$ROOT/tools/scripts/install.sh" --built "$ROOT" "$PREFIX" || fail "install.sh --built $ROOT $PREFIX"
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
