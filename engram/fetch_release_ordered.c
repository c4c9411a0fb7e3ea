/* engram_fetch_release_ordered and engram_table_poll_released: the checks
 * every build makes; the work is the GPU table's (engram/gpu/gpu_released.c). */
#include "engram/fetch_handle.h"
#include "engram/gpu/gpu_table.h"
#include "hal/log.h"

engram_status_t engram_fetch_release_ordered(engram_fetch_t *fetch, uint64_t cookie)
{
    engram_fetch_slot_t *f = engram_handle_lookup(fetch, "engram_fetch_release_ordered");
    if (f == NULL)
        return ENGRAM_ERR_INVALID;
    if (f->table->params.recv != ENGRAM_RECV_CUDA)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "engram_fetch_release_ordered: the table receives in host memory, whose rows are there "
                            "only once a wait has seen them; use engram_fetch_release");
    return engram_gpu_release_ordered(f, cookie);
}

engram_status_t engram_table_poll_released(engram_table_t *t, engram_fetch_completion_t *out, uint32_t max, int wait,
                                           uint32_t *n, uint32_t *pending)
{
    if (t == NULL || n == NULL || (out == NULL && max > 0))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_table_poll_released: table and n must not be NULL, nor out "
                                                "when max > 0");
    if (t->params.recv != ENGRAM_RECV_CUDA) { /* nothing is released in stream order there */
        *n = 0;
        if (pending != NULL)
            *pending = 0;
        return ENGRAM_OK;
    }
    return engram_gpu_poll_released(t, out, max, wait, n, pending);
}
