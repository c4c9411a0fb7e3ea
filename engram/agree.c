#include <stdint.h>
#include <stdlib.h>

#include "engram/internal.h"
#include "hal/log.h"

engram_status_t engram_agree(engram_group_t *group, engram_status_t local)
{
    int n = engram_group_size(group);
    int32_t *all = calloc((size_t)n, sizeof(*all));
    if (all == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate %d statuses for agreement", n);
    int32_t mine = (int32_t)local;
    engram_status_t st = engram_group_allgather(group, &mine, all, sizeof(mine));
    if (st == ENGRAM_OK && local == ENGRAM_OK) {
        for (int r = 0; r < n; r++) {
            if (all[r] != ENGRAM_OK) {
                st = ENGRAM_ERROR((engram_status_t)all[r], "rank %d failed (%s); abandoning the collective call",
                                  r, engram_status_str((engram_status_t)all[r]));
                break;
            }
        }
    }
    free(all);
    return local != ENGRAM_OK ? local : st;
}
