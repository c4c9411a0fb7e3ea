/* Minimal assertions for the C tests: print where and exit nonzero. */
#ifndef ENGRAM_TESTS_CHECK_H
#define ENGRAM_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include "engram/status.h"

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);    \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

#define CHECK_STATUS(expr, want)                                                        \
    do {                                                                                \
        engram_status_t check_st_ = (expr);                                             \
        if (check_st_ != (want)) {                                                      \
            fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d (%s); last error: %s\n", \
                    __FILE__, __LINE__, #expr, (int)check_st_, engram_status_str(check_st_), \
                    (int)(want), engram_status_str(want), engram_last_error());         \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, ENGRAM_OK)

#endif
