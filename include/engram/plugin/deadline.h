/* The one monotonic clock and timeout deadline of the library and its
 * transports (a plugin service: libengram exports it), so every wait loop
 * reads time and decides "expired" the same way.
 *
 * A deadline bounds time without progress, not a whole exchange: a loop
 * that waits on several things (peers connecting, bytes moving, requests
 * completing) calls engram_deadline_progress each time one of them moves,
 * and the bound starts again from then. So a setup step of any size that
 * keeps moving completes (a thousand ranks passing fds on a loaded host),
 * while one that stalls fails within about the timeout of its last step.
 * Only a wait that cannot see partial progress (an MPI collective) bounds
 * the whole wait, and says so where it is documented. */
#ifndef ENGRAM_PLUGIN_DEADLINE_H
#define ENGRAM_PLUGIN_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>
#include "engram/status.h"

/* Busy-poll loops read the clock once per this many polls: a clock read
 * costs about as much as a poll, so checking every poll would halve the
 * poll rate, while 1024 polls stay far below a millisecond. */
#define ENGRAM_SPINS_PER_CLOCK_READ 1024u

typedef struct {
    int64_t end_ns;     /* CLOCK_MONOTONIC; INT64_MAX: never expires */
    int64_t timeout_ms; /* what engram_deadline_progress restarts it with */
} engram_deadline_t;

/* Nanoseconds and milliseconds on CLOCK_MONOTONIC. */
ENGRAM_PLUGIN_API int64_t engram_now_ns(void);
ENGRAM_PLUGIN_API int64_t engram_now_ms(void);

/* A deadline timeout_ms from now; a negative timeout never expires, and one
 * too far out to represent saturates rather than wrapping. */
ENGRAM_PLUGIN_API engram_deadline_t engram_deadline_start(int64_t timeout_ms);
ENGRAM_PLUGIN_API bool engram_deadline_expired(const engram_deadline_t *d);
/* Something the loop waits on moved: the deadline is timeout_ms from now
 * again (one that never expires stays so). */
ENGRAM_PLUGIN_API void engram_deadline_progress(engram_deadline_t *d);
/* Milliseconds left, rounded up, in [0, INT_MAX] (what poll() takes). */
ENGRAM_PLUGIN_API int engram_deadline_remaining_ms(const engram_deadline_t *d);

/* Counts one poll of a busy loop; true once every `period` polls (a power
 * of two), when the loop should read the clock or yield. */
static inline bool engram_spin_due(unsigned *spins, unsigned period)
{
    return (++*spins & (period - 1)) == 0;
}

#endif
