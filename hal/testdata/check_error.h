/* CHECK_ERROR for the hal tests: a call fails with the expected status and
 * the message it reported names what it should. */
#ifndef ENGRAM_HAL_TESTDATA_CHECK_ERROR_H
#define ENGRAM_HAL_TESTDATA_CHECK_ERROR_H

#include <string.h>
#include "tests/check.h"

#define CHECK_ERROR(expr, status, text)                                                                        \
    do {                                                                                                       \
        CHECK_STATUS(expr, status);                                                                            \
        if (strstr(engram_last_error(), (text)) == NULL) {                                                     \
            fprintf(stderr, "%s:%d: error '%s' lacks '%s'\n", __FILE__, __LINE__, engram_last_error(), (text)); \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

#endif
