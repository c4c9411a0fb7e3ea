/* Back-to-back mapping of several segments in one reserved range. */
#include "engram/plugin/segment.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hal/log.h"

/* Parts may be backed by 2 MiB huge pages; their fixed addresses must be
 * aligned to that. */
#define SPAN_ALIGN ((size_t)2 << 20)

engram_status_t engram_segment_span_map(const engram_segment_ops_t *ops, const int *fds, int count, size_t stride,
                                        bool read_only, engram_segment_span_t *out)
{
    if (ops == NULL || ops->import_fd == NULL || fds == NULL || out == NULL || count <= 0 || stride == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "segment span: need segment ops with import_fd, %d fds (> 0) "
                            "and a stride > 0 (got %zu)", count, stride);
    if (stride % (size_t)sysconf(_SC_PAGESIZE) != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "segment span: stride %zu is not a multiple of the page size",
                            stride);
    if (stride > (SIZE_MAX - SPAN_ALIGN) / (size_t)count)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "segment span: %d segments of %zu bytes overflow", count, stride);

    engram_segment_span_t span = {.stride = stride, .count = count};
    span.reserved_bytes = stride * (size_t)count + SPAN_ALIGN;
    span.parts = calloc((size_t)count, sizeof(*span.parts));
    if (span.parts == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "segment span: out of memory for %d parts", count);
    /* PROT_NONE, no backing: it only holds the addresses until the parts
     * are mapped over it with MAP_FIXED. */
    span.reserved = mmap(NULL, span.reserved_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    engram_status_t st;
    if (span.reserved == MAP_FAILED) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "segment span: reserving %zu bytes failed: %s", span.reserved_bytes,
                          strerror(errno));
        goto free_parts;
    }
    span.base = (char *)(((uintptr_t)span.reserved + SPAN_ALIGN - 1) & ~(uintptr_t)(SPAN_ALIGN - 1));
    for (int i = 0; i < count; i++) {
        st = ops->import_fd(fds[i], stride, read_only, span.base + (size_t)i * stride, &span.parts[i]);
        if (st != ENGRAM_OK)
            goto unmap_parts;
        if (span.parts[i]->size != stride) {
            st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "segment span: part %d maps %zu bytes, not the stride %zu", i,
                              span.parts[i]->size, stride);
            goto unmap_parts;
        }
    }
    *out = span;
    return ENGRAM_OK;
unmap_parts:
    engram_segment_span_unmap(&span);
    return st;
free_parts:
    free(span.parts);
    return st;
}

engram_status_t engram_segment_span_map_node(engram_group_t *group, engram_segment_t *seg, bool read_only,
                                             engram_segment_span_t *out)
{
    if (group == NULL || seg == NULL || seg->ops == NULL || seg->ops->export_fd == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "segment span: need a group and an exportable segment");
    int size = engram_group_size(group);
    int local_size = engram_group_local_size(group);
    int node_first = engram_group_rank(group) - engram_group_local_rank(group);
    int my_fd;
    engram_status_t st = seg->ops->export_fd(seg, &my_fd);
    if (st != ENGRAM_OK)
        return st;
    /* Equal sizes are what makes a stride of one segment size address them. */
    size_t my_size = seg->size;
    size_t *sizes = calloc((size_t)size, sizeof(*sizes));
    int *fds = malloc((size_t)size * sizeof(*fds));
    if (sizes == NULL || fds == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "segment span: out of memory for %d ranks", size);
        goto free_arrays;
    }
    st = engram_group_allgather(group, &my_size, sizes, sizeof(my_size));
    if (st != ENGRAM_OK)
        goto free_arrays;
    for (int r = 0; r < size; r++) {
        if (sizes[r] != my_size) {
            st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "segment span: rank %d's segment is %zu bytes, this rank's %zu; "
                              "a span needs equal sizes", r, sizes[r], my_size);
            goto free_arrays;
        }
    }
    st = engram_fd_allgather(group, my_fd, fds);
    if (st != ENGRAM_OK)
        goto free_arrays;
    st = engram_segment_span_map(seg->ops, fds + node_first, local_size, my_size, read_only, out);
    for (int r = 0; r < size; r++) {
        if (fds[r] >= 0)
            close(fds[r]);
    }
free_arrays:
    free(fds);
    free(sizes);
    return st;
}

void engram_segment_span_unmap(engram_segment_span_t *span)
{
    if (span == NULL || span->parts == NULL)
        return;
    /* Parts first: an imported part placed in a reservation hands its pages
     * back to it, so the range stays ours until the final munmap. */
    for (int i = 0; i < span->count; i++) {
        if (span->parts[i] != NULL)
            span->parts[i]->ops->free(span->parts[i]);
    }
    munmap(span->reserved, span->reserved_bytes);
    free(span->parts);
    memset(span, 0, sizeof(*span));
}
