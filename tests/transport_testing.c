#include "tests/transport_testing.h"

#include "memory/host_segment.h"
#include "tests/check.h"

unsigned char testing_pattern(int rank, uint64_t off)
{
    return (unsigned char)(rank * 37 + off * 13 + (off >> 8));
}

engram_segment_t *testing_host_segment(size_t bytes, int huge)
{
    engram_segment_params_t p = {.size = sizeof(p), .bytes = bytes, .numa_node = -1, .huge = huge, .device = -1};
    engram_segment_t *seg = NULL;
    CHECK_OK(engram_host_segment_ops.alloc(&p, &seg));
    return seg;
}
