/*
 * hook_runtime.c - the CUDA runtime memory API (libcudart), one hook per call.
 *
 * Each hook is defined without a symbol version: glibc binds a program's
 * versioned reference (cudaMalloc@libcudart.so.12 or .13) to an unversioned
 * definition in a preloaded object, so one build serves both majors.
 * Including cuda_runtime_api.h makes the compiler check every hook against
 * the official prototype (CT_REAL types `real` from it).
 *
 * What each hook stores beyond seq/time/thread/device/result (documented for
 * users in docs/schema.md):
 *   ptr    the pointer made (allocations, on success), freed, exported,
 *          captured into (graph) or launched
 *   size   bytes requested; for pitched allocations the bytes reserved
 *   flags  the call's flags or mode argument
 *   stream the stream argument
 *   arg[]  cudaMemGetInfo: free, total; cudaMallocPitch: width, height, pitch;
 *          cudaMalloc3D: width, height, depth, pitch; cudaSetDevice: device;
 *          cudaMallocFromPoolAsync: pool; cudaGraphInstantiate*: graph
 *   handle the 64-byte IPC handle (cudaIpcGetMemHandle on success;
 *          cudaIpcOpenMemHandle always, the handle it was given)
 *
 * The synchronisations (cudaDeviceSynchronize, cudaStreamSynchronize,
 * cudaEventSynchronize; role synchronize) wait for the GPU, which a hang
 * on another rank can make wait for ever: they are CT_TRACE_BLOCKING, with
 * the stream in `stream` and the event in arg0, so a process killed inside
 * one says so.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../core/device.h"
#include "../core/hook.h"

/* Per-thread-default-stream twins, declared by the header only in that mode. */
extern __typeof__(cudaMallocAsync) cudaMallocAsync_ptsz;
extern __typeof__(cudaFreeAsync) cudaFreeAsync_ptsz;
extern __typeof__(cudaMallocFromPoolAsync) cudaMallocFromPoolAsync_ptsz;
extern __typeof__(cudaStreamBeginCapture) cudaStreamBeginCapture_ptsz;
extern __typeof__(cudaStreamEndCapture) cudaStreamEndCapture_ptsz;
extern __typeof__(cudaGraphLaunch) cudaGraphLaunch_ptsz;
extern __typeof__(cudaStreamSynchronize) cudaStreamSynchronize_ptsz;

/*
 * Returned, with a one-time warning, when the real function cannot be found:
 * an untraced program could not have reached this call at all.
 */
#define MISSING cudaErrorInitializationError

/* The pointer an allocation returned through `out`, or 0 if it failed. */
#define MADE(out) ((rc == cudaSuccess && (out)) ? ct_addr(*(out)) : 0)

CT_EXPORT cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
    CT_REAL(cudaMalloc);
    CT_TRACE(CT_API_cudaMalloc, cudaError_t, MISSING, real(devPtr, size), {
        ev.rec.size = size;
        ev.rec.ptr = MADE(devPtr);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    CT_REAL(cudaMallocManaged);
    CT_TRACE(CT_API_cudaMallocManaged, cudaError_t, MISSING, real(devPtr, size, flags), {
        ev.rec.size = size;
        ev.rec.flags = flags;
        ev.rec.ptr = MADE(devPtr);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
    CT_REAL(cudaMallocHost);
    CT_TRACE(CT_API_cudaMallocHost, cudaError_t, MISSING, real(ptr, size), {
        ev.rec.size = size;
        ev.rec.ptr = MADE(ptr);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    CT_REAL(cudaHostAlloc);
    CT_TRACE(CT_API_cudaHostAlloc, cudaError_t, MISSING, real(pHost, size, flags), {
        ev.rec.size = size;
        ev.rec.flags = flags;
        ev.rec.ptr = MADE(pHost);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaMallocPitch(void **devPtr, size_t *pitch, size_t width,
                                                size_t height)
{
    CT_REAL(cudaMallocPitch);
    CT_TRACE(CT_API_cudaMallocPitch, cudaError_t, MISSING, real(devPtr, pitch, width, height), {
        ev.rec.ptr = MADE(devPtr);
        ev.rec.arg[0] = width;
        ev.rec.arg[1] = height;
        ev.rec.arg[2] = (rc == cudaSuccess && pitch) ? *pitch : 0;
        ev.rec.size = (rc == cudaSuccess && pitch) ? *pitch * height : width * height;
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr,
                                             struct cudaExtent extent)
{
    CT_REAL(cudaMalloc3D);
    CT_TRACE(CT_API_cudaMalloc3D, cudaError_t, MISSING, real(pitchedDevPtr, extent), {
        bool made = rc == cudaSuccess && pitchedDevPtr;
        size_t row = made ? pitchedDevPtr->pitch : extent.width;
        ev.rec.ptr = made ? ct_addr(pitchedDevPtr->ptr) : 0;
        ev.rec.arg[0] = extent.width;
        ev.rec.arg[1] = extent.height;
        ev.rec.arg[2] = extent.depth;
        ev.rec.arg[3] = made ? pitchedDevPtr->pitch : 0;
        ev.rec.size = row * extent.height * extent.depth;
    });
}

static cudaError_t malloc_async(const void *caller, enum ct_api api,
                                __typeof__(&cudaMallocAsync) real, void **devPtr, size_t size,
                                cudaStream_t stream)
{
    CT_TRACE_AS(caller, api, cudaError_t, MISSING, real(devPtr, size, stream), {
        ev.rec.size = size;
        ev.rec.stream = ct_addr(stream);
        ev.rec.ptr = MADE(devPtr);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    CT_REAL(cudaMallocAsync);
    return malloc_async(CT_CALLER, CT_API_cudaMallocAsync, real, devPtr, size, hStream);
}

CT_EXPORT cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **devPtr, size_t size,
                                                     cudaStream_t hStream)
{
    CT_REAL(cudaMallocAsync_ptsz);
    return malloc_async(CT_CALLER, CT_API_cudaMallocAsync_ptsz, real, devPtr, size, hStream);
}

static cudaError_t malloc_from_pool(const void *caller, enum ct_api api,
                                    __typeof__(&cudaMallocFromPoolAsync) real, void **ptr,
                                    size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    CT_TRACE_AS(caller, api, cudaError_t, MISSING, real(ptr, size, pool, stream), {
        ev.rec.size = size;
        ev.rec.stream = ct_addr(stream);
        ev.rec.arg[0] = ct_addr(pool);
        ev.rec.ptr = MADE(ptr);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **ptr, size_t size,
                                                        cudaMemPool_t memPool, cudaStream_t stream)
{
    CT_REAL(cudaMallocFromPoolAsync);
    return malloc_from_pool(CT_CALLER, CT_API_cudaMallocFromPoolAsync, real, ptr, size, memPool,
                            stream);
}

CT_EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size,
                                                             cudaMemPool_t memPool,
                                                             cudaStream_t stream)
{
    CT_REAL(cudaMallocFromPoolAsync_ptsz);
    return malloc_from_pool(CT_CALLER, CT_API_cudaMallocFromPoolAsync_ptsz, real, ptr, size,
                            memPool, stream);
}

CT_EXPORT cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
    CT_REAL(cudaFree);
    CT_TRACE(CT_API_cudaFree, cudaError_t, MISSING, real(devPtr), ev.rec.ptr = ct_addr(devPtr));
}

CT_EXPORT cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
    CT_REAL(cudaFreeHost);
    CT_TRACE(CT_API_cudaFreeHost, cudaError_t, MISSING, real(ptr), ev.rec.ptr = ct_addr(ptr));
}

static cudaError_t free_async(const void *caller, enum ct_api api, __typeof__(&cudaFreeAsync) real,
                              void *devPtr, cudaStream_t stream)
{
    CT_TRACE_AS(caller, api, cudaError_t, MISSING, real(devPtr, stream), {
        ev.rec.ptr = ct_addr(devPtr);
        ev.rec.stream = ct_addr(stream);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    CT_REAL(cudaFreeAsync);
    return free_async(CT_CALLER, CT_API_cudaFreeAsync, real, devPtr, hStream);
}

CT_EXPORT cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    CT_REAL(cudaFreeAsync_ptsz);
    return free_async(CT_CALLER, CT_API_cudaFreeAsync_ptsz, real, devPtr, hStream);
}

CT_EXPORT cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free, size_t *total)
{
    CT_REAL(cudaMemGetInfo);
    CT_TRACE(CT_API_cudaMemGetInfo, cudaError_t, MISSING, real(free, total), {
        if (rc == cudaSuccess) {
            ev.rec.arg[0] = free ? *free : 0;
            ev.rec.arg[1] = total ? *total : 0;
        }
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    CT_REAL(cudaIpcGetMemHandle);
    CT_TRACE(CT_API_cudaIpcGetMemHandle, cudaError_t, MISSING, real(handle, devPtr), {
        ev.rec.ptr = ct_addr(devPtr);
        if (rc == cudaSuccess && handle)
            ct_event_set_handle(&ev, handle->reserved);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
                                                     unsigned int flags)
{
    CT_REAL(cudaIpcOpenMemHandle);
    CT_TRACE(CT_API_cudaIpcOpenMemHandle, cudaError_t, MISSING, real(devPtr, handle, flags), {
        ev.rec.ptr = MADE(devPtr);
        ev.rec.flags = flags;
        ct_event_set_handle(&ev, handle.reserved);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void *devPtr)
{
    CT_REAL(cudaIpcCloseMemHandle);
    CT_TRACE(CT_API_cudaIpcCloseMemHandle, cudaError_t, MISSING, real(devPtr),
             ev.rec.ptr = ct_addr(devPtr));
}

CT_EXPORT cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    CT_REAL(cudaSetDevice);
    CT_TRACE(CT_API_cudaSetDevice, cudaError_t, MISSING, real(device), {
        ev.rec.arg[0] = (uint64_t)(int64_t)device;
        if (rc == cudaSuccess)
            ct_device_note(device);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaDeviceReset(void)
{
    CT_REAL(cudaDeviceReset);
    CT_TRACE(CT_API_cudaDeviceReset, cudaError_t, MISSING, real(), (void)0);
}

static cudaError_t begin_capture(const void *caller, enum ct_api api,
                                 __typeof__(&cudaStreamBeginCapture) real, cudaStream_t stream,
                                 enum cudaStreamCaptureMode mode)
{
    CT_TRACE_AS(caller, api, cudaError_t, MISSING, real(stream, mode), {
        ev.rec.stream = ct_addr(stream);
        ev.rec.flags = (uint64_t)mode;
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream,
                                                       enum cudaStreamCaptureMode mode)
{
    CT_REAL(cudaStreamBeginCapture);
    return begin_capture(CT_CALLER, CT_API_cudaStreamBeginCapture, real, stream, mode);
}

CT_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                            enum cudaStreamCaptureMode mode)
{
    CT_REAL(cudaStreamBeginCapture_ptsz);
    return begin_capture(CT_CALLER, CT_API_cudaStreamBeginCapture_ptsz, real, stream, mode);
}

static cudaError_t end_capture(const void *caller, enum ct_api api,
                               __typeof__(&cudaStreamEndCapture) real, cudaStream_t stream,
                               cudaGraph_t *graph)
{
    CT_TRACE_AS(caller, api, cudaError_t, MISSING, real(stream, graph), {
        ev.rec.stream = ct_addr(stream);
        ev.rec.ptr = MADE(graph);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    CT_REAL(cudaStreamEndCapture);
    return end_capture(CT_CALLER, CT_API_cudaStreamEndCapture, real, stream, pGraph);
}

CT_EXPORT cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    CT_REAL(cudaStreamEndCapture_ptsz);
    return end_capture(CT_CALLER, CT_API_cudaStreamEndCapture_ptsz, real, stream, pGraph);
}

static cudaError_t instantiate(const void *caller, enum ct_api api,
                               __typeof__(&cudaGraphInstantiate) real, cudaGraphExec_t *exec,
                               cudaGraph_t graph, unsigned long long flags)
{
    CT_TRACE_AS(caller, api, cudaError_t, MISSING, real(exec, graph, flags), {
        ev.rec.ptr = MADE(exec);
        ev.rec.arg[0] = ct_addr(graph);
        ev.rec.flags = flags;
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                     unsigned long long flags)
{
    CT_REAL(cudaGraphInstantiate);
    return instantiate(CT_CALLER, CT_API_cudaGraphInstantiate, real, pGraphExec, graph, flags);
}

CT_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec,
                                                              cudaGraph_t graph,
                                                              unsigned long long flags)
{
    CT_REAL(cudaGraphInstantiateWithFlags);
    return instantiate(CT_CALLER, CT_API_cudaGraphInstantiateWithFlags, real, pGraphExec, graph,
                       flags);
}

static cudaError_t launch(const void *caller, enum ct_api api, __typeof__(&cudaGraphLaunch) real,
                          cudaGraphExec_t exec, cudaStream_t stream)
{
    CT_TRACE_AS(caller, api, cudaError_t, MISSING, real(exec, stream), {
        ev.rec.ptr = ct_addr(exec);
        ev.rec.stream = ct_addr(stream);
    });
}

CT_EXPORT cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    CT_REAL(cudaGraphLaunch);
    return launch(CT_CALLER, CT_API_cudaGraphLaunch, real, graphExec, stream);
}

CT_EXPORT cudaError_t CUDARTAPI cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    CT_REAL(cudaGraphLaunch_ptsz);
    return launch(CT_CALLER, CT_API_cudaGraphLaunch_ptsz, real, graphExec, stream);
}

/* ---- synchronisations: calls that can block ---- */

CT_EXPORT cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
    CT_REAL(cudaDeviceSynchronize);
    CT_TRACE_BLOCKING(CT_API_cudaDeviceSynchronize, cudaError_t, MISSING, (void)0, real(), (void)0);
}

static cudaError_t stream_synchronize(const void *caller, enum ct_api api,
                                      __typeof__(&cudaStreamSynchronize) real, cudaStream_t stream)
{
    CT_TRACE_BLOCKING_AS(caller, api, cudaError_t, MISSING, ev.rec.stream = ct_addr(stream),
                         real(stream), (void)0);
}

CT_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
    CT_REAL(cudaStreamSynchronize);
    return stream_synchronize(CT_CALLER, CT_API_cudaStreamSynchronize, real, stream);
}

CT_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    CT_REAL(cudaStreamSynchronize_ptsz);
    return stream_synchronize(CT_CALLER, CT_API_cudaStreamSynchronize_ptsz, real, stream);
}

CT_EXPORT cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event)
{
    CT_REAL(cudaEventSynchronize);
    CT_TRACE_BLOCKING(CT_API_cudaEventSynchronize, cudaError_t, MISSING,
                      ev.rec.arg[0] = ct_addr(event), real(event), (void)0);
}
