/*
 * hook_lookup.c - the roads by which programs obtain function pointers:
 * dlsym on a library handle (ctypes, pynccl, SGLang's CudaRTLibrary, the
 * CUDA runtime finding its driver), cuGetProcAddress (the runtime, static
 * runtimes such as NCCL's and cuBLAS's), and cudaGetDriverEntryPoint
 * (PyTorch's expandable segments).
 *
 * Each calls the real lookup first and then, where the answer is the real
 * function behind one of our hooks, hands back the hook (registry.c), so that
 * calls made through the pointer are traced like direct ones and the hook
 * calls exactly the function the program would have called. The CUDA
 * lookups are recorded (layer driver/runtime, role lookup; the view
 * driver_lookups): ptr is the pointer the real lookup returned, arg0 the
 * version asked for, flags the flags, arg1 whether cutrace substituted its
 * hook, arg2 the length of the symbol name, arg3 the query status, and the
 * blob holds the name (first 64 bytes).
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* declares cuGetProcAddress (v1) too */
#define CUDA_ENABLE_DEPRECATED      1 /* cudaGetDriverEntryPoint */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <string.h>

#include "../core/hook.h"
#include "../core/registry.h"

/* Called by the dlsym entry (hook_dlsym.S) for real library handles only. */
void *ct_dlsym_handle(void *handle, const char *name);

void *ct_dlsym_handle(void *handle, const char *name)
{
    if (!__atomic_load_n(&ct_real_dlsym, __ATOMIC_ACQUIRE))
        ct_dlsym_init();
    if (!ct_real_dlsym)
        return NULL;
    return ct_registry_for_symbol(name, ct_real_dlsym(handle, name));
}

__attribute__((constructor)) static void lookup_load(void)
{
    ct_dlsym_init();
}

/* Records a lookup and swaps the pointer it found for our hook where one applies. */
static void finish_lookup(struct ct_event *ev, int ok, const char *symbol, void **pfn,
                          uint64_t version, uint64_t flags, uint64_t status)
{
    void *found = (ok && pfn) ? *pfn : NULL;
    void *given = ct_registry_for_driver_pointer(found);
    if (given != found)
        *pfn = given;
    ev->rec.ptr = ct_addr(found);
    ev->rec.arg[0] = version;
    ev->rec.arg[1] = given != found;
    ev->rec.arg[3] = status;
    ev->rec.flags = flags;
    if (symbol) {
        char name[CT_IPC_HANDLE_BYTES] = {0};
        size_t len = strnlen(symbol, sizeof name);
        memcpy(name, symbol, len);
        ev->rec.arg[2] = len;
        ct_event_set_handle(ev, name);
    }
}

CT_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                               cuuint64_t flags,
                                               CUdriverProcAddressQueryResult *symbolStatus)
{
    CT_REAL(cuGetProcAddress_v2);
    CT_TRACE(CT_API_cuGetProcAddress_v2, CUresult, CUDA_ERROR_NOT_FOUND,
             real(symbol, pfn, cudaVersion, flags, symbolStatus),
             finish_lookup(&ev, rc == CUDA_SUCCESS, symbol, pfn, (uint64_t)cudaVersion, flags,
                           symbolStatus ? (uint64_t)*symbolStatus : 0));
}

CT_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                            cuuint64_t flags)
{
    CT_REAL(cuGetProcAddress);
    CT_TRACE(CT_API_cuGetProcAddress, CUresult, CUDA_ERROR_NOT_FOUND,
             real(symbol, pfn, cudaVersion, flags),
             finish_lookup(&ev, rc == CUDA_SUCCESS, symbol, pfn, (uint64_t)cudaVersion, flags, 0));
}

CT_EXPORT cudaError_t CUDARTAPI
cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                        enum cudaDriverEntryPointQueryResult *status)
{
    CT_REAL(cudaGetDriverEntryPoint);
    CT_TRACE(CT_API_cudaGetDriverEntryPoint, cudaError_t, cudaErrorInitializationError,
             real(symbol, funcPtr, flags, status),
             finish_lookup(&ev, rc == cudaSuccess, symbol, funcPtr, 0, flags,
                           status ? (uint64_t)*status : 0));
}

CT_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    CT_REAL(cudaGetDriverEntryPointByVersion);
    CT_TRACE(CT_API_cudaGetDriverEntryPointByVersion, cudaError_t, cudaErrorInitializationError,
             real(symbol, funcPtr, cudaVersion, flags, status),
             finish_lookup(&ev, rc == cudaSuccess, symbol, funcPtr, cudaVersion, flags,
                           status ? (uint64_t)*status : 0));
}
