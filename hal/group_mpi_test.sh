#!/bin/bash
# Runs group_mpi_test as 4 MPI ranks on this host only: no ssh launcher
# (plm isolated), shared memory and self transports only (no network).
set -euo pipefail
bin="$1"
export TMPDIR="${TEST_TMPDIR:-/tmp}"
export HOME="${HOME:-$TMPDIR}"
out="$TMPDIR/group_mpi_test.out"
# Under --config=asan: Open MPI never frees its start-up allocations, made in
# components it dlcloses (so no suppression can name them); leak checking of
# engram's code is left to the other tests.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
timeout 120 mpirun --allow-run-as-root --oversubscribe \
    --mca plm isolated --mca pml ob1 --mca btl self,vader \
    -np 4 "$bin" 2>&1 | tee "$out"
ok=$(grep -c '^group_mpi_test: rank [0-3] ok$' "$out" || true)
if [ "$ok" != 4 ]; then
    echo "group_mpi_test.sh: $ok of 4 ranks reported ok" >&2
    exit 1
fi
