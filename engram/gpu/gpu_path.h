/* The rule that picks a GPU table's path (engram_gpu_path_report in
 * <engram/engram.h> describes it). */
#ifndef ENGRAM_GPU_GPU_PATH_H
#define ENGRAM_GPU_GPU_PATH_H

#include <stdbool.h>
#include "engram/internal.h"

/* The path for node_bytes of rows read by `device` into *r (size set by
 * the caller); *uva_only when host_gather cannot run here. An error for a
 * setting that cannot run (gpu_path=host_gather where it cannot: the
 * capability check's refusal, naming `call`), or a failed probe. */
engram_status_t engram_gpu_path_pick(const engram_context_t *ctx, const char *call, int device, uint64_t node_bytes,
                                     engram_gpu_path_report_t *r, bool *uva_only);

#endif
