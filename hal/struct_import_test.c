/* Versioned structs: an older caller's smaller struct gets the defaults for
 * what it lacks; a newer caller's larger one is accepted when its unknown
 * fields are unset; sizes no version has are refused, naming the struct. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hal/struct_import.h"
#include "hal/testdata/check_error.h"

typedef struct v2 {
    size_t size;
    int a, b;       /* version 1 */
    int64_t c;      /* version 2: default 7 */
} v2_t;

int main(void)
{
    const size_t min = offsetof(v2_t, c), align = _Alignof(v2_t);
    v2_t out = {.size = sizeof(out), .c = 7};
    /* Version 1 caller: c keeps its default. */
    struct { size_t size; int a, b; } v1 = {sizeof(v1), 1, 2};
    CHECK_OK(engram_struct_import(&out, sizeof(out), align, &v1, min, "v"));
    CHECK(out.size == sizeof(out) && out.a == 1 && out.b == 2 && out.c == 7);

    /* Same version: everything copied. */
    v2_t same = {sizeof(same), 3, 4, 5};
    CHECK_OK(engram_struct_import(&out, sizeof(out), align, &same, min, "v"));
    CHECK(out.a == 3 && out.b == 4 && out.c == 5);

    /* A newer caller: accepted while what we do not know is zero. */
    struct { size_t size; int a, b; int64_t c, d; } v3 = {sizeof(v3), 6, 7, 8, 0};
    CHECK_OK(engram_struct_import(&out, sizeof(out), align, &v3, min, "v"));
    CHECK(out.size == sizeof(out) && out.a == 6 && out.c == 8);
    v3.d = 1;
    v2_t keep = {.size = sizeof(keep), .c = 7};
    CHECK_ERROR(engram_struct_import(&keep, sizeof(keep), align, &v3, min, "v"), ENGRAM_ERR_VERSION,
                "v: size is 32 bytes and byte 24 is set, but this library knows only the first 24");
    CHECK(keep.a == 0 && keep.c == 7); /* untouched on error */

    /* Too small, a size that cuts a field, NULL. */
    size_t tiny = 8;
    CHECK_ERROR(engram_struct_import(&keep, sizeof(keep), align, &tiny, min, "v"), ENGRAM_ERR_VERSION,
                "v: size is 8 bytes, less than the 16 every version has");
    v2_t cut = {sizeof(cut) - 1, 1, 2, 3};
    CHECK_ERROR(engram_struct_import(&keep, sizeof(keep), align, &cut, min, "v"), ENGRAM_ERR_VERSION,
                "v: size 23 is not a multiple of the struct's alignment 8");
    CHECK_ERROR(engram_struct_import(&keep, sizeof(keep), align, NULL, min, "v"), ENGRAM_ERR_INVALID, "v: NULL");
    CHECK(keep.a == 0 && keep.c == 7);
    printf("struct_import_test: all passed\n");
    return 0;
}
