#!/usr/bin/env bash
# examples/fetch.c (the README's example: 4 forked ranks, rows checked)
# built outside the Bazel tree against the installed engram, twice.
source "$TEST_SRCDIR/engram/tests/install/installed.sh"
work=$TEST_TMPDIR/consumer
mkdir -p "$work"
cp "$ROOT/examples/fetch.c" "$ROOT/examples/CMakeLists.txt" "$work/"
cd "$work"
# pkg-config
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror fetch.c $(pkg-config --cflags --libs engram) -o fetch_pc ||
    fail "cc \$(pkg-config --cflags --libs engram)"
LD_LIBRARY_PATH=$PREFIX/lib ENGRAM_TRANSPORT=loopback ./fetch_pc || fail "fetch built with pkg-config"
readelf -d fetch_pc | grep -q '(NEEDED).*\[libengram\.so\.0\]' || fail "fetch_pc does not need libengram.so.0"
# CMake
command -v cmake >/dev/null || fail "cmake is not installed (tools/scripts/install_deps.sh installs it)"
cmake -S . -B build -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >cmake.log 2>&1 ||
    { cat cmake.log; fail "cmake configure with find_package(engram)"; }
cmake --build build >>cmake.log 2>&1 || { cat cmake.log; fail "cmake --build"; }
# CMake puts the imported library's directory into the build tree's RUNPATH.
./build/fetch || fail "fetch built with CMake"
# A version newer than the installed one is refused.
sed -i 's/find_package(engram 0.1 REQUIRED)/find_package(engram 0.99 REQUIRED)/' CMakeLists.txt
if cmake -S . -B build99 -DCMAKE_PREFIX_PATH="$PREFIX" >cmake99.log 2>&1; then
    fail "find_package(engram 0.99) accepted engram $(pkg-config --modversion engram)"
fi
echo "consumer_test: pkg-config and CMake builds of examples/fetch.c ran correctly"
