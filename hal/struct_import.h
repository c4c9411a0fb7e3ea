/* Versioned structs from callers: every user-facing struct that begins with
 * `size_t size` (engram_table_params_t, engram_group_callbacks_t, ...) is
 * read through this, so a caller built against an older header (smaller
 * size) gets the defaults for the fields it lacks, and one built against a
 * newer header (larger size) is accepted as long as the fields this library
 * does not know are zero (unset). */
#ifndef ENGRAM_HAL_STRUCT_IMPORT_H
#define ENGRAM_HAL_STRUCT_IMPORT_H

#include <stddef.h>
#include "hal/status.h"

/* dst (known bytes, first field size_t size) holds the defaults; src is
 * the caller's struct, whose size field says how much of it there is.
 * Copies what both know, then sets dst's size to `known`. min_size: the
 * offset of the first field with a default (a smaller struct is refused);
 * align: the struct's alignment, which every real version's sizeof is a
 * multiple of (so a size that cuts a field in two is refused). `what` names
 * the struct in errors. On error dst keeps its defaults. */
engram_status_t engram_struct_import(void *dst, size_t known, size_t align, const void *src, size_t min_size,
                                     const char *what);

#endif
