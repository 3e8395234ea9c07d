/*
 * hook_driver.c - the CUDA driver memory API (libcuda), one hook per call.
 *
 * Hooks carry the versioned symbol names the driver exports (cuMemAlloc_v2,
 * cuMemGetInfo_v2, cuIpcOpenMemHandle_v2, ...), which is what programs built
 * against cuda.h call, and what cuGetProcAddress hands out for the base
 * names. The same hook serves a direct call, a pointer from cuGetProcAddress
 * or cudaGetDriverEntryPoint, and a dlsym on libcuda (hook_lookup.c).
 *
 * The device of a driver call is the current context's (event.c asks
 * cuCtxGetDevice), or the device the call names (contexts, cuMemCreate at a
 * device location).
 *
 * Fields beyond the common ones (docs/schema.md):
 *   allocations and frees: ptr, size as in the runtime hooks; pitch:
 *     arg0 width, arg1 height, arg2 pitch, arg3 element size
 *   cuMemCreate: ptr = the physical handle, size, arg0 location id, arg1
 *     location type (1 = device; others are host memory), arg2 allocation
 *     type, arg3 requested shareable handle types; cuMemRelease: ptr handle
 *   cuMemAddressReserve: ptr the range, size, arg0 alignment, arg1 the
 *     address asked for; cuMemAddressFree: ptr, size
 *   cuMemMap: ptr, size, arg0 the physical handle, arg1 offset in it;
 *     cuMemUnmap: ptr, size; cuMemSetAccess: ptr, size, arg0 descriptor
 *     count, arg1 first descriptor's location id, arg2 its access flags
 *   cuMemExportToShareableHandle: arg0 the handle, arg1 the handle type;
 *     cuMemImportFromShareableHandle: ptr the new handle, arg1 the type,
 *     arg2 the OS handle (a file descriptor for POSIX_FILE_DESCRIPTOR)
 *   contexts: ptr the context, arg0 the device
 *   cuMemGetInfo_v2: arg0 free, arg1 total; IPC: the 64-byte handle
 *   synchronisations (role synchronize, CT_TRACE_BLOCKING: a process killed
 *     inside one says so): cuCtxSynchronize_v2 arg0 the context,
 *     cuStreamSynchronize stream, cuEventSynchronize arg0 the event
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* declares the _ptsz variants */
#include <cuda.h>
#include <stdint.h>

#include "../core/hook.h"

#define MISSING CUDA_ERROR_NOT_FOUND

/* The pointer or handle an allocation returned through `out`, or 0. */
#define MADE(out) ((rc == CUDA_SUCCESS && (out)) ? (uint64_t) * (out) : 0)

CT_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CT_REAL(cuMemAlloc_v2);
    CT_TRACE(CT_API_cuMemAlloc_v2, CUresult, MISSING, real(dptr, bytesize), {
        ev.rec.size = bytesize;
        ev.rec.ptr = MADE(dptr);
    });
}

CT_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
                                              size_t WidthInBytes, size_t Height,
                                              unsigned int ElementSizeBytes)
{
    CT_REAL(cuMemAllocPitch_v2);
    CT_TRACE(CT_API_cuMemAllocPitch_v2, CUresult, MISSING,
             real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes), {
                 bool made = rc == CUDA_SUCCESS && pPitch;
                 ev.rec.ptr = MADE(dptr);
                 ev.rec.size = (made ? *pPitch : WidthInBytes) * Height;
                 ev.rec.arg[0] = WidthInBytes;
                 ev.rec.arg[1] = Height;
                 ev.rec.arg[2] = made ? *pPitch : 0;
                 ev.rec.arg[3] = ElementSizeBytes;
             });
}

CT_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    CT_REAL(cuMemFree_v2);
    CT_TRACE(CT_API_cuMemFree_v2, CUresult, MISSING, real(dptr), { ev.rec.ptr = dptr; });
}

CT_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    CT_REAL(cuMemAllocManaged);
    CT_TRACE(CT_API_cuMemAllocManaged, CUresult, MISSING, real(dptr, bytesize, flags), {
        ev.rec.size = bytesize;
        ev.rec.flags = flags;
        ev.rec.ptr = MADE(dptr);
    });
}

static CUresult alloc_async(const void *caller, enum ct_api api, __typeof__(&cuMemAllocAsync) real,
                            CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    CT_TRACE_AS(caller, api, CUresult, MISSING, real(dptr, bytesize, stream), {
        ev.rec.size = bytesize;
        ev.rec.stream = ct_addr(stream);
        ev.rec.ptr = MADE(dptr);
    });
}

CT_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    CT_REAL(cuMemAllocAsync);
    return alloc_async(CT_CALLER, CT_API_cuMemAllocAsync, real, dptr, bytesize, hStream);
}

CT_EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                CUstream hStream)
{
    CT_REAL(cuMemAllocAsync_ptsz);
    return alloc_async(CT_CALLER, CT_API_cuMemAllocAsync_ptsz, real, dptr, bytesize, hStream);
}

static CUresult free_async(const void *caller, enum ct_api api, __typeof__(&cuMemFreeAsync) real,
                           CUdeviceptr dptr, CUstream stream)
{
    CT_TRACE_AS(caller, api, CUresult, MISSING, real(dptr, stream), {
        ev.rec.ptr = dptr;
        ev.rec.stream = ct_addr(stream);
    });
}

CT_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    CT_REAL(cuMemFreeAsync);
    return free_async(CT_CALLER, CT_API_cuMemFreeAsync, real, dptr, hStream);
}

CT_EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    CT_REAL(cuMemFreeAsync_ptsz);
    return free_async(CT_CALLER, CT_API_cuMemFreeAsync_ptsz, real, dptr, hStream);
}

static CUresult alloc_from_pool(const void *caller, enum ct_api api,
                                __typeof__(&cuMemAllocFromPoolAsync) real, CUdeviceptr *dptr,
                                size_t bytesize, CUmemoryPool pool, CUstream stream)
{
    CT_TRACE_AS(caller, api, CUresult, MISSING, real(dptr, bytesize, pool, stream), {
        ev.rec.size = bytesize;
        ev.rec.stream = ct_addr(stream);
        ev.rec.arg[0] = ct_addr(pool);
        ev.rec.ptr = MADE(dptr);
    });
}

CT_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                                   CUmemoryPool pool, CUstream hStream)
{
    CT_REAL(cuMemAllocFromPoolAsync);
    return alloc_from_pool(CT_CALLER, CT_API_cuMemAllocFromPoolAsync, real, dptr, bytesize, pool,
                           hStream);
}

CT_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                        CUmemoryPool pool, CUstream hStream)
{
    CT_REAL(cuMemAllocFromPoolAsync_ptsz);
    return alloc_from_pool(CT_CALLER, CT_API_cuMemAllocFromPoolAsync_ptsz, real, dptr, bytesize,
                           pool, hStream);
}

CT_EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    CT_REAL(cuMemAllocHost_v2);
    CT_TRACE(CT_API_cuMemAllocHost_v2, CUresult, MISSING, real(pp, bytesize), {
        ev.rec.size = bytesize;
        ev.rec.ptr = (rc == CUDA_SUCCESS && pp) ? ct_addr(*pp) : 0;
    });
}

CT_EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    CT_REAL(cuMemHostAlloc);
    CT_TRACE(CT_API_cuMemHostAlloc, CUresult, MISSING, real(pp, bytesize, Flags), {
        ev.rec.size = bytesize;
        ev.rec.flags = Flags;
        ev.rec.ptr = (rc == CUDA_SUCCESS && pp) ? ct_addr(*pp) : 0;
    });
}

CT_EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
    CT_REAL(cuMemFreeHost);
    CT_TRACE(CT_API_cuMemFreeHost, CUresult, MISSING, real(p), { ev.rec.ptr = ct_addr(p); });
}

/* ---- virtual memory management ------------------------------------------------ */

CT_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                       const CUmemAllocationProp *prop, unsigned long long flags)
{
    CT_REAL(cuMemCreate);
    CT_TRACE(CT_API_cuMemCreate, CUresult, MISSING, real(handle, size, prop, flags), {
        ev.rec.ptr = MADE(handle);
        ev.rec.size = size;
        ev.rec.flags = flags;
        if (prop) {
            ev.rec.arg[0] = (uint64_t)(int64_t)prop->location.id;
            ev.rec.arg[1] = (uint64_t)prop->location.type;
            ev.rec.arg[2] = (uint64_t)prop->type;
            ev.rec.arg[3] = (uint64_t)prop->requestedHandleTypes;
        }
        /* Physical memory lives where it was asked to, whatever the context. */
        if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
            ct_event_set_device(&ev, prop->location.id);
    });
}

CT_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CT_REAL(cuMemRelease);
    CT_TRACE(CT_API_cuMemRelease, CUresult, MISSING, real(handle), { ev.rec.ptr = handle; });
}

CT_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                               CUdeviceptr addr, unsigned long long flags)
{
    CT_REAL(cuMemAddressReserve);
    CT_TRACE(CT_API_cuMemAddressReserve, CUresult, MISSING, real(ptr, size, alignment, addr, flags),
             {
                 ev.rec.ptr = MADE(ptr);
                 ev.rec.size = size;
                 ev.rec.arg[0] = alignment;
                 ev.rec.arg[1] = addr;
                 ev.rec.flags = flags;
             });
}

CT_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CT_REAL(cuMemAddressFree);
    CT_TRACE(CT_API_cuMemAddressFree, CUresult, MISSING, real(ptr, size), {
        ev.rec.ptr = ptr;
        ev.rec.size = size;
    });
}

CT_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                    CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    CT_REAL(cuMemMap);
    CT_TRACE(CT_API_cuMemMap, CUresult, MISSING, real(ptr, size, offset, handle, flags), {
        ev.rec.ptr = ptr;
        ev.rec.size = size;
        ev.rec.arg[0] = handle;
        ev.rec.arg[1] = offset;
        ev.rec.flags = flags;
    });
}

CT_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CT_REAL(cuMemUnmap);
    CT_TRACE(CT_API_cuMemUnmap, CUresult, MISSING, real(ptr, size), {
        ev.rec.ptr = ptr;
        ev.rec.size = size;
    });
}

CT_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                          size_t count)
{
    CT_REAL(cuMemSetAccess);
    CT_TRACE(CT_API_cuMemSetAccess, CUresult, MISSING, real(ptr, size, desc, count), {
        ev.rec.ptr = ptr;
        ev.rec.size = size;
        ev.rec.arg[0] = count;
        if (desc && count > 0) {
            ev.rec.arg[1] = (uint64_t)(int64_t)desc[0].location.id;
            ev.rec.arg[2] = (uint64_t)desc[0].flags;
        }
    });
}

CT_EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle,
                                                        CUmemGenericAllocationHandle handle,
                                                        CUmemAllocationHandleType handleType,
                                                        unsigned long long flags)
{
    CT_REAL(cuMemExportToShareableHandle);
    CT_TRACE(CT_API_cuMemExportToShareableHandle, CUresult, MISSING,
             real(shareableHandle, handle, handleType, flags), {
                 ev.rec.arg[0] = handle;
                 ev.rec.arg[1] = (uint64_t)handleType;
                 ev.rec.flags = flags;
             });
}

CT_EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                          void *osHandle,
                                                          CUmemAllocationHandleType shHandleType)
{
    CT_REAL(cuMemImportFromShareableHandle);
    CT_TRACE(CT_API_cuMemImportFromShareableHandle, CUresult, MISSING,
             real(handle, osHandle, shHandleType), {
                 ev.rec.ptr = MADE(handle);
                 ev.rec.arg[1] = (uint64_t)shHandleType;
                 ev.rec.arg[2] = ct_addr(osHandle);
             });
}

/* ---- memory queries and IPC ------------------------------------------------------ */

CT_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    CT_REAL(cuMemGetInfo_v2);
    CT_TRACE(CT_API_cuMemGetInfo_v2, CUresult, MISSING, real(free, total), {
        if (rc == CUDA_SUCCESS) {
            ev.rec.arg[0] = free ? *free : 0;
            ev.rec.arg[1] = total ? *total : 0;
        }
    });
}

CT_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    CT_REAL(cuIpcGetMemHandle);
    CT_TRACE(CT_API_cuIpcGetMemHandle, CUresult, MISSING, real(pHandle, dptr), {
        ev.rec.ptr = dptr;
        if (rc == CUDA_SUCCESS && pHandle)
            ct_event_set_handle(&ev, pHandle->reserved);
    });
}

CT_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                                 unsigned int Flags)
{
    CT_REAL(cuIpcOpenMemHandle_v2);
    CT_TRACE(CT_API_cuIpcOpenMemHandle_v2, CUresult, MISSING, real(pdptr, handle, Flags), {
        ev.rec.ptr = MADE(pdptr);
        ev.rec.flags = Flags;
        ct_event_set_handle(&ev, handle.reserved);
    });
}

CT_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    CT_REAL(cuIpcCloseMemHandle);
    CT_TRACE(CT_API_cuIpcCloseMemHandle, CUresult, MISSING, real(dptr), { ev.rec.ptr = dptr; });
}

/* ---- contexts: where the CUDA context's own memory comes from ------------------------ */

CT_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CT_REAL(cuDevicePrimaryCtxRetain);
    CT_TRACE(CT_API_cuDevicePrimaryCtxRetain, CUresult, MISSING, real(pctx, dev), {
        ev.rec.ptr = (rc == CUDA_SUCCESS && pctx) ? ct_addr(*pctx) : 0;
        ev.rec.arg[0] = (uint64_t)(int64_t)dev;
        ct_event_set_device(&ev, dev);
    });
}

CT_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CT_REAL(cuDevicePrimaryCtxRelease_v2);
    CT_TRACE(CT_API_cuDevicePrimaryCtxRelease_v2, CUresult, MISSING, real(dev), {
        ev.rec.arg[0] = (uint64_t)(int64_t)dev;
        ct_event_set_device(&ev, dev);
    });
}

CT_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CT_REAL(cuDevicePrimaryCtxReset_v2);
    CT_TRACE(CT_API_cuDevicePrimaryCtxReset_v2, CUresult, MISSING, real(dev), {
        ev.rec.arg[0] = (uint64_t)(int64_t)dev;
        ct_event_set_device(&ev, dev);
    });
}

/* The context a cuCtxCreate made, on its device. */
#define CONTEXT_MADE(pctx, dev, flags)                                                             \
    do {                                                                                           \
        ev.rec.ptr = (rc == CUDA_SUCCESS && (pctx)) ? ct_addr(*(pctx)) : 0;                        \
        ev.rec.arg[0] = (uint64_t)(int64_t)(dev);                                                  \
        ev.rec.flags = (flags);                                                                    \
        ct_event_set_device(&ev, (dev));                                                           \
    } while (0)

/* The unversioned symbol is the oldest ABI, kept by the driver for old programs. */
CT_EXPORT CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CT_REAL(cuCtxCreate);
    CT_TRACE(CT_API_cuCtxCreate, CUresult, MISSING, real(pctx, flags, dev),
             CONTEXT_MADE(pctx, dev, flags));
}

CT_EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CT_REAL(cuCtxCreate_v2);
    CT_TRACE(CT_API_cuCtxCreate_v2, CUresult, MISSING, real(pctx, flags, dev),
             CONTEXT_MADE(pctx, dev, flags));
}

CT_EXPORT CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                                          int numParams, unsigned int flags, CUdevice dev)
{
    CT_REAL(cuCtxCreate_v3);
    CT_TRACE(CT_API_cuCtxCreate_v3, CUresult, MISSING,
             real(pctx, paramsArray, numParams, flags, dev), CONTEXT_MADE(pctx, dev, flags));
}

CT_EXPORT CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                          unsigned int flags, CUdevice dev)
{
    CT_REAL(cuCtxCreate_v4);
    CT_TRACE(CT_API_cuCtxCreate_v4, CUresult, MISSING, real(pctx, ctxCreateParams, flags, dev),
             CONTEXT_MADE(pctx, dev, flags));
}

CT_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    CT_REAL(cuCtxDestroy_v2);
    CT_TRACE(CT_API_cuCtxDestroy_v2, CUresult, MISSING, real(ctx), { ev.rec.ptr = ct_addr(ctx); });
}

/* ---- synchronisations: calls that can block ---- */

CT_EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
    CT_REAL(cuCtxSynchronize);
    CT_TRACE_BLOCKING(CT_API_cuCtxSynchronize, CUresult, MISSING, (void)0, real(), (void)0);
}

/* CUDA 13: a context to synchronise (NULL: the current one). */
CT_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    CT_REAL(cuCtxSynchronize_v2);
    CT_TRACE_BLOCKING(CT_API_cuCtxSynchronize_v2, CUresult, MISSING, ev.rec.arg[0] = ct_addr(ctx),
                      real(ctx), (void)0);
}

static CUresult stream_synchronize(const void *caller, enum ct_api api,
                                   __typeof__(&cuStreamSynchronize) real, CUstream stream)
{
    CT_TRACE_BLOCKING_AS(caller, api, CUresult, MISSING, ev.rec.stream = ct_addr(stream),
                         real(stream), (void)0);
}

CT_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    CT_REAL(cuStreamSynchronize);
    return stream_synchronize(CT_CALLER, CT_API_cuStreamSynchronize, real, hStream);
}

CT_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
    CT_REAL(cuStreamSynchronize_ptsz);
    return stream_synchronize(CT_CALLER, CT_API_cuStreamSynchronize_ptsz, real, hStream);
}

CT_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    CT_REAL(cuEventSynchronize);
    CT_TRACE_BLOCKING(CT_API_cuEventSynchronize, CUresult, MISSING, ev.rec.arg[0] = ct_addr(hEvent),
                      real(hEvent), (void)0);
}
