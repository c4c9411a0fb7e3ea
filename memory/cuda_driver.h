/* The CUDA driver API entry points engram's CUDA host code calls, found
 * through the runtime (cudaGetDriverEntryPointByVersion) so that binaries
 * link only cudart and run wherever a driver is installed: one table for
 * memory/cuda_segment.c and the NCCL RMA plugin, and the import of a cuMem
 * allocation shared as a POSIX fd. */
#ifndef ENGRAM_MEMORY_CUDA_DRIVER_H
#define ENGRAM_MEMORY_CUDA_DRIVER_H

#include <cuda.h>
#include <stdbool.h>

/* The driver ABI version every entry point is requested at: CUDA 12.0's,
 * the oldest engram supports (later drivers keep serving it, and a newer
 * version of a function would be asked for by raising this). */
#define ENGRAM_CUDA_DRIVER_ABI 12000

#define ENGRAM_CU_FUNCS(X)                                                                                   \
    X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDeviceCanAccessPeer)                      \
    X(cuMemGetAllocationGranularity) X(cuMemCreate) X(cuMemRelease) X(cuMemRetainAllocationHandle)           \
    X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle) X(cuMemGetAllocationPropertiesFromHandle) \
    X(cuMemGetAddressRange) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap)             \
    X(cuMemSetAccess) X(cuPointerGetAttribute) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) \
    X(cuLaunchKernel) X(cuGetErrorString) X(cuStreamWaitValue32) X(cuStreamWriteValue32)

#define ENGRAM_CU_FIELD(f) __typeof__(&f) f;
typedef struct engram_cu_driver {
    ENGRAM_CU_FUNCS(ENGRAM_CU_FIELD)
} engram_cu_driver_t;
#undef ENGRAM_CU_FIELD

/* Looks the table up on the first call (creating no context: the caller
 * decides which device to initialize); true once every entry point was
 * found, else false with *why saying which is missing (text that lives as
 * long as the process). */
bool engram_cu_driver_load(const char **why);

/* The table: read only after engram_cu_driver_load returned true (in this
 * thread, or in one this thread synchronized with). */
extern engram_cu_driver_t engram_cu;

/* The driver's text for r ("unknown CUDA error" when it has none). */
const char *engram_cu_str(CUresult r);

/* The allocation behind `fd` (exported with cuMemExportToShareableHandle
 * as a POSIX fd): *handle, released with cuMemRelease, and its properties.
 * CUDA_SUCCESS, or the failing call's result with nothing retained. */
CUresult engram_cu_import_fd(int fd, CUmemGenericAllocationHandle *handle,
                             CUmemAllocationProp *prop);

#endif
