/* Host segments: an anonymous memfd (never a path), mapped MAP_SHARED so the
 * same pages can be mapped by the other local ranks through the exported fd. */
#include "memory/host_segment.h"

#include <errno.h>
#include <linux/magic.h>
#include <linux/memfd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "hal/config_keys.h"
#include "hal/log.h"
#include "memory/numa_sys.h"

#define HUGE_PAGE_BYTES ((size_t)2 << 20)

typedef struct host_segment {
    engram_segment_t seg;
    int fd;     /* owned memfd; -1 for imported segments (the importer's fd is not ours) */
    bool fixed; /* mapped into a caller's reserved range */
} host_segment_t;

/* Logs `msg` at INFO the first time `flag` is seen clear, so a machine
 * without huge pages or NUMA says so once per process, not once per segment. */
static void log_once(int *flag, const char *msg, const char *detail)
{
    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED) == 0)
        ENGRAM_INFO("%s (%s)", msg, detail);
}

static engram_status_t round_up(size_t bytes, size_t page, size_t *out)
{
    if (bytes > SIZE_MAX - (page - 1))
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "host segment: %zu bytes overflow when rounded to %zu-byte pages",
                            bytes, page);
    *out = (bytes + page - 1) / page * page;
    return ENGRAM_OK;
}

static int numa_unavailable_logged;

/* Resolves the node to place the segment on; -1 (no placement) when the
 * machine cannot do NUMA placement. An explicit node that does not exist
 * is the caller's error. */
static engram_status_t numa_resolve(int requested, int *node)
{
    *node = -1;
    if (!engram_numa_available()) {
        log_once(&numa_unavailable_logged, "host segments: NUMA placement unavailable, using default placement",
                 "get_mempolicy: the kernel has no NUMA support");
        return ENGRAM_OK;
    }
    if (requested == -1) {
        *node = engram_numa_current_node();
        return ENGRAM_OK;
    }
    int max_node;
    if (!engram_numa_has_memory(requested, &max_node))
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment: NUMA node %d is not a node with memory (max node %d)",
                            requested, max_node);
    *node = requested;
    return ENGRAM_OK;
}

/* Preferred, not bound: a full node spills to its neighbours instead of
 * raising SIGBUS on first touch of a shared page. Failure (e.g. mbind
 * filtered by a container's seccomp policy) only loses placement. */
static int numa_place(void *addr, size_t size, int node)
{
    int err = engram_numa_prefer(addr, size, node);
    if (err != 0) {
        log_once(&numa_unavailable_logged, "host segments: mbind failed, using default placement", strerror(err));
        return -1;
    }
    return node;
}

/* Creates, sizes and maps a memfd; on failure returns errno and leaves
 * nothing open. */
static int map_memfd(unsigned flags, size_t size, int *fd_out, void **addr_out)
{
    int fd = memfd_create("engram_host_segment", MFD_CLOEXEC | flags);
    if (fd < 0)
        return errno;
    void *addr = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0)
        addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        int err = errno;
        close(fd);
        return err;
    }
    *fd_out = fd;
    *addr_out = addr;
    return 0;
}

static int huge_fallback_logged;

static engram_status_t host_alloc(const engram_segment_params_t *params, engram_segment_t **out)
{
    if (params == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment alloc: params and out must not be NULL");
    if (params->size < sizeof(*params))
        return ENGRAM_ERROR(ENGRAM_ERR_VERSION, "host segment alloc: params.size %zu < %zu (caller built against "
                            "an older header?)", params->size, sizeof(*params));
    if (params->bytes == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment alloc: bytes must be > 0");
    if (params->huge != ENGRAM_HUGE_AUTO && params->huge != ENGRAM_HUGE_ON && params->huge != ENGRAM_HUGE_OFF)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment alloc: huge = %d is not auto(0), on(1) or off(2)",
                            params->huge);
    if (params->numa_node < -1)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment alloc: numa_node %d (want -1 or a node id)",
                            params->numa_node);
    int node;
    engram_status_t st = numa_resolve(params->numa_node, &node);
    if (st != ENGRAM_OK)
        return st;

    host_segment_t *hs = calloc(1, sizeof(*hs));
    if (hs == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "host segment alloc: out of memory for the descriptor");
    size_t size = 0;
    void *addr = NULL;
    int fd = -1;
    bool huge = false;
    if (params->huge != ENGRAM_HUGE_OFF) {
        st = round_up(params->bytes, HUGE_PAGE_BYTES, &size);
        if (st != ENGRAM_OK)
            goto free_hs;
        int err = map_memfd(MFD_HUGETLB | MFD_HUGE_2MB, size, &fd, &addr);
        huge = err == 0;
        if (!huge && params->huge == ENGRAM_HUGE_ON) {
            st = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                              "host segment alloc: huge_pages=on but %zu bytes of 2 MiB huge pages could not be "
                              "mapped (%s); reserve them (vm.nr_hugepages) or set huge_pages=auto|off",
                              size, strerror(err));
            goto free_hs;
        }
        if (!huge)
            log_once(&huge_fallback_logged, "host segments: 2 MiB huge pages unavailable, using normal pages",
                     strerror(err));
    }
    if (!huge) {
        st = round_up(params->bytes, (size_t)sysconf(_SC_PAGESIZE), &size);
        if (st != ENGRAM_OK)
            goto free_hs;
        int err = map_memfd(0, size, &fd, &addr);
        if (err != 0) {
            st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "host segment alloc: mapping %zu bytes failed: %s", size,
                              strerror(err));
            goto free_hs;
        }
    }
    /* Placed before first touch, so the pages are faulted on the node. */
    if (node >= 0)
        node = numa_place(addr, size, node);

    hs->fd = fd;
    hs->seg = (engram_segment_t){.ops = &engram_host_segment_ops, .kind = ENGRAM_MEM_HOST, .addr = addr,
                                 .size = size, .numa_node = node, .device = -1, .huge_pages = huge, .priv = hs};
    *out = &hs->seg;
    return ENGRAM_OK;
free_hs:
    free(hs);
    return st;
}

static engram_status_t host_export_fd(engram_segment_t *seg, int *fd)
{
    if (seg == NULL || fd == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment export: seg and fd must not be NULL");
    host_segment_t *hs = seg->priv;
    if (hs->fd < 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment export: an imported segment cannot be re-exported");
    *fd = hs->fd;
    return ENGRAM_OK;
}

static engram_status_t host_import_fd(int fd, size_t bytes, bool read_only, void *fixed_addr,
                                      engram_segment_t **out)
{
    if (out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment import: out must not be NULL");
    if (bytes == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment import: bytes must be > 0");
    struct stat st_fd;
    struct statfs st_fs;
    if (fstat(fd, &st_fd) != 0 || fstatfs(fd, &st_fs) != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment import: fd %d: %s", fd, strerror(errno));
    bool huge = st_fs.f_type == HUGETLBFS_MAGIC;
    size_t page = huge ? (size_t)st_fs.f_bsize : (size_t)sysconf(_SC_PAGESIZE);
    size_t size = 0;
    engram_status_t st = round_up(bytes, page, &size);
    if (st != ENGRAM_OK)
        return st;
    if (size > (uint64_t)st_fd.st_size)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment import: %zu bytes (%zu page-rounded) exceed fd %d's "
                            "size %lld", bytes, size, fd, (long long)st_fd.st_size);
    if ((uintptr_t)fixed_addr % page != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "host segment import: fixed_addr %p is not aligned to the "
                            "segment's %zu-byte pages", fixed_addr, page);

    host_segment_t *hs = calloc(1, sizeof(*hs));
    if (hs == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "host segment import: out of memory for the descriptor");
    int prot = read_only ? PROT_READ : PROT_READ | PROT_WRITE;
    /* Populated up front, as a NIC's memory registration maps every page:
     * a get must not take a page fault on the fetch path. */
    int flags = MAP_SHARED | MAP_POPULATE | (fixed_addr != NULL ? MAP_FIXED : 0);
    void *addr = mmap(fixed_addr, size, prot, flags, fd, 0);
    if (addr == MAP_FAILED) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "host segment import: mapping %zu bytes of fd %d at %p failed: %s",
                          size, fd, fixed_addr, strerror(errno));
        free(hs);
        return st;
    }
    hs->fd = -1;
    hs->fixed = fixed_addr != NULL;
    hs->seg = (engram_segment_t){.ops = &engram_host_segment_ops, .kind = ENGRAM_MEM_HOST, .addr = addr,
                                 .size = size, .numa_node = -1, .device = -1, .huge_pages = huge,
                                 .imported = true, .read_only = read_only, .priv = hs};
    *out = &hs->seg;
    return ENGRAM_OK;
}

static void host_free(engram_segment_t *seg)
{
    if (seg == NULL)
        return;
    host_segment_t *hs = seg->priv;
    /* A segment placed in a caller's reserved range hands its pages back to
     * the reservation (PROT_NONE) rather than leaving a hole another mmap
     * could take before the caller releases the range; so free such
     * segments before unmapping the reservation. */
    if (hs->fixed)
        mmap(seg->addr, seg->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    else
        munmap(seg->addr, seg->size);
    if (hs->fd >= 0)
        close(hs->fd);
    free(hs);
}

const engram_segment_ops_t engram_host_segment_ops = {
    .size = sizeof(engram_segment_ops_t),
    .name = "host",
    .kind = ENGRAM_MEM_HOST,
    .alloc = host_alloc,
    .export_fd = host_export_fd,
    .import_fd = host_import_fd,
    .free = host_free,
};
