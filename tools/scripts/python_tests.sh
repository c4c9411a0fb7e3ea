#!/usr/bin/env bash
# The Python package's CPU tier: builds python/ into a throwaway venv
# (Debian's /usr/bin/python3 with its apt packages: torch, numpy, pytest)
# against an installed libengram, runs python/tests with pytest, and ends
# with "python: N passed, N failed, N skipped" counted from pytest's JUnit XML.
#
#   ENGRAM_PREFIX=<prefix> bash tools/scripts/python_tests.sh [JUNIT_XML]
#
# ENGRAM_PREFIX: an installed library (<prefix>/lib/pkgconfig/engram.pc).
# Without it, this tree is installed into a throwaway prefix with the
# README's install command (tools/scripts/install.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
work=$(mktemp -d /tmp/engram-python.XXXXXX)
trap 'rm -rf "$work"' EXIT
junit=${1:-$work/junit.xml}

prefix=${ENGRAM_PREFIX:-$work/prefix}
if [[ -z ${ENGRAM_PREFIX:-} ]]; then
    bash tools/scripts/install.sh "$prefix" || exit 1
fi
pcdir=$prefix/lib/pkgconfig

/usr/bin/python3 -m venv --system-site-packages "$work/venv" || exit 1
# Built from a copy: setuptools reuses a build/ left in the source tree by an
# earlier build, which links against that build's (long gone) prefix.
mkdir -p "$work/src"
(cd python && tar --exclude=build --exclude='*.egg-info' --exclude=__pycache__ -cf - .) | (cd "$work/src" && tar -xf -)
PKG_CONFIG_PATH=$pcdir "$work/venv/bin/pip" install -q --no-build-isolation --no-deps "$work/src" || exit 1
# From python/tests: the installed package is imported, never the sources in python/engram.
# Without ENGRAM_PREFIX: the library reads every ENGRAM_<KEY> as a config
# key and refuses the unknown 'prefix'.
(cd python/tests && env -u ENGRAM_PREFIX ENGRAM_LOG_LEVEL=error "$work/venv/bin/python" -m pytest -rA -p no:cacheprovider \
    --junitxml="$junit" .)
rc=$?
/usr/bin/python3 - "$junit" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as e:
    print("python: no JUnit results (%s)" % e)
    sys.exit(0)
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
n = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
failed = n["failures"] + n["errors"]
print("python: %d passed, %d failed, %d skipped" % (n["tests"] - failed - n["skipped"], failed, n["skipped"]))
PY
exit $rc
