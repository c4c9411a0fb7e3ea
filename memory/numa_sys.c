#include "memory/numa_sys.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
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

/* Calls fn(lo, hi, arg) for each range of a kernel cpulist/nodelist
 * ("0-1,3\n") until fn returns false. */
static void for_each_range(const char *line, bool (*fn)(long lo, long hi, void *arg), void *arg)
{
    for (const char *p = line; *p && *p != '\n';) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p)
            return;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        if (!fn(lo, hi, arg))
            return;
        p = *end == ',' ? end + 1 : end;
    }
}

/* The first line of a sysfs file into line; false when unreadable. */
static bool read_line(const char *path, char *line, size_t size)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    bool ok = fgets(line, (int)size, f) != NULL;
    fclose(f);
    return ok;
}

typedef struct node_search {
    int node;
    bool found;
    int max_node;
} node_search_t;

static bool note_nodes(long lo, long hi, void *arg)
{
    node_search_t *s = arg;
    s->found = s->found || (s->node >= lo && s->node <= hi);
    if (hi > s->max_node)
        s->max_node = (int)hi;
    return true;
}

bool engram_numa_has_memory(int node, int *max_node)
{
    node_search_t s = {.node = node, .found = false, .max_node = -1};
    char line[4096];
    if (read_line("/sys/devices/system/node/has_memory", line, sizeof(line)))
        for_each_range(line, note_nodes, &s);
    *max_node = s.max_node;
    return s.found;
}

static bool add_cpus(long lo, long hi, void *arg)
{
    for (long c = lo < 0 ? 0 : lo; c <= hi && c < CPU_SETSIZE; c++)
        CPU_SET((int)c, (cpu_set_t *)arg);
    return true;
}

int engram_numa_node_cpus(int node, cpu_set_t *set)
{
    CPU_ZERO(set);
    if (node < 0 || node >= ENGRAM_NUMA_MAX_NODES)
        return -1;
    char path[96], line[4096];
    snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
    if (!read_line(path, line, sizeof(line)))
        return -1;
    for_each_range(line, add_cpus, set);
    return CPU_COUNT(set);
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
