/* Host segments: memfd-backed, NUMA-local, huge pages where the machine
 * allows (MFD_HUGETLB; with huge_pages=auto a machine without them falls
 * back to normal pages with one INFO log line; huge_pages=on fails). */
#ifndef ENGRAM_MEMORY_HOST_SEGMENT_H
#define ENGRAM_MEMORY_HOST_SEGMENT_H

#include "engram/plugin/segment.h"

extern const engram_segment_ops_t engram_host_segment_ops;

#endif
