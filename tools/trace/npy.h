/* A strict reader of .npy headers (NumPy's format, versions 1.0, 2.0 and
 * 3.0) for little-endian int32 / int64 arrays in C order. Anything else is
 * refused with a message saying what and where: another dtype or byte
 * order, Fortran order, a malformed or truncated header, a shape whose
 * element count or byte size overflows 64 bits, or a file size that does
 * not match the shape. */
#ifndef ENGRAM_TOOLS_TRACE_NPY_H
#define ENGRAM_TOOLS_TRACE_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_DIMS 8

typedef struct npy_info {
    uint32_t elem_bytes; /* 4 ('<i4') or 8 ('<i8') */
    int ndim;
    uint64_t shape[NPY_MAX_DIMS];
    uint64_t count;       /* product of shape (1 for a 0-d array) */
    uint64_t data_offset; /* where the elements start in the file */
} npy_info_t;

/* Parses the whole file's bytes buf[0..len). Returns 0 and fills *out, or
 * returns -1, leaves *out untouched and writes a message to err. */
int npy_parse(const uint8_t *buf, uint64_t len, npy_info_t *out, char *err, size_t errlen);

#endif
