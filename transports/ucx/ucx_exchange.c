/* Allgather of variable-length blobs (worker addresses, packed rkeys):
 * the lengths first, then every blob padded to the longest. */
#include <stdlib.h>
#include <string.h>

#include "engram/log.h"
#include "transports/ucx/ucx_internal.h"

engram_status_t engram_ucx_allgather_blobs(engram_group_t *group, const void *mine, size_t len, char **all,
                                           size_t *stride, size_t **lens)
{
    int size = engram_group_size(group);
    size_t *lengths = malloc((size_t)size * sizeof(*lengths));
    if (lengths == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx: out of memory exchanging %zu-byte blobs", len);
    engram_status_t st = engram_group_allgather(group, &len, lengths, sizeof(len));
    if (st != ENGRAM_OK)
        goto free_lengths;
    size_t max = 0;
    for (int r = 0; r < size; r++)
        max = lengths[r] > max ? lengths[r] : max;
    if (max == 0)
        max = 1;
    char *padded = calloc(1, max);
    char *blobs = calloc((size_t)size, max);
    if (padded == NULL || blobs == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx: out of memory for %d blobs of %zu bytes", size, max);
        goto free_blobs;
    }
    memcpy(padded, mine, len);
    st = engram_group_allgather(group, padded, blobs, max);
    if (st != ENGRAM_OK)
        goto free_blobs;
    free(padded);
    *all = blobs;
    *stride = max;
    *lens = lengths;
    return ENGRAM_OK;
free_blobs:
    free(blobs);
    free(padded);
free_lengths:
    free(lengths);
    return st;
}
