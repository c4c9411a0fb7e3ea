/* Helpers shared by the transport tests: a byte pattern that names its rank
 * and offset, and host segments with a chosen huge-page policy. */
#ifndef ENGRAM_TESTS_TRANSPORT_TESTING_H
#define ENGRAM_TESTS_TRANSPORT_TESTING_H

#include <stdint.h>
#include "engram/plugin/segment.h"

/* The byte rank `rank` keeps at `off` of its segment. */
unsigned char testing_pattern(int rank, uint64_t off);

/* A host segment of `bytes` (huge: ENGRAM_HUGE_*); exits the test on failure. */
engram_segment_t *testing_host_segment(size_t bytes, int huge);

#endif
