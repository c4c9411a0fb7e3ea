/* A free list of fixed-size objects (a transport's flush requests), carved
 * from blocks allocated a block at a time: taking allocates only when more
 * objects are out than ever before, putting never frees, destroy frees every
 * block. A free object's first pointer-sized bytes hold the link. Not
 * thread-safe: one list per queue. Header-only: a transport compiles its
 * own copy, so the list's layout is no part of libengram's ABI. */
#ifndef ENGRAM_PLUGIN_FREE_LIST_H
#define ENGRAM_PLUGIN_FREE_LIST_H

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A block: this header, then per_block objects of obj_size at
 * ENGRAM_FREE_LIST_OBJS_AT. */
typedef struct engram_free_block {
    struct engram_free_block *next;
} engram_free_block_t;

#define ENGRAM_FREE_LIST_ALIGN alignof(max_align_t)
#define ENGRAM_FREE_LIST_OBJS_AT                                                                              \
    ((sizeof(engram_free_block_t) + ENGRAM_FREE_LIST_ALIGN - 1) / ENGRAM_FREE_LIST_ALIGN * ENGRAM_FREE_LIST_ALIGN)

typedef struct engram_free_list {
    void *head;                  /* the next object to take; NULL: grow first */
    engram_free_block_t *blocks; /* every block, for destroy */
    size_t obj_size;             /* rounded up to max_align_t's alignment */
    size_t per_block;
} engram_free_list_t;

/* obj_size > 0, per_block > 0 (a list whose block would not fit in memory
 * fails every take). Allocates nothing. */
static inline void engram_free_list_init(engram_free_list_t *fl, size_t obj_size, size_t per_block)
{
    if (obj_size < sizeof(void *))
        obj_size = sizeof(void *);
    /* SIZE_MAX rounds to 0, which grow refuses. */
    fl->head = NULL;
    fl->blocks = NULL;
    fl->obj_size = (obj_size + ENGRAM_FREE_LIST_ALIGN - 1) / ENGRAM_FREE_LIST_ALIGN * ENGRAM_FREE_LIST_ALIGN;
    fl->per_block = per_block;
}

/* Returns an object taken from this list. */
static inline void engram_free_list_put(engram_free_list_t *fl, void *obj)
{
    memcpy(obj, &fl->head, sizeof(void *));
    fl->head = obj;
}

/* Adds a block's objects to the list; false when out of memory. */
static inline bool engram_free_list_grow(engram_free_list_t *fl)
{
    size_t n = fl->per_block, size = fl->obj_size;
    if (n == 0 || size == 0 || n > (SIZE_MAX - ENGRAM_FREE_LIST_OBJS_AT) / size)
        return false;
    engram_free_block_t *b = (engram_free_block_t *)malloc(ENGRAM_FREE_LIST_OBJS_AT + n * size);
    if (b == NULL)
        return false;
    b->next = fl->blocks;
    fl->blocks = b;
    /* Pushed last to first, so takes hand the block out in address order. */
    for (size_t i = n; i-- > 0;)
        engram_free_list_put(fl, (char *)b + ENGRAM_FREE_LIST_OBJS_AT + i * size);
    return true;
}

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

/* Frees every block (objects still out become invalid); the list is empty
 * and may be used again. */
static inline void engram_free_list_destroy(engram_free_list_t *fl)
{
    for (engram_free_block_t *b = fl->blocks, *next; b != NULL; b = next) {
        next = b->next;
        free(b);
    }
    fl->head = NULL;
    fl->blocks = NULL;
}

#ifdef __cplusplus
}
#endif
#endif
