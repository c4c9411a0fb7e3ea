/* A GPU table's hot-row cache (engram_table_cache_rows in <engram/engram.h>):
 * the rows and their index, in GPU memory (the kernels tell hits from
 * misses on either path). */
#ifndef ENGRAM_GPU_HOT_CACHE_H
#define ENGRAM_GPU_HOT_CACHE_H

#include "engram/gpu/hot_hash.h"
#include "engram/internal.h"

typedef struct engram_gpu_hot {
    uint64_t rows;          /* rows held */
    int64_t *list;          /* host [rows]: slot k holds row list[k] (reloads read it) */
    engram_hot_hash_t dev;  /* the index, in GPU memory (built on the host) */
    int64_t *list_dev;      /* GPU [rows]: the uva path reloads with the gather kernel */
    char *rows_dev;         /* GPU [rows][row_bytes] */
    int blocks;             /* the most blocks of host_gather's cache kernels: the table's */
    int device;             /* the table's GPU (host_gather's pool queues work for it) */
} engram_gpu_hot_t;

void engram_gpu_hot_free(engram_gpu_hot_t *hot);

#endif
