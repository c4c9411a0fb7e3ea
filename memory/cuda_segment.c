/* CUDA segments: cuMemCreate allocations, mapped in reserved virtual ranges
 * and shared as POSIX fds. The driver API is reached through the runtime's
 * cudaGetDriverEntryPointByVersion, so binaries link only cudart and run
 * wherever the real driver is installed. */
#include "memory/cuda_segment.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <unistd.h>

#include "hal/log.h"
#include "memory/cuda_driver.h"

/* Every path that reaches a driver call went through this first (a
 * segment exists only after one). */
static engram_status_t drv_ready(void)
{
    cudaError_t ce = cudaFree(NULL); /* initializes the runtime, the driver and the current device */
    if (ce != cudaSuccess)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment: CUDA runtime unavailable: %s",
                            cudaGetErrorString(ce));
    const char *why = NULL;
    if (!engram_cu_driver_load(&why))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment: %s", why);
    return ENGRAM_OK;
}

typedef struct cuda_segment {
    engram_segment_t seg;
    CUmemGenericAllocationHandle handle;
    int fd;         /* exported fd, owned; -1 until exported and for imports */
    bool own_range; /* the virtual range is ours to free (not a caller's reservation) */
} cuda_segment_t;

static engram_status_t resolve_device(int requested, CUdevice *dev, int *ordinal)
{
    int ord = requested;
    if (ord < 0) {
        cudaError_t ce = cudaGetDevice(&ord);
        if (ce != cudaSuccess)
            return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment: no current device: %s", cudaGetErrorString(ce));
    }
    CUresult r = engram_cu.cuDeviceGet(dev, ord);
    if (r != CUDA_SUCCESS)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "cuda segment: device %d: %s", ord, engram_cu_str(r));
    *ordinal = ord;
    return ENGRAM_OK;
}

static int dev_attr(CUdevice dev, CUdevice_attribute a)
{
    int v = 0;
    return engram_cu.cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : 0;
}

/* The GPU's host NUMA node; 0 where the system has no NUMA (cuMemCreate's rule). */
static int gpu_numa_node(CUdevice dev)
{
    int v = -1;
    if (engram_cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS || v < 0)
        return 0;
    return v;
}

static CUmemAllocationProp make_prop(engram_mem_kind_t kind, int ordinal, int numa_node)
{
    CUmemAllocationProp p = {0};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p.location.type = kind == ENGRAM_MEM_CUDA_DEVICE ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST_NUMA;
    p.location.id = kind == ENGRAM_MEM_CUDA_DEVICE ? ordinal : numa_node;
    return p;
}

static engram_status_t prop_granularity(const CUmemAllocationProp *p, size_t *out)
{
    CUresult r = engram_cu.cuMemGetAllocationGranularity(out, p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment: allocation granularity (location type %d): %s",
                            (int)p->location.type, engram_cu_str(r));
    return ENGRAM_OK;
}

engram_status_t engram_cuda_granularity(int device, size_t *out)
{
    engram_status_t st = drv_ready();
    CUdevice dev;
    int ord;
    if (st == ENGRAM_OK)
        st = resolve_device(device, &dev, &ord);
    if (st != ENGRAM_OK)
        return st;
    CUmemAllocationProp pd = make_prop(ENGRAM_MEM_CUDA_DEVICE, ord, 0);
    CUmemAllocationProp ph = make_prop(ENGRAM_MEM_CUDA_HOST_NUMA, ord, gpu_numa_node(dev));
    size_t gd = 0, gh = 0;
    st = prop_granularity(&pd, &gd);
    if (st == ENGRAM_OK)
        st = prop_granularity(&ph, &gh);
    if (st == ENGRAM_OK)
        *out = gd > gh ? gd : gh; /* both are powers of two */
    return st;
}

engram_status_t engram_cuda_reserve(size_t bytes, void **out)
{
    engram_status_t st = drv_ready();
    size_t gran = 0;
    if (st == ENGRAM_OK)
        st = engram_cuda_granularity(-1, &gran);
    if (st != ENGRAM_OK)
        return st;
    CUdeviceptr p = 0;
    CUresult r = engram_cu.cuMemAddressReserve(&p, bytes, gran, 0, 0);
    if (r != CUDA_SUCCESS)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cuda segment: reserving %zu bytes of address space: %s", bytes,
                            engram_cu_str(r));
    *out = (void *)(uintptr_t)p;
    return ENGRAM_OK;
}

void engram_cuda_unreserve(void *addr, size_t bytes)
{
    if (addr != NULL)
        engram_cu.cuMemAddressFree((CUdeviceptr)(uintptr_t)addr, bytes);
}

/* Access for every local GPU that can reach the memory, and for the CPU
 * when it is host memory (where the driver grants it: the GPU path needs
 * only the GPUs, so a refusal costs CPU access alone, logged once). */
static engram_status_t set_access(CUdeviceptr addr, size_t size, const CUmemAllocationProp *p, bool read_only)
{
    static int cpu_access_logged;
    CUmemAccess_flags flags = read_only ? CU_MEM_ACCESS_FLAGS_PROT_READ : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    int count = 0;
    CUresult r = engram_cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment: device count: %s", engram_cu_str(r));
    CUmemAccessDesc *desc = calloc((size_t)count + 1, sizeof(*desc));
    if (desc == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cuda segment: out of memory for %d access descriptors", count + 1);
    int n = 0;
    bool device_mem = p->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    for (int d = 0; d < count; d++) {
        int peer = 1;
        if (device_mem && d != p->location.id)
            engram_cu.cuDeviceCanAccessPeer(&peer, d, p->location.id);
        if (peer) {
            desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            desc[n].location.id = d;
            desc[n++].flags = flags;
        }
    }
    engram_status_t st = ENGRAM_OK;
    if (!device_mem) {
        desc[n].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        desc[n].location.id = p->location.id;
        desc[n].flags = flags;
        r = engram_cu.cuMemSetAccess(addr, size, desc, (size_t)n + 1);
        if (r == CUDA_SUCCESS)
            goto free_desc;
        if (__atomic_exchange_n(&cpu_access_logged, 1, __ATOMIC_RELAXED) == 0)
            ENGRAM_INFO("cuda segment: no CPU access to HOST_NUMA mappings (%s); GPUs only", engram_cu_str(r));
    }
    r = engram_cu.cuMemSetAccess(addr, size, desc, (size_t)n);
    if (r != CUDA_SUCCESS)
        st = ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment: granting access to %d GPUs: %s", n, engram_cu_str(r));
free_desc:
    free(desc);
    return st;
}

/* Maps the allocation at addr (inside a reserved range) and grants access. */
static engram_status_t map_at(CUmemGenericAllocationHandle h, CUdeviceptr addr, size_t size,
                              const CUmemAllocationProp *p, bool read_only)
{
    CUresult r = engram_cu.cuMemMap(addr, size, 0, h, 0);
    if (r != CUDA_SUCCESS)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cuda segment: mapping %zu bytes at %#llx: %s", size,
                            (unsigned long long)addr, engram_cu_str(r));
    engram_status_t st = set_access(addr, size, p, read_only);
    if (st != ENGRAM_OK)
        engram_cu.cuMemUnmap(addr, size);
    return st;
}

/* The last step of alloc and import: maps cs->handle (seg.size bytes, read
 * only when seg.read_only) at fixed_addr, or at a range reserved here when
 * it is NULL, and publishes seg (its addr and priv filled in here) as
 * cs->seg in *out. On failure the range, the handle and cs are released;
 * `what` names the caller in errors. */
static engram_status_t map_segment(cuda_segment_t *cs, engram_segment_t seg, size_t gran,
                                   const CUmemAllocationProp *prop, void *fixed_addr, const char *what,
                                   engram_segment_t **out)
{
    CUdeviceptr addr = (CUdeviceptr)(uintptr_t)fixed_addr;
    engram_status_t st = ENGRAM_OK;
    if (fixed_addr == NULL) {
        CUresult r = engram_cu.cuMemAddressReserve(&addr, seg.size, gran, 0, 0);
        if (r != CUDA_SUCCESS)
            st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "%s: reserving %zu bytes: %s", what, seg.size, engram_cu_str(r));
    }
    if (st == ENGRAM_OK) {
        st = map_at(cs->handle, addr, seg.size, prop, seg.read_only);
        if (st != ENGRAM_OK && fixed_addr == NULL)
            engram_cu.cuMemAddressFree(addr, seg.size);
    }
    if (st != ENGRAM_OK) {
        engram_cu.cuMemRelease(cs->handle);
        free(cs);
        return st;
    }
    cs->fd = -1;
    cs->own_range = fixed_addr == NULL;
    seg.addr = (void *)(uintptr_t)addr;
    seg.priv = cs;
    cs->seg = seg;
    *out = &cs->seg;
    return ENGRAM_OK;
}

static engram_status_t check_support(engram_mem_kind_t kind, CUdevice dev, int ordinal)
{
    if (!dev_attr(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment: device %d has no virtual memory management",
                            ordinal);
    if (!dev_attr(dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment: device %d cannot export POSIX fds", ordinal);
    if (kind == ENGRAM_MEM_CUDA_HOST_NUMA &&
        !dev_attr(dev, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED))
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment: device %d has no HOST_NUMA cuMem allocations",
                            ordinal);
    return ENGRAM_OK;
}

static engram_status_t round_up(size_t bytes, size_t gran, size_t *out)
{
    if (bytes > SIZE_MAX - (gran - 1))
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "cuda segment: %zu bytes overflow rounded to %zu", bytes, gran);
    *out = (bytes + gran - 1) / gran * gran;
    return ENGRAM_OK;
}

static const engram_segment_ops_t *ops_of(engram_mem_kind_t kind)
{
    return kind == ENGRAM_MEM_CUDA_DEVICE ? &engram_cuda_device_segment_ops : &engram_cuda_host_numa_segment_ops;
}

static engram_status_t cuda_alloc(engram_mem_kind_t kind, const engram_segment_params_t *params,
                                  engram_segment_t **out)
{
    if (params == NULL || out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "cuda segment alloc: params and out must not be NULL");
    if (params->size < sizeof(*params))
        return ENGRAM_ERROR(ENGRAM_ERR_VERSION, "cuda segment alloc: params.size %zu < %zu", params->size,
                            sizeof(*params));
    if (params->bytes == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "cuda segment alloc: bytes must be > 0");
    CUdevice dev;
    int ord;
    engram_status_t st = drv_ready();
    if (st == ENGRAM_OK)
        st = resolve_device(params->device, &dev, &ord);
    if (st == ENGRAM_OK)
        st = check_support(kind, dev, ord);
    if (st != ENGRAM_OK)
        return st;
    int node = kind == ENGRAM_MEM_CUDA_HOST_NUMA ? (params->numa_node >= 0 ? params->numa_node : gpu_numa_node(dev))
                                                  : -1;
    CUmemAllocationProp prop = make_prop(kind, ord, node);
    size_t gran = 0, size = 0;
    st = prop_granularity(&prop, &gran);
    if (st == ENGRAM_OK)
        st = round_up(params->bytes, gran, &size);
    if (st != ENGRAM_OK)
        return st;
    cuda_segment_t *cs = calloc(1, sizeof(*cs));
    if (cs == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cuda segment alloc: out of memory for the descriptor");
    CUresult r = engram_cu.cuMemCreate(&cs->handle, size, &prop, 0);
    if (r != CUDA_SUCCESS) {
        free(cs);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cuda segment alloc: cuMemCreate of %zu bytes (%s %d): %s", size,
                            kind == ENGRAM_MEM_CUDA_DEVICE ? "device" : "host NUMA node", prop.location.id,
                            engram_cu_str(r));
    }
    const engram_segment_t seg = {.ops = ops_of(kind), .kind = kind, .size = size, .numa_node = node, .device = ord};
    return map_segment(cs, seg, gran, &prop, NULL, "cuda segment alloc", out);
}

static engram_status_t device_alloc(const engram_segment_params_t *params, engram_segment_t **out)
{
    return cuda_alloc(ENGRAM_MEM_CUDA_DEVICE, params, out);
}

static engram_status_t host_numa_alloc(const engram_segment_params_t *params, engram_segment_t **out)
{
    return cuda_alloc(ENGRAM_MEM_CUDA_HOST_NUMA, params, out);
}

static engram_status_t cuda_export_fd(engram_segment_t *seg, int *fd)
{
    if (seg == NULL || fd == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "cuda segment export: seg and fd must not be NULL");
    cuda_segment_t *cs = seg->priv;
    if (seg->imported)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "cuda segment export: an imported segment cannot be re-exported");
    if (cs->fd < 0) {
        int handle_fd = -1;
        CUresult r = engram_cu.cuMemExportToShareableHandle(&handle_fd, cs->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                      0);
        if (r != CUDA_SUCCESS)
            return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED, "cuda segment export: %s", engram_cu_str(r));
        cs->fd = handle_fd;
    }
    *fd = cs->fd;
    return ENGRAM_OK;
}

static engram_status_t cuda_import_fd(int fd, size_t bytes, bool read_only, void *fixed_addr, engram_segment_t **out)
{
    if (out == NULL || bytes == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "cuda segment import: out must be set and bytes > 0");
    engram_status_t st = drv_ready();
    if (st != ENGRAM_OK)
        return st;
    cuda_segment_t *cs = calloc(1, sizeof(*cs));
    if (cs == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cuda segment import: out of memory for the descriptor");
    CUmemAllocationProp prop;
    size_t gran = 0, size = 0;
    CUresult r = engram_cu_import_fd(fd, &cs->handle, &prop);
    if (r != CUDA_SUCCESS) {
        st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "cuda segment import: fd %d: %s", fd, engram_cu_str(r));
        goto free_cs;
    }
    st = prop_granularity(&prop, &gran);
    if (st == ENGRAM_OK)
        st = round_up(bytes, gran, &size);
    if (st == ENGRAM_OK && (uintptr_t)fixed_addr % gran != 0)
        st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "cuda segment import: fixed_addr %p is not aligned to %zu bytes",
                          fixed_addr, gran);
    if (st != ENGRAM_OK)
        goto release_handle;
    engram_mem_kind_t kind =
        prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? ENGRAM_MEM_CUDA_DEVICE : ENGRAM_MEM_CUDA_HOST_NUMA;
    const engram_segment_t seg = {.ops = ops_of(kind), .kind = kind, .size = size,
                                  .numa_node = kind == ENGRAM_MEM_CUDA_HOST_NUMA ? prop.location.id : -1,
                                  .device = kind == ENGRAM_MEM_CUDA_DEVICE ? prop.location.id : -1,
                                  .imported = true, .read_only = read_only};
    return map_segment(cs, seg, gran, &prop, fixed_addr, "cuda segment import", out);
release_handle:
    engram_cu.cuMemRelease(cs->handle);
free_cs:
    free(cs);
    return st;
}

static void cuda_free(engram_segment_t *seg)
{
    if (seg == NULL)
        return;
    cuda_segment_t *cs = seg->priv;
    CUdeviceptr addr = (CUdeviceptr)(uintptr_t)seg->addr;
    engram_cu.cuMemUnmap(addr, seg->size);
    if (cs->own_range)
        engram_cu.cuMemAddressFree(addr, seg->size);
    engram_cu.cuMemRelease(cs->handle);
    if (cs->fd >= 0)
        close(cs->fd);
    free(cs);
}

const engram_segment_ops_t engram_cuda_device_segment_ops = {
    .size = sizeof(engram_segment_ops_t),
    .name = "cuda_device",
    .kind = ENGRAM_MEM_CUDA_DEVICE,
    .alloc = device_alloc,
    .export_fd = cuda_export_fd,
    .import_fd = cuda_import_fd,
    .free = cuda_free,
};

const engram_segment_ops_t engram_cuda_host_numa_segment_ops = {
    .size = sizeof(engram_segment_ops_t),
    .name = "cuda_host_numa",
    .kind = ENGRAM_MEM_CUDA_HOST_NUMA,
    .alloc = host_numa_alloc,
    .export_fd = cuda_export_fd,
    .import_fd = cuda_import_fd,
    .free = cuda_free,
};
