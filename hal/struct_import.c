/* See struct_import.h. */
#include "hal/struct_import.h"

#include <string.h>

#include "hal/log.h"

engram_status_t engram_struct_import(void *dst, size_t known, size_t align, const void *src, size_t min_size,
                                     const char *what)
{
    if (src == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: NULL", what);
    size_t size;
    memcpy(&size, src, sizeof(size));
    if (size < min_size)
        return ENGRAM_ERROR(ENGRAM_ERR_VERSION,
                            "%s: size is %zu bytes, less than the %zu every version has (set .size = sizeof the "
                            "struct)",
                            what, size, min_size);
    if (size % align != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_VERSION,
                            "%s: size %zu is not a multiple of the struct's alignment %zu, so no version has it "
                            "(set .size = sizeof the struct)",
                            what, size, align);
    /* A newer caller's fields past ours must be unset: a set one asks for
     * something this library cannot do. */
    for (size_t i = known; i < size; i++)
        if (((const unsigned char *)src)[i] != 0)
            return ENGRAM_ERROR(ENGRAM_ERR_VERSION,
                                "%s: size is %zu bytes and byte %zu is set, but this library knows only the first "
                                "%zu (built against a newer header?)",
                                what, size, i, known);
    memcpy(dst, src, size < known ? size : known);
    memcpy(dst, &known, sizeof(known));
    return ENGRAM_OK;
}
