/* Reads fixed-size fields off a fuzz input; past the end it yields zeros,
 * so every input maps to some case. */
#ifndef ENGRAM_TESTS_FUZZ_INPUT_H
#define ENGRAM_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct fuzz_input {
    const uint8_t *data;
    size_t size;
} fuzz_input_t;

static inline uint64_t fuzz_take(fuzz_input_t *in, size_t bytes)
{
    uint64_t v = 0;
    size_t n = bytes < in->size ? bytes : in->size;
    memcpy(&v, in->data, n);
    in->data += n;
    in->size -= n;
    return v;
}

#endif
