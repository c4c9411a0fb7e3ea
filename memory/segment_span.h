/* Several segments mapped back to back in one reserved address range, so a
 * single registration (one memory key) covers them all. Hybrid mode uses it
 * for a node's local segments, reached through a rail rank at a stride of
 * the segment size. */
#ifndef ENGRAM_MEMORY_SEGMENT_SPAN_H
#define ENGRAM_MEMORY_SEGMENT_SPAN_H

#include <stdbool.h>
#include <stddef.h>
#include "hal/group.h"
#include "hal/segment.h"
#include "hal/status.h"

typedef struct engram_segment_span {
    char *base;    /* parts[i] is mapped at base + i * stride */
    size_t stride; /* bytes per part (the segments' size) */
    int count;
    engram_segment_t **parts;
    void *reserved; /* the whole reservation (aligned base lies inside it) */
    size_t reserved_bytes;
} engram_segment_span_t;

/* Imports fds[0..count) (each exported by `ops`, each `stride` bytes) back
 * to back. The fds are not consumed. On failure nothing stays mapped. */
engram_status_t engram_segment_span_map(const engram_segment_ops_t *ops, const int *fds, int count, size_t stride,
                                        bool read_only, engram_segment_span_t *out);

/* Collective over the group: every rank maps the segments of the ranks of
 * its own node (its own included, at its local rank's slot) back to back.
 * Every rank's `seg` must have the same size. */
engram_status_t engram_segment_span_map_node(engram_group_t *group, engram_segment_t *seg, bool read_only,
                                             engram_segment_span_t *out);

/* Unmaps every part and the reservation; a zeroed span is a no-op. */
void engram_segment_span_unmap(engram_segment_span_t *span);

#endif
