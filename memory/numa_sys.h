/* NUMA placement through the kernel's own interface (get_mempolicy, mbind,
 * getcpu and /sys/devices/system/node), so libengram needs no libnuma. */
#ifndef ENGRAM_MEMORY_NUMA_SYS_H
#define ENGRAM_MEMORY_NUMA_SYS_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* The largest node id engram places on (config key numa_node: -1..1023). */
#define ENGRAM_NUMA_MAX_NODES 1024

/* false when the kernel has no NUMA policy support (get_mempolicy: ENOSYS). */
bool engram_numa_available(void);
/* The node of the CPU the calling thread runs on; -1 when unknown. */
int engram_numa_current_node(void);
/* Whether `node` is a node with memory (/sys/.../node/has_memory); also
 * the highest such node into *max_node (-1 when the list is unreadable). */
bool engram_numa_has_memory(int node, int *max_node);
/* The CPUs of `node` into *set; their count, or -1 (set empty) when the
 * machine does not say (no such node, no sysfs). */
int engram_numa_node_cpus(int node, cpu_set_t *set);
/* MPOL_PREFERRED for [addr, addr+size) on `node`; 0 or an errno. */
int engram_numa_prefer(void *addr, size_t size, int node);

#endif
