/* libFuzzer target: the mlx5 CQE parser (transports/mlx5dv/mlx5_cqe.h) on
 * random 64-byte CQEs, consumer indices and ring sizes. Asserts: the kind is
 * one of the four; the owner bit decides ownership (the same bytes with the
 * owner bit flipped are EMPTY whenever the original was not); the
 * description of a completion is always NUL-terminated within any buffer
 * length and the syndrome text exists. */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_input.h"
#include "transports/mlx5dv/mlx5_cqe.h"

enum { CQE_BYTES = 64, OWNER_BYTE = 63 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    uint8_t cqe[CQE_BYTES];
    for (int i = 0; i < CQE_BYTES; i++)
        cqe[i] = (uint8_t)fuzz_take(&in, 1);
    uint32_t ci = (uint32_t)fuzz_take(&in, 4);
    uint32_t cqe_cnt = 1u << (fuzz_take(&in, 1) % 23);
    size_t len = (size_t)(fuzz_take(&in, 1) % 200) + 1;
    engram_mlx5_cqe_info_t info;
    engram_mlx5_cqe_kind_t kind = engram_mlx5_cqe_parse(cqe, ci, cqe_cnt, &info);
    if (kind != ENGRAM_MLX5_CQE_EMPTY && kind != ENGRAM_MLX5_CQE_OK && kind != ENGRAM_MLX5_CQE_ERROR &&
        kind != ENGRAM_MLX5_CQE_UNEXPECTED)
        abort();
    if (kind == ENGRAM_MLX5_CQE_EMPTY)
        return 0;
    uint8_t flipped[CQE_BYTES];
    memcpy(flipped, cqe, CQE_BYTES);
    flipped[OWNER_BYTE] ^= 1; /* the owner bit: now the previous pass's entry */
    engram_mlx5_cqe_info_t other;
    if (engram_mlx5_cqe_parse(flipped, ci, cqe_cnt, &other) != ENGRAM_MLX5_CQE_EMPTY)
        abort();
    char *buf = malloc(len); /* exact size: ASan sees any write past it */
    engram_mlx5_cqe_describe(&info, buf, len);
    if (memchr(buf, '\0', len) == NULL)
        abort();
    free(buf);
    if (engram_mlx5_syndrome_str(info.syndrome) == NULL)
        abort();
    return 0;
}
