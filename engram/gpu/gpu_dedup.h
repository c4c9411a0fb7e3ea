/* dedup for GPU tables (engram/dedup.h is the host side).
 *
 * This node's rows (the gather kernel's loads over PCIe or NVLink): with
 * dedup=on, a marking kernel finds each row's first position of its index
 * (atomicCAS in a per-slot table in GPU memory, cleared per fetch), the
 * gather kernel loads only firsts, and a copy kernel fills the repeats from
 * them in GPU memory: two launches and a memset more per fetch. dedup=auto
 * leaves these rows alone: the GPU's L2 already serves repeated rows of one
 * fetch without another PCIe read, and the extra launches are a fixed cost
 * (engram_gpu_bench with ENGRAM_DEDUP=on against off measures it).
 *
 * Rows of other nodes (through the host transport, gpu_remote.c) dedup as
 * a host fetch does, auto included: one get per distinct row, the scatter
 * placing each repeat from its first's staged row. Rows a fetch launcher
 * (nccl_gin) gets are its issue kernel's: not deduped. */
#ifndef ENGRAM_GPU_GPU_DEDUP_H
#define ENGRAM_GPU_GPU_DEDUP_H

#include "engram/gpu/gpu_state.h"

/* dedup=on's marking state, beside a local path with
 * ENGRAM_GPU_CAP_DEDUP (fetch_path.h): [slots][cap] marking tables, then
 * [slots][rows] first positions, in one GPU allocation. */
struct engram_gpu_dedup {
    uint32_t *table, *first;
    uint64_t cap, rows;
};

/* At table create (after the slots): the marking tables into *out;
 * sizes overflow-checked. Freed by engram_gpu_dedup_free. */
engram_status_t engram_gpu_dedup_alloc(engram_table_t *t, engram_gpu_dedup_t **out);
void engram_gpu_dedup_free(engram_gpu_dedup_t *dd);
/* Around the gather launch of a fetch of a->num_rows rows on `stream`,
 * `blocks` blocks: before sets a->first and queues the marking (dd NULL:
 * nothing), after queues the copies. Return the first cudaError_t. */
int engram_gpu_dedup_before(const engram_gpu_dedup_t *dd, int blocks, int slot, engram_gpu_gather_args_t *a,
                            void *stream);
int engram_gpu_dedup_after(const engram_gpu_gather_args_t *a, int blocks, void *stream);

#endif
