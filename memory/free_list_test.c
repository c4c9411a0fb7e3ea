/* The free list: objects distinct, aligned and within their blocks across
 * several blocks; put objects come back before new blocks are taken; sizes
 * whose block would overflow are refused, not wrapped; destroy leaves
 * nothing behind (ASan's leak check) and the list usable. */
#include "engram/plugin/free_list.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/check.h"

#define PER_BLOCK 8
#define TAKEN (3 * PER_BLOCK + 1) /* four blocks, the last one barely */

typedef struct obj {
    char tag;
    double payload;
} obj_t;

int main(void)
{
    engram_free_list_t fl;
    engram_free_list_init(&fl, sizeof(obj_t), PER_BLOCK);
    CHECK(fl.head == NULL && fl.blocks == NULL); /* nothing allocated yet */
    obj_t *o[TAKEN];
    for (int i = 0; i < TAKEN; i++) {
        o[i] = engram_free_list_take(&fl);
        CHECK(o[i] != NULL);
        CHECK((uintptr_t)o[i] % alignof(max_align_t) == 0);
        memset(o[i], 0xa5, sizeof(*o[i])); /* the whole object is the caller's */
        o[i]->tag = (char)i;
    }
    for (int i = 0; i < TAKEN; i++)
        for (int j = i + 1; j < TAKEN; j++) {
            uintptr_t a = (uintptr_t)o[i], b = (uintptr_t)o[j];
            CHECK(a + sizeof(obj_t) <= b || b + sizeof(obj_t) <= a);
        }
    /* A block is handed out in address order. */
    for (int i = 1; i < PER_BLOCK; i++)
        CHECK((uintptr_t)o[i] >= (uintptr_t)o[i - 1] + sizeof(obj_t));
    for (int i = 0; i < TAKEN; i++)
        CHECK(o[i]->tag == (char)i); /* no object overlapped another's tag */

    /* Put back, taken again: the same objects, last put first. */
    engram_free_list_put(&fl, o[3]);
    engram_free_list_put(&fl, o[5]);
    CHECK(engram_free_list_take(&fl) == o[5]);
    CHECK(engram_free_list_take(&fl) == o[3]);
    /* The rest of the fourth block, then a fifth (leaked if destroy missed it). */
    for (int i = 0; i < PER_BLOCK; i++)
        CHECK(engram_free_list_take(&fl) != NULL);

    engram_free_list_destroy(&fl);
    CHECK(fl.head == NULL && fl.blocks == NULL);
    CHECK(engram_free_list_take(&fl) != NULL); /* usable again */
    engram_free_list_destroy(&fl);

    /* Tiny objects still hold a link; an overflowing block is refused. */
    engram_free_list_init(&fl, 1, 2);
    char *a = engram_free_list_take(&fl), *b = engram_free_list_take(&fl);
    CHECK(a != NULL && b != NULL && ((uintptr_t)b - (uintptr_t)a >= sizeof(void *) && (uintptr_t)a - (uintptr_t)b >= sizeof(void *)));
    engram_free_list_destroy(&fl);
    engram_free_list_init(&fl, SIZE_MAX / 4, 8);
    CHECK(engram_free_list_take(&fl) == NULL && fl.blocks == NULL);
    engram_free_list_init(&fl, SIZE_MAX, 1);
    CHECK(engram_free_list_take(&fl) == NULL && fl.blocks == NULL);
    engram_free_list_init(&fl, 16, 0);
    CHECK(engram_free_list_take(&fl) == NULL && fl.blocks == NULL);
    printf("free_list_test: ok\n");
    return 0;
}
