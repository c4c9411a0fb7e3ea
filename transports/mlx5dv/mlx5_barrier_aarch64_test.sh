#!/usr/bin/env bash
# Cross-compiles the mlx5 data path for aarch64 and checks, in the
# disassembly, that the doorbell and CQ polling carry the device barriers of
# mlx5_barrier.h: x86 hides a missing one (its stores reach the NIC in
# order), a Grace host does not. A C11 fence shows up as `dmb ish*`, which
# orders memory between CPUs only, and fails the test.
# Usage: mlx5_barrier_aarch64_test.sh SRC.c... (workspace-relative paths).
set -euo pipefail
[[ -n "${ENGRAM_TRACE:-}" ]] && set -x
CC=${ENGRAM_AARCH64_CC:-aarch64-linux-gnu-gcc}
OBJDUMP=${ENGRAM_AARCH64_OBJDUMP:-aarch64-linux-gnu-objdump}
for tool in "$CC" "$OBJDUMP"; do
    command -v "$tool" >/dev/null || {
        echo "FAIL: $tool not found (tools/scripts/install_deps.sh installs gcc-aarch64-linux-gnu)" >&2
        exit 1
    }
done
cd "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-engram}"
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/mlx5_barrier.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# (No early-exiting reader in a pipe: pipefail would count its SIGPIPE.)
# rdma-core's headers are CPU-independent; take them from where the host
# compiler finds them, alone, so the cross compiler keeps its own libc.
mlx5dv_h=$(printf '#include <infiniband/mlx5dv.h>\n' | cc -xc -M - | tr ' \\' '\n\n' | awk '/\/infiniband\/mlx5dv\.h$/ && !n++')
mkdir "$tmp/include"
ln -s "$(dirname "$mlx5dv_h")" "$tmp/include/infiniband"

fail=0
check() { # what, expected, actual
    if [[ "$2" == "$3" ]]; then
        echo "ok: $1: ${3:-none}"
    else
        echo "FAIL: $1: expected '${2}', found '${3}'" >&2
        fail=1
    fi
}
# The instructions of function $2 in object $1, one mnemonic+operands a line.
insns() {
    "$OBJDUMP" -d --no-show-raw-insn "$1" |
        awk -v f="<$2>:" '$2 == f { on = 1; next } /^$/ { on = 0 } on { $1 = ""; print substr($0, 2) }'
}
# Barriers in order, and `S` for each run of stores between them.
shape() { sed -nE 's/^(dmb|dsb) *([a-z]+).*/\1 \2/p; s/^(str|stp|stur)[a-z]* .*/S/p' | uniq | paste -sd, -; }

for src in "$@"; do
    obj="$tmp/$(basename "$src" .c).o"
    "$CC" -std=c11 -D_GNU_SOURCE -O2 -Wall -Werror -I. -Iinclude -isystem "$tmp/include" -c "$src" -o "$obj"
    # No inner-shareable barrier anywhere: that is what a C11 fence becomes.
    check "$src: no C11 (dmb ish*) fences" "" \
        "$("$OBJDUMP" -d --no-show-raw-insn "$obj" | grep -oE 'dmb[[:space:]]+ish[a-z]*' | sort -u | paste -sd, -)"
    case "$(basename "$src")" in
    mlx5_setup.c)
        # WQEs -> dmb oshst -> doorbell record -> dsb st -> BlueFlame -> dsb st.
        check "verbs_doorbell barriers and stores" "dmb oshst,S,dsb st,S,dsb st,S" "$(insns "$obj" verbs_doorbell | shape)"
        ;;
    mlx5_cqe.c)
        # owner-bit load -> dmb oshld -> the CQE's other fields.
        body=$(insns "$obj" engram_mlx5_cqe_parse)
        check "engram_mlx5_cqe_parse barriers" "dmb oshld" "$(grep -oE '^(dmb|dsb) +[a-z]+' <<<"$body" | uniq | paste -sd, -)"
        check "engram_mlx5_cqe_parse loads the owner bit before the barrier" "ldrb" \
            "$(sed -n '/^dmb/q; s/^\(ldrb\) .*/\1/p' <<<"$body" | awk 'NR == 1')"
        ;;
    mlx5_post.c)
        # CQE reads -> dmb oshld -> consumer-index store.
        check "conn_poll: a dmb oshld right before the consumer-index store" "dmb oshld,S" \
            "$(insns "$obj" conn_poll | shape | grep -oE 'dmb oshld,S' | awk 'NR == 1')"
        ;;
    *)
        check "$src: known source" "mlx5_setup.c, mlx5_cqe.c or mlx5_post.c" "$src"
        ;;
    esac
done
exit "$fail"
