#include "memory/free_list.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

/* A block: this header, then per_block objects of obj_size at OBJS_AT. */
struct engram_free_block {
    engram_free_block_t *next;
};

#define ALIGN alignof(max_align_t)
#define OBJS_AT ((sizeof(engram_free_block_t) + ALIGN - 1) / ALIGN * ALIGN)

void engram_free_list_init(engram_free_list_t *fl, size_t obj_size, size_t per_block)
{
    if (obj_size < sizeof(void *))
        obj_size = sizeof(void *);
    /* SIZE_MAX rounds to 0, which grow refuses. */
    *fl = (engram_free_list_t){.obj_size = (obj_size + ALIGN - 1) / ALIGN * ALIGN, .per_block = per_block};
}

bool engram_free_list_grow(engram_free_list_t *fl)
{
    size_t n = fl->per_block, size = fl->obj_size;
    if (n == 0 || size == 0 || n > (SIZE_MAX - OBJS_AT) / size)
        return false;
    engram_free_block_t *b = malloc(OBJS_AT + n * size);
    if (b == NULL)
        return false;
    b->next = fl->blocks;
    fl->blocks = b;
    /* Pushed last to first, so takes hand the block out in address order. */
    for (size_t i = n; i-- > 0;)
        engram_free_list_put(fl, (char *)b + OBJS_AT + i * size);
    return true;
}

void engram_free_list_destroy(engram_free_list_t *fl)
{
    for (engram_free_block_t *b = fl->blocks, *next; b != NULL; b = next) {
        next = b->next;
        free(b);
    }
    fl->head = NULL;
    fl->blocks = NULL;
}
