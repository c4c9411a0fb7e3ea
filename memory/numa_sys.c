#include "memory/numa_sys.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* <numaif.h> comes with libnuma; the kernel's value is ABI. */
#define ENGRAM_MPOL_PREFERRED 1

enum { BITS_PER_WORD = sizeof(unsigned long) * CHAR_BIT };

bool engram_numa_available(void)
{
    int mode;
    return syscall(SYS_get_mempolicy, &mode, NULL, 0UL, NULL, 0UL) == 0 || errno != ENOSYS;
}

int engram_numa_current_node(void)
{
    unsigned cpu, node;
    if (syscall(SYS_getcpu, &cpu, &node, NULL) != 0)
        return -1;
    return (int)node;
}

/* Parses a kernel cpulist/nodelist ("0-1,3\n") for `node`. */
bool engram_numa_has_memory(int node, int *max_node)
{
    *max_node = -1;
    FILE *f = fopen("/sys/devices/system/node/has_memory", "re");
    if (f == NULL)
        return false;
    char line[4096];
    bool found = false;
    if (fgets(line, sizeof(line), f) != NULL) {
        for (char *p = line; *p && *p != '\n';) {
            char *end;
            long lo = strtol(p, &end, 10), hi = lo;
            if (end == p)
                break;
            if (*end == '-')
                hi = strtol(end + 1, &end, 10);
            found = found || (node >= lo && node <= hi);
            if (hi > *max_node)
                *max_node = (int)hi;
            p = *end == ',' ? end + 1 : end;
        }
    }
    fclose(f);
    return found;
}

int engram_numa_prefer(void *addr, size_t size, int node)
{
    if (node < 0 || node >= ENGRAM_NUMA_MAX_NODES)
        return EINVAL;
    unsigned long mask[ENGRAM_NUMA_MAX_NODES / BITS_PER_WORD] = {0};
    mask[node / BITS_PER_WORD] |= 1UL << (node % BITS_PER_WORD);
    /* maxnode counts bits plus one, as libnuma passes it. */
    if (syscall(SYS_mbind, addr, size, ENGRAM_MPOL_PREFERRED, mask, (unsigned long)ENGRAM_NUMA_MAX_NODES + 1, 0U) != 0)
        return errno;
    return 0;
}
