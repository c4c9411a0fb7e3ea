/* A free list of fixed-size objects (a transport's flush requests), carved
 * from blocks allocated a block at a time: taking allocates only when more
 * objects are out than ever before, putting never frees, destroy frees every
 * block. A free object's first pointer-sized bytes hold the link. Not
 * thread-safe: one list per queue. */
#ifndef ENGRAM_MEMORY_FREE_LIST_H
#define ENGRAM_MEMORY_FREE_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct engram_free_block engram_free_block_t;

typedef struct engram_free_list {
    void *head;                  /* the next object to take; NULL: grow first */
    engram_free_block_t *blocks; /* every block, for destroy */
    size_t obj_size;             /* rounded up to max_align_t's alignment */
    size_t per_block;
} engram_free_list_t;

/* obj_size > 0, per_block > 0 (a list whose block would not fit in memory
 * fails every take). Allocates nothing. */
void engram_free_list_init(engram_free_list_t *fl, size_t obj_size, size_t per_block);

/* Adds a block's objects to the list; false when out of memory. */
bool engram_free_list_grow(engram_free_list_t *fl);

/* An object (contents unspecified, aligned for any type), or NULL when the
 * list was empty and a block could not be allocated. */
static inline void *engram_free_list_take(engram_free_list_t *fl)
{
    if (fl->head == NULL && !engram_free_list_grow(fl))
        return NULL;
    void *obj = fl->head;
    memcpy(&fl->head, obj, sizeof(void *));
    return obj;
}

/* Returns an object taken from this list. */
static inline void engram_free_list_put(engram_free_list_t *fl, void *obj)
{
    memcpy(obj, &fl->head, sizeof(void *));
    fl->head = obj;
}

/* Frees every block (objects still out become invalid); the list is empty
 * and may be used again. */
void engram_free_list_destroy(engram_free_list_t *fl);

#endif
