/* The GPU fetch's pieces shared by gpu_fetch.c and gpu_released.c. */
#ifndef ENGRAM_GPU_GPU_FETCH_H
#define ENGRAM_GPU_GPU_FETCH_H

#include "engram/gpu/gpu_state.h"

/* cudaSuccess once the fetch that reports into entry `report` is complete
 * (seq nonzero: every block of the report stored seq; 0: the slot's event
 * is done), cudaErrorNotReady before, or the error that stopped it (for a
 * signalling kernel only when `errors`: CUDA is asked then). */
cudaError_t engram_gpu_report_query(const engram_gpu_table_t *g, uint64_t seq, uint32_t report, int slot,
                                    bool errors);
/* A complete fetch's bad-index report (count, first (token, entry)) and
 * cache hits, from its report entry's blocks. */
void engram_gpu_report_read(const engram_table_t *t, uint32_t report, uint32_t num_tokens, uint64_t *bad_count,
                            uint32_t *first_token, uint32_t *first_entry, uint64_t *hits);
/* A slot whose fetches were released in stream order on `stream`, taken
 * for a new fetch (NULL: none). */
engram_fetch_slot_t *engram_gpu_take_ordered(engram_table_t *t, void *stream, uint32_t num_tokens, unsigned flags);
/* Slots held by fetches released in stream order that are still running. */
int engram_gpu_slots_ordered(const engram_table_t *t);
/* A captured fetch released: the device synchronized (every replay
 * launched has ended), then each path's end_captured. */
void engram_gpu_fetch_uncapture(engram_fetch_slot_t *f);

#endif
