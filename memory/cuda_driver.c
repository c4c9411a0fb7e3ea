#include "memory/cuda_driver.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

engram_cu_driver_t engram_cu;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256]; /* empty when every entry point was found */

static void lookup(void)
{
#define ENGRAM_CU_LOOKUP(f)                                                                                  \
    if (failure[0] == 0) {                                                                                   \
        enum cudaDriverEntryPointQueryResult q;                                                              \
        if (cudaGetDriverEntryPointByVersion(#f, (void **)&engram_cu.f, ENGRAM_CUDA_DRIVER_ABI, cudaEnableDefault, \
                                             &q) != cudaSuccess ||                                           \
            q != cudaDriverEntryPointSuccess)                                                                \
            snprintf(failure, sizeof(failure), "the CUDA driver has no entry point %s (ABI %d)", #f,          \
                     ENGRAM_CUDA_DRIVER_ABI);                                                                \
    }
    ENGRAM_CU_FUNCS(ENGRAM_CU_LOOKUP)
#undef ENGRAM_CU_LOOKUP
}

bool engram_cu_driver_load(const char **why)
{
    pthread_once(&once, lookup);
    if (failure[0] != 0) {
        if (why != NULL)
            *why = failure;
        return false;
    }
    return true;
}

const char *engram_cu_str(CUresult r)
{
    const char *s = NULL;
    if (!engram_cu_driver_load(NULL) || engram_cu.cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL)
        return "unknown CUDA error";
    return s;
}

CUresult engram_cu_import_fd(int fd, CUmemGenericAllocationHandle *handle,
                             CUmemAllocationProp *prop)
{
    CUmemGenericAllocationHandle h;
    CUresult r = engram_cu.cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != CUDA_SUCCESS)
        return r;
    CUmemAllocationProp p = {0};
    r = engram_cu.cuMemGetAllocationPropertiesFromHandle(&p, h);
    if (r != CUDA_SUCCESS) {
        engram_cu.cuMemRelease(h);
        return r;
    }
    *handle = h;
    *prop = p;
    return CUDA_SUCCESS;
}
