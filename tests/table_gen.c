#include "tests/table_gen.h"

#include <math.h>
#include <string.h>

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void table_gen_row(uint64_t global_idx, uint32_t row_bytes, uint8_t *row)
{
    for (uint32_t off = 0; off < row_bytes; off += 8) {
        uint64_t v = splitmix64(global_idx * 0x100000001b3ull + off);
        uint32_t n = row_bytes - off < 8 ? row_bytes - off : 8;
        memcpy(row + off, &v, n);
    }
}

uint32_t table_gen_scale(uint64_t global_idx, uint32_t pack)
{
    return (uint32_t)splitmix64(~global_idx * 31 + pack);
}

void table_gen_indices(uint64_t total_rows, table_gen_dist_t dist, uint64_t seed, int rank, uint64_t step, uint64_t n,
                       int64_t *out)
{
    uint64_t state = splitmix64(seed * 0x632be59bd9b4e019ull + (uint64_t)rank * 0x10001ull + step);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t h = splitmix64(state + i);
        uint64_t idx;
        if (dist == TABLE_GEN_UNIFORM) {
            idx = h % total_rows;
        } else {
            /* log-uniform rank, then a fixed scramble so the hot rows are
             * spread over the owners */
            double u = (double)(h >> 11) / 9007199254740992.0;
            uint64_t r = (uint64_t)pow((double)total_rows, u) - 1;
            if (r >= total_rows)
                r = total_rows - 1;
            idx = (r * 0x9e3779b1ull + 12345) % total_rows;
        }
        out[i] = (int64_t)idx;
    }
}
