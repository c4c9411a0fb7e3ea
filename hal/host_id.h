/* Identity of the machine this process runs on (internal). */
#ifndef ENGRAM_HAL_HOST_ID_H
#define ENGRAM_HAL_HOST_ID_H

#include "hal/status.h"

#define ENGRAM_BOOT_ID_LEN 37 /* 36 characters of a UUID + NUL */

/* The kernel's boot id: equal on two processes iff they share a running
 * kernel, i.e. a host. Errors are returned, not logged, because callers use
 * it inside collectives and report the failure after all ranks agree. */
engram_status_t engram_host_boot_id(char out[ENGRAM_BOOT_ID_LEN]);

#endif
