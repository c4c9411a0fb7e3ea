#include "engram/plugin/deadline.h"

#include <limits.h>
#include <time.h>

int64_t engram_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t engram_now_ms(void)
{
    return engram_now_ns() / 1000000;
}

engram_deadline_t engram_deadline_start(int64_t timeout_ms)
{
    int64_t now = engram_now_ns();
    if (timeout_ms < 0 || timeout_ms > (INT64_MAX - now) / 1000000)
        return (engram_deadline_t){.end_ns = INT64_MAX, .timeout_ms = timeout_ms};
    return (engram_deadline_t){.end_ns = now + timeout_ms * 1000000, .timeout_ms = timeout_ms};
}

void engram_deadline_progress(engram_deadline_t *d)
{
    *d = engram_deadline_start(d->timeout_ms);
}

bool engram_deadline_expired(const engram_deadline_t *d)
{
    return d->end_ns != INT64_MAX && engram_now_ns() > d->end_ns;
}

int engram_deadline_remaining_ms(const engram_deadline_t *d)
{
    if (d->end_ns == INT64_MAX)
        return INT_MAX;
    int64_t left = d->end_ns - engram_now_ns();
    if (left <= 0)
        return 0;
    int64_t ms = (left + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}
