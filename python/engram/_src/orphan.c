/* Receive memory that tensors outlive: engram.ElasticBuffer's destroy
 * ends the buffer while tensors still view fetched rows (DeepEP's
 * lifetime), and the library then frees the memory they view. Reading a
 * freed host page would kill the process, so after the library's destroy
 * the pages those views span are mapped again, as private zero pages,
 * where nothing else has been mapped since: the tensors read zeros (and
 * keep what they write) until the table object goes, after the last of
 * them. Device memory (recv='cuda') is left to CUDA, which reports such a
 * read as an illegal address. */
#include <sys/mman.h>
#include <unistd.h>

#include "ext.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older kernels take it as a hint (handled below) */
#endif

static uintptr_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uintptr_t)p : 4096;
}

void eg_orphan_note(eg_table_t *t, int kind, const void *addr, size_t bytes)
{
    if (addr == NULL || bytes == 0)
        return;
    eg_orphan_t *o = &t->orphans[kind];
    uintptr_t p = page_size(), lo = (uintptr_t)addr & ~(p - 1), hi = ((uintptr_t)addr + bytes + p - 1) & ~(p - 1);
    if (o->hi == 0 || lo < o->lo)
        o->lo = lo;
    if (hi > o->hi)
        o->hi = hi;
}

void eg_orphan_remap(eg_table_t *t)
{
    for (int k = 0; k < EG_ORPHAN_KINDS; k++) {
        eg_orphan_t *o = &t->orphans[k];
        if (o->hi == 0 || o->mapped)
            continue;
        /* never over a mapping made since the free (another thread's) */
        void *m = mmap((void *)o->lo, o->hi - o->lo, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (m == MAP_FAILED)
            continue;
        if ((uintptr_t)m != o->lo) { /* a kernel without MAP_FIXED_NOREPLACE placed it elsewhere */
            munmap(m, o->hi - o->lo);
            continue;
        }
        o->mapped = 1;
    }
}

void eg_orphan_free(eg_table_t *t)
{
    for (int k = 0; k < EG_ORPHAN_KINDS; k++) {
        eg_orphan_t *o = &t->orphans[k];
        if (o->mapped)
            munmap((void *)o->lo, o->hi - o->lo);
        *o = (eg_orphan_t){0};
    }
}
