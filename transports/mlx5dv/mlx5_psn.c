#include "transports/mlx5dv/mlx5_psn.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "engram/log.h"

#define PSN_MASK 0xffffffu /* PSNs are 24 bits */

engram_status_t engram_mlx5_initial_psn(uint32_t *psn)
{
    uint32_t r;
    ssize_t n;
    do /* 4 bytes come whole once the pool is ready; a signal may interrupt the wait */
        n = getrandom(&r, sizeof(r), 0);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(r))
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "mlx5dv: getrandom for a QP's initial PSN failed: %s",
                            n < 0 ? strerror(errno) : "short read");
    *psn = r & PSN_MASK;
    return ENGRAM_OK;
}
