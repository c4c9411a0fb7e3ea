/* A QP's initial packet sequence number: 24 random bits from the kernel
 * (getrandom), so QPs of different processes and of a restarted one do not
 * start alike, and a stale packet of an earlier connection that reused the
 * QP number is unlikely to fall inside the new one's window. */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_PSN_H
#define ENGRAM_TRANSPORTS_MLX5DV_PSN_H

#include <stdint.h>

#include "engram/status.h"

/* *psn (< 2^24) on success only; ENGRAM_ERR_IO when getrandom fails. */
engram_status_t engram_mlx5_initial_psn(uint32_t *psn);

#endif
