#include "engram/plugin/deadline.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                                      \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

int main(void)
{
    int64_t a = engram_now_ns();
    sleep_ms(5);
    int64_t b = engram_now_ns();
    CHECK(b - a >= 5000000);
    CHECK(engram_now_ms() >= b / 1000000);

    engram_deadline_t zero = engram_deadline_start(0);
    sleep_ms(1);
    CHECK(engram_deadline_expired(&zero));
    CHECK(engram_deadline_remaining_ms(&zero) == 0);

    engram_deadline_t soon = engram_deadline_start(20);
    CHECK(!engram_deadline_expired(&soon));
    int left = engram_deadline_remaining_ms(&soon);
    CHECK(left > 0 && left <= 20);
    sleep_ms(30);
    CHECK(engram_deadline_expired(&soon));
    CHECK(engram_deadline_remaining_ms(&soon) == 0);

    /* Negative: never expires; huge: saturates instead of wrapping into the past. */
    engram_deadline_t never = engram_deadline_start(-1);
    CHECK(!engram_deadline_expired(&never));
    CHECK(engram_deadline_remaining_ms(&never) == INT_MAX);
    engram_deadline_t huge = engram_deadline_start(INT64_MAX);
    CHECK(!engram_deadline_expired(&huge));
    CHECK(engram_deadline_remaining_ms(&huge) == INT_MAX);
    engram_deadline_t big = engram_deadline_start((int64_t)INT_MAX * 4);
    CHECK(!engram_deadline_expired(&big));
    CHECK(engram_deadline_remaining_ms(&big) == INT_MAX);

    /* Progress restarts the bound: 60 ms in all against a 40 ms timeout,
     * never 40 ms without progress; then a stall expires it. */
    engram_deadline_t moving = engram_deadline_start(40);
    for (int i = 0; i < 3; i++) {
        sleep_ms(20);
        CHECK(!engram_deadline_expired(&moving));
        engram_deadline_progress(&moving);
        CHECK(engram_deadline_remaining_ms(&moving) > 20);
    }
    sleep_ms(50);
    CHECK(engram_deadline_expired(&moving));
    engram_deadline_progress(&never);
    CHECK(engram_deadline_remaining_ms(&never) == INT_MAX);

    unsigned spins = 0, due = 0;
    for (int i = 0; i < 4 * (int)ENGRAM_SPINS_PER_CLOCK_READ; i++)
        due += engram_spin_due(&spins, ENGRAM_SPINS_PER_CLOCK_READ);
    CHECK(due == 4);
    spins = 0;
    CHECK(!engram_spin_due(&spins, 2) && engram_spin_due(&spins, 2));
    printf("deadline_test: ok\n");
    return 0;
}
