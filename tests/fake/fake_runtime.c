/*
 * fake_runtime.c - a fake libcudart.so.12 (CUDA runtime API) on top of the
 * fake (or any) libcuda.so.1.
 *
 * It reaches the driver exactly as the real runtime does, because that path is
 * what an LD_PRELOAD tracer has to cope with: it does not link libcuda; on
 * first use it dlopen()s libcuda.so.1, dlsym()s only cuGetProcAddress_v2, asks
 * that for "cuGetProcAddress" itself, and obtains every other driver function
 * by base name and CUDA version through it. A preloaded library therefore
 * never sees the runtime bind cuMemAlloc_v2 and friends by symbol.
 *
 * Exported cuda* functions never call each other (they share static helpers),
 * so a tracer interposing them sees exactly the program's calls. The library
 * is linked with -z defs, so a stray direct reference to a cu* symbol fails
 * the build instead of silently binding through the dynamic linker.
 *
 * Runtime semantics kept from the real one: the current device is per thread
 * (default 0); the primary context of the current device is retained and made
 * current lazily, on the first call that needs one; cudaSetDevice does that at
 * once (CUDA 12); errors are remembered per thread for cudaGetLastError.
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* declares the _ptsz variants */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fake_block.h"

#include <assert.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 12080 for libcudart.so.12; the libcudart.so.13 build (tests/gpu/fakecuda13) says 13000. */
#ifndef FAKE_RUNTIME_VERSION
#define FAKE_RUNTIME_VERSION 12080
#endif
#define RUNTIME_VERSION FAKE_RUNTIME_VERSION

/*
 * CUDA 13 gave cuCtxSynchronize and cuCtxGetDevice a context argument (their
 * _v2, NULL: the current context), and cuGetProcAddress at version 13000
 * returns those: a 13 runtime calls them so.
 */
#if RUNTIME_VERSION >= 13000
#define CTX_SYNCHRONIZE_PROTO cuCtxSynchronize_v2
#define CTX_GET_DEVICE_PROTO  cuCtxGetDevice_v2
#define CTX_SYNCHRONIZE()     D.ctxSynchronize(NULL)
#define CTX_GET_DEVICE(dev)   D.ctxGetDevice((dev), NULL)
#else
#define CTX_SYNCHRONIZE_PROTO cuCtxSynchronize
#define CTX_GET_DEVICE_PROTO  cuCtxGetDevice
#define CTX_SYNCHRONIZE()     D.ctxSynchronize()
#define CTX_GET_DEVICE(dev)   D.ctxGetDevice(dev)
#endif
#define MAX_DEV 64

/* ------------------------------------------------------------------------ */
/* Driver entry points                                                        */
/* ------------------------------------------------------------------------ */

/*
 * X(field, base name, prototype it must match, per-thread-stream variant).
 * The prototype only types the pointer; the symbol is never referenced.
 */
#define DRIVER_API(X)                                                                              \
    X(init, "cuInit", cuInit, 0)                                                                   \
    X(driverGetVersion, "cuDriverGetVersion", cuDriverGetVersion, 0)                               \
    X(deviceGetCount, "cuDeviceGetCount", cuDeviceGetCount, 0)                                     \
    X(deviceGetName, "cuDeviceGetName", cuDeviceGetName, 0)                                        \
    X(deviceGetUuid, "cuDeviceGetUuid", cuDeviceGetUuid_v2, 0)                                     \
    X(deviceTotalMem, "cuDeviceTotalMem", cuDeviceTotalMem_v2, 0)                                  \
    X(deviceGetAttribute, "cuDeviceGetAttribute", cuDeviceGetAttribute, 0)                         \
    X(primaryRetain, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 0)                      \
    X(primaryRelease, "cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 0)                \
    X(primaryReset, "cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2, 0)                      \
    X(ctxGetCurrent, "cuCtxGetCurrent", cuCtxGetCurrent, 0)                                        \
    X(ctxSetCurrent, "cuCtxSetCurrent", cuCtxSetCurrent, 0)                                        \
    X(ctxGetDevice, "cuCtxGetDevice", CTX_GET_DEVICE_PROTO, 0)                                     \
    X(ctxSynchronize, "cuCtxSynchronize", CTX_SYNCHRONIZE_PROTO, 0)                                \
    X(memGetInfo, "cuMemGetInfo", cuMemGetInfo_v2, 0)                                              \
    X(memAlloc, "cuMemAlloc", cuMemAlloc_v2, 0)                                                    \
    X(memAllocPitch, "cuMemAllocPitch", cuMemAllocPitch_v2, 0)                                     \
    X(memFree, "cuMemFree", cuMemFree_v2, 0)                                                       \
    X(memAllocManaged, "cuMemAllocManaged", cuMemAllocManaged, 0)                                  \
    X(memAllocHost, "cuMemAllocHost", cuMemAllocHost_v2, 0)                                        \
    X(memHostAlloc, "cuMemHostAlloc", cuMemHostAlloc, 0)                                           \
    X(memFreeHost, "cuMemFreeHost", cuMemFreeHost, 0)                                              \
    X(memcpy, "cuMemcpy", cuMemcpy, 0)                                                             \
    X(memsetD8, "cuMemsetD8", cuMemsetD8_v2, 0)                                                    \
    X(memAllocAsync, "cuMemAllocAsync", cuMemAllocAsync, 0)                                        \
    X(memAllocAsync_ptsz, "cuMemAllocAsync", cuMemAllocAsync_ptsz, 1)                              \
    X(memFreeAsync, "cuMemFreeAsync", cuMemFreeAsync, 0)                                           \
    X(memFreeAsync_ptsz, "cuMemFreeAsync", cuMemFreeAsync_ptsz, 1)                                 \
    X(memAllocFromPool, "cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync, 0)                     \
    X(memAllocFromPool_ptsz, "cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync_ptsz, 1)           \
    X(defaultMemPool, "cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool, 0)                   \
    X(memPoolCreate, "cuMemPoolCreate", cuMemPoolCreate, 0)                                        \
    X(memPoolDestroy, "cuMemPoolDestroy", cuMemPoolDestroy, 0)                                     \
    X(ipcGetMemHandle, "cuIpcGetMemHandle", cuIpcGetMemHandle, 0)                                  \
    X(ipcOpenMemHandle, "cuIpcOpenMemHandle", cuIpcOpenMemHandle_v2, 0)                            \
    X(ipcCloseMemHandle, "cuIpcCloseMemHandle", cuIpcCloseMemHandle, 0)                            \
    X(streamCreate, "cuStreamCreate", cuStreamCreate, 0)                                           \
    X(streamDestroy, "cuStreamDestroy", cuStreamDestroy_v2, 0)                                     \
    X(streamSynchronize, "cuStreamSynchronize", cuStreamSynchronize, 0)                            \
    X(streamSynchronize_ptsz, "cuStreamSynchronize", cuStreamSynchronize_ptsz, 1)                  \
    X(eventCreate, "cuEventCreate", cuEventCreate, 0)                                              \
    X(eventRecord, "cuEventRecord", cuEventRecord, 0)                                              \
    X(eventSynchronize, "cuEventSynchronize", cuEventSynchronize, 0)                               \
    X(eventDestroy, "cuEventDestroy", cuEventDestroy_v2, 0)                                        \
    X(beginCapture, "cuStreamBeginCapture", cuStreamBeginCapture_v2, 0)                            \
    X(beginCapture_ptsz, "cuStreamBeginCapture", cuStreamBeginCapture_v2_ptsz, 1)                  \
    X(endCapture, "cuStreamEndCapture", cuStreamEndCapture, 0)                                     \
    X(endCapture_ptsz, "cuStreamEndCapture", cuStreamEndCapture_ptsz, 1)                           \
    X(isCapturing, "cuStreamIsCapturing", cuStreamIsCapturing, 0)                                  \
    X(isCapturing_ptsz, "cuStreamIsCapturing", cuStreamIsCapturing_ptsz, 1)                        \
    X(graphInstantiate, "cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags, 0)             \
    X(graphLaunch, "cuGraphLaunch", cuGraphLaunch, 0)                                              \
    X(graphLaunch_ptsz, "cuGraphLaunch", cuGraphLaunch_ptsz, 1)                                    \
    X(graphDestroy, "cuGraphDestroy", cuGraphDestroy, 0)                                           \
    X(graphExecDestroy, "cuGraphExecDestroy", cuGraphExecDestroy, 0)

struct driver {
    __typeof__(cuGetProcAddress_v2) *getProcAddress;
#define DRIVER_FIELD(field, name, proto, ptds) __typeof__(proto) *field;
    DRIVER_API(DRIVER_FIELD)
#undef DRIVER_FIELD
};

struct wanted {
    const char *name;
    int ptds;
    size_t offset;
};

static const struct wanted g_wanted[] = {
#define DRIVER_WANTED(field, name, proto, ptds) {name, ptds, offsetof(struct driver, field)},
    DRIVER_API(DRIVER_WANTED)
#undef DRIVER_WANTED
};

static struct driver D;
static int g_have_driver;      /* libcuda.so.1 loaded and every entry point found */
static cudaError_t g_init_err; /* what every call returns when init failed */
static int g_ndev;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Primary contexts this runtime holds a retain on, per device ordinal. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static CUcontext g_pctx[MAX_DEV];
static int g_retained[MAX_DEV];

static __thread int t_dev;          /* cudaSetDevice's device; 0 until set */
static __thread cudaError_t t_last; /* for cudaGetLastError */

/* ------------------------------------------------------------------------ */
/* Errors                                                                     */
/* ------------------------------------------------------------------------ */

/* Driver codes and their runtime counterparts (the real numbers). */
#define ERROR_MAP(X)                                                                               \
    X(CUDA_SUCCESS, cudaSuccess)                                                                   \
    X(CUDA_ERROR_INVALID_VALUE, cudaErrorInvalidValue)                                             \
    X(CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation)                                         \
    X(CUDA_ERROR_NOT_INITIALIZED, cudaErrorInitializationError)                                    \
    X(CUDA_ERROR_DEINITIALIZED, cudaErrorCudartUnloading)                                          \
    X(CUDA_ERROR_STUB_LIBRARY, cudaErrorStubLibrary)                                               \
    X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, cudaErrorCallRequiresNewerDriver)                     \
    X(CUDA_ERROR_DEVICE_UNAVAILABLE, cudaErrorDevicesUnavailable)                                  \
    X(CUDA_ERROR_NO_DEVICE, cudaErrorNoDevice)                                                     \
    X(CUDA_ERROR_INVALID_DEVICE, cudaErrorInvalidDevice)                                           \
    X(CUDA_ERROR_INVALID_CONTEXT, cudaErrorDeviceUninitialized)                                    \
    X(CUDA_ERROR_MAP_FAILED, cudaErrorMapBufferObjectFailed)                                       \
    X(CUDA_ERROR_UNMAP_FAILED, cudaErrorUnmapBufferObjectFailed)                                   \
    X(CUDA_ERROR_ALREADY_MAPPED, cudaErrorAlreadyMapped)                                           \
    X(CUDA_ERROR_NOT_MAPPED, cudaErrorNotMapped)                                                   \
    X(CUDA_ERROR_OPERATING_SYSTEM, cudaErrorOperatingSystem)                                       \
    X(CUDA_ERROR_INVALID_HANDLE, cudaErrorInvalidResourceHandle)                                   \
    X(CUDA_ERROR_ILLEGAL_STATE, cudaErrorIllegalState)                                             \
    X(CUDA_ERROR_NOT_FOUND, cudaErrorSymbolNotFound)                                               \
    X(CUDA_ERROR_NOT_READY, cudaErrorNotReady)                                                     \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, cudaErrorIllegalAddress)                                         \
    X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, cudaErrorPeerAccessAlreadyEnabled)                   \
    X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, cudaErrorPeerAccessNotEnabled)                           \
    X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, cudaErrorSetOnActiveProcess)                              \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, cudaErrorContextIsDestroyed)                                \
    X(CUDA_ERROR_TOO_MANY_PEERS, cudaErrorTooManyPeers)                                            \
    X(CUDA_ERROR_NOT_PERMITTED, cudaErrorNotPermitted)                                             \
    X(CUDA_ERROR_NOT_SUPPORTED, cudaErrorNotSupported)                                             \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cudaErrorStreamCaptureUnsupported)                    \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cudaErrorStreamCaptureInvalidated)                    \
    X(CUDA_ERROR_STREAM_CAPTURE_MERGE, cudaErrorStreamCaptureMerge)                                \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, cudaErrorStreamCaptureUnmatched)                        \
    X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, cudaErrorStreamCaptureUnjoined)                          \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, cudaErrorStreamCaptureIsolation)                        \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cudaErrorStreamCaptureImplicit)                          \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, cudaErrorStreamCaptureWrongThread)                   \
    X(CUDA_ERROR_TIMEOUT, cudaErrorTimeout)                                                        \
    X(CUDA_ERROR_UNKNOWN, cudaErrorUnknown)

static cudaError_t from_driver(CUresult r)
{
    switch (r) {
#define MAP_CASE(cu, rt)                                                                           \
    case cu:                                                                                       \
        return rt;
        ERROR_MAP(MAP_CASE)
#undef MAP_CASE
    default:
        return cudaErrorUnknown;
    }
}

/* Names are the enumerators themselves; the texts are the fake's own. */
#define RT_ERROR_LIST(X)                                                                           \
    X(cudaSuccess, "no error")                                                                     \
    X(cudaErrorInvalidValue, "invalid argument")                                                   \
    X(cudaErrorMemoryAllocation, "out of memory")                                                  \
    X(cudaErrorInitializationError, "initialization error")                                        \
    X(cudaErrorCudartUnloading, "driver shutting down")                                            \
    X(cudaErrorInvalidConfiguration, "invalid configuration argument")                             \
    X(cudaErrorInvalidPitchValue, "invalid pitch argument")                                        \
    X(cudaErrorInvalidSymbol, "invalid device symbol")                                             \
    X(cudaErrorInvalidHostPointer, "invalid host pointer")                                         \
    X(cudaErrorInvalidDevicePointer, "invalid device pointer")                                     \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                        \
    X(cudaErrorStubLibrary, "stub library loaded instead of the driver")                           \
    X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version") \
    X(cudaErrorCallRequiresNewerDriver, "call requires a newer driver")                            \
    X(cudaErrorDevicesUnavailable, "all CUDA-capable devices are busy or unavailable")             \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                     \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                            \
    X(cudaErrorDeviceUninitialized, "invalid device context")                                      \
    X(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed")                           \
    X(cudaErrorUnmapBufferObjectFailed, "unmapping of buffer object failed")                       \
    X(cudaErrorAlreadyMapped, "resource already mapped")                                           \
    X(cudaErrorNotMapped, "resource not mapped")                                                   \
    X(cudaErrorOperatingSystem, "OS call failed or operation not supported on this OS")            \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                   \
    X(cudaErrorIllegalState, "the operation cannot be performed in the present state")             \
    X(cudaErrorSymbolNotFound, "named symbol not found")                                           \
    X(cudaErrorNotReady, "device not ready")                                                       \
    X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                         \
    X(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled")                         \
    X(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled")                           \
    X(cudaErrorSetOnActiveProcess, "cannot set while device is active in this process")            \
    X(cudaErrorContextIsDestroyed, "context is destroyed")                                         \
    X(cudaErrorTooManyPeers, "too many peers")                                                     \
    X(cudaErrorNotPermitted, "operation not permitted")                                            \
    X(cudaErrorNotSupported, "operation not supported")                                            \
    X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")       \
    X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous capture error")       \
    X(cudaErrorStreamCaptureMerge, "operation would result in a merge of separate captures")       \
    X(cudaErrorStreamCaptureUnmatched, "capture was not ended in the same stream it began")        \
    X(cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work")                        \
    X(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream")  \
    X(cudaErrorStreamCaptureImplicit,                                                              \
      "operation would make the legacy stream depend on a capture")                                \
    X(cudaErrorStreamCaptureWrongThread, "attempt to terminate a thread-local capture sequence "   \
                                         "from another thread")                                    \
    X(cudaErrorTimeout, "wait operation timed out")                                                \
    X(cudaErrorUnknown, "unknown error")

struct rt_error {
    cudaError_t code;
    const char *name;
    const char *text;
};

static const struct rt_error g_rt_errors[] = {
#define RT_ERROR_ENTRY(code, text) {code, #code, text},
    RT_ERROR_LIST(RT_ERROR_ENTRY)
#undef RT_ERROR_ENTRY
};

static const struct rt_error *find_rt_error(cudaError_t e)
{
    for (size_t i = 0; i < sizeof g_rt_errors / sizeof g_rt_errors[0]; i++)
        if (g_rt_errors[i].code == e)
            return &g_rt_errors[i];
    return NULL;
}

/* Every exported function returns through here so cudaGetLastError sees it. */
static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess)
        t_last = e;
    return e;
}

/* ------------------------------------------------------------------------ */
/* Initialisation                                                             */
/* ------------------------------------------------------------------------ */

static void rt_prepare(void)
{
    pthread_mutex_lock(&g_mu);
}

static void rt_parent(void)
{
    pthread_mutex_unlock(&g_mu);
}

/* A forked child starts without contexts (the fake driver forgets them too). */
static void rt_child(void)
{
    memset(g_retained, 0, sizeof g_retained);
    pthread_mutex_unlock(&g_mu);
}

static void rt_init_once(void)
{
    g_init_err = cudaErrorInsufficientDriver;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    void *sym = dlsym(h, "cuGetProcAddress_v2");
    if (!sym)
        return;
    __typeof__(cuGetProcAddress_v2) *bootstrap = (__typeof__(cuGetProcAddress_v2) *)sym;
    CUdriverProcAddressQueryResult st;
    void *p = NULL;
    /* Like the real runtime: the entry point used from now on comes from the table. */
    if (bootstrap("cuGetProcAddress", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) !=
            CUDA_SUCCESS ||
        !p)
        return;
    D.getProcAddress = (__typeof__(cuGetProcAddress_v2) *)p;
    for (size_t i = 0; i < sizeof g_wanted / sizeof g_wanted[0]; i++) {
        cuuint64_t flags = g_wanted[i].ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                            : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        p = NULL;
        if (D.getProcAddress(g_wanted[i].name, &p, RUNTIME_VERSION, flags, &st) != CUDA_SUCCESS ||
            !p)
            return;
        memcpy((char *)&D + g_wanted[i].offset, &p, sizeof p);
    }
    g_have_driver = 1;
    CUresult r = D.init(0);
    /*
     * Registered after cuInit, so that at fork our prepare handler runs
     * before the driver's (handlers run in reverse order): the locks are then
     * taken runtime first, as every call does.
     */
    pthread_atfork(rt_prepare, rt_parent, rt_child);
    if (r == CUDA_SUCCESS)
        r = D.deviceGetCount(&g_ndev);
    if (r == CUDA_SUCCESS && g_ndev > MAX_DEV)
        g_ndev = MAX_DEV;
    g_init_err = from_driver(r);
}

static cudaError_t rt_init(void)
{
    pthread_once(&g_once, rt_init_once);
    return g_init_err;
}

static cudaError_t retain_locked(int dev)
{
    assert(dev >= 0 && dev < g_ndev);
    if (g_retained[dev])
        return cudaSuccess;
    CUcontext c;
    CUresult r = D.primaryRetain(&c, dev);
    if (r != CUDA_SUCCESS)
        return from_driver(r);
    g_pctx[dev] = c;
    g_retained[dev] = 1;
    return cudaSuccess;
}

/* The device whose primary context is ctx, or -1 for another context. */
static int primary_device_locked(CUcontext ctx)
{
    for (int d = 0; d < g_ndev; d++)
        if (ctx && g_pctx[d] == ctx)
            return d;
    return -1;
}

/*
 * Binds a context to the calling thread the way the runtime does: a context
 * the program made current through the driver API is used as is; otherwise
 * the primary context of the thread's device is retained (once per process)
 * and made current.
 */
static cudaError_t ensure_ctx(void)
{
    cudaError_t e = rt_init();
    if (e != cudaSuccess)
        return e;
    CUcontext cur = NULL;
    CUresult r = D.ctxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return from_driver(r);
    pthread_mutex_lock(&g_mu);
    int dev = cur ? primary_device_locked(cur) : t_dev;
    if (cur && dev < 0) {
        pthread_mutex_unlock(&g_mu);
        return cudaSuccess;
    }
    if (dev >= g_ndev) {
        pthread_mutex_unlock(&g_mu);
        return cudaErrorInvalidDevice;
    }
    e = retain_locked(dev);
    CUcontext want = g_pctx[dev];
    pthread_mutex_unlock(&g_mu);
    if (e == cudaSuccess && cur != want)
        e = from_driver(D.ctxSetCurrent(want));
    return e;
}

/* The calling thread's device: that of its current context, else cudaSetDevice's. */
static cudaError_t current_device(int *dev)
{
    CUcontext cur = NULL;
    CUresult r = D.ctxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return from_driver(r);
    if (!cur) {
        *dev = t_dev;
        return cudaSuccess;
    }
    pthread_mutex_lock(&g_mu);
    int d = primary_device_locked(cur);
    pthread_mutex_unlock(&g_mu);
    if (d >= 0) {
        *dev = d;
        return cudaSuccess;
    }
    CUdevice cd;
    r = CTX_GET_DEVICE(&cd);
    if (r != CUDA_SUCCESS)
        return from_driver(r);
    *dev = cd;
    return cudaSuccess;
}

/* ------------------------------------------------------------------------ */
/* Device management                                                          */
/* ------------------------------------------------------------------------ */

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return ret(cudaErrorInvalidValue);
    cudaError_t e = rt_init();
    *count = e == cudaSuccess ? g_ndev : 0;
    return ret(e);
}

/* CUDA 12: validates, then initialises the device's primary context at once. */
cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = rt_init();
    if (e != cudaSuccess)
        return ret(e);
    if (device < 0 || device >= g_ndev)
        return ret(cudaErrorInvalidDevice);
    pthread_mutex_lock(&g_mu);
    e = retain_locked(device);
    CUcontext c = g_pctx[device];
    pthread_mutex_unlock(&g_mu);
    if (e == cudaSuccess)
        e = from_driver(D.ctxSetCurrent(c));
    if (e == cudaSuccess)
        t_dev = device;
    return ret(e);
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return ret(cudaErrorInvalidValue);
    cudaError_t e = rt_init();
    if (e == cudaSuccess)
        e = current_device(device);
    return ret(e);
}

/*
 * What the driver can say about the device; the fields the fake driver has no
 * attribute for (texture limits, clocks, ...) stay 0.
 */
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop)
        return ret(cudaErrorInvalidValue);
    cudaError_t e = rt_init();
    if (e != cudaSuccess)
        return ret(e);
    if (device < 0 || device >= g_ndev)
        return ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    CUuuid uuid;
    CUresult r = D.deviceGetName(prop->name, (int)sizeof prop->name, device);
    if (r == CUDA_SUCCESS)
        r = D.deviceGetUuid(&uuid, device);
    if (r == CUDA_SUCCESS) {
        _Static_assert(sizeof prop->uuid.bytes == sizeof uuid.bytes, "UUIDs are 16 bytes");
        memcpy(prop->uuid.bytes, uuid.bytes, sizeof uuid.bytes);
        r = D.deviceTotalMem(&prop->totalGlobalMem, device);
    }
    static const struct {
        CUdevice_attribute attr;
        size_t offset;
    } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(struct cudaDeviceProp, major)},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(struct cudaDeviceProp, minor)},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
         offsetof(struct cudaDeviceProp, multiProcessorCount)},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, offsetof(struct cudaDeviceProp, warpSize)},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
         offsetof(struct cudaDeviceProp, maxThreadsPerBlock)},
        {CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, offsetof(struct cudaDeviceProp, pciBusID)},
        {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, offsetof(struct cudaDeviceProp, pciDeviceID)},
        {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, offsetof(struct cudaDeviceProp, pciDomainID)},
        {CU_DEVICE_ATTRIBUTE_INTEGRATED, offsetof(struct cudaDeviceProp, integrated)},
        {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
         offsetof(struct cudaDeviceProp, canMapHostMemory)},
        {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
         offsetof(struct cudaDeviceProp, unifiedAddressing)},
        {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, offsetof(struct cudaDeviceProp, managedMemory)},
        {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
         offsetof(struct cudaDeviceProp, concurrentManagedAccess)},
    };
    for (size_t i = 0; r == CUDA_SUCCESS && i < sizeof attrs / sizeof attrs[0]; i++) {
        int v = 0;
        r = D.deviceGetAttribute(&v, attrs[i].attr, device);
        memcpy((char *)prop + attrs[i].offset, &v, sizeof v);
    }
    return ret(from_driver(r));
}

/*
 * Destroys the primary context's resources and drops the runtime's retain;
 * the next call that needs a context creates (and charges) it again.
 */
cudaError_t cudaDeviceReset(void)
{
    cudaError_t e = rt_init();
    int dev = 0;
    if (e == cudaSuccess)
        e = current_device(&dev);
    if (e == cudaSuccess && (dev < 0 || dev >= g_ndev))
        e = cudaErrorInvalidDevice;
    if (e != cudaSuccess)
        return ret(e);
    pthread_mutex_lock(&g_mu);
    CUresult r = D.primaryReset(dev);
    if (r == CUDA_SUCCESS && g_retained[dev]) {
        r = D.primaryRelease(dev);
        g_retained[dev] = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return ret(from_driver(r));
}

cudaError_t cudaDeviceSynchronize(void)
{
    FAKE_BLOCK_POINT("cudaDeviceSynchronize");
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(CTX_SYNCHRONIZE());
    return ret(e);
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return ret(cudaErrorInvalidValue);
    *runtimeVersion = RUNTIME_VERSION;
    return cudaSuccess;
}

/* Without a driver the real runtime reports version 0, successfully. */
cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return ret(cudaErrorInvalidValue);
    rt_init();
    if (!g_have_driver) {
        *driverVersion = 0;
        return cudaSuccess;
    }
    return ret(from_driver(D.driverGetVersion(driverVersion)));
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                     */
/* ------------------------------------------------------------------------ */

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return t_last;
}

const char *cudaGetErrorName(cudaError_t error)
{
    const struct rt_error *e = find_rt_error(error);
    return e ? e->name : "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
    const struct rt_error *e = find_rt_error(error);
    return e ? e->text : "unrecognized error code";
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                     */
/* ------------------------------------------------------------------------ */

/* cudaMalloc(&p, 0) succeeds with NULL, unlike cuMemAlloc. */
cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    cudaError_t e = ensure_ctx();
    if (e != cudaSuccess)
        return ret(e);
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p;
    e = from_driver(D.memAlloc(&p, size));
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)p;
    return ret(e);
}

cudaError_t cudaFree(void *devPtr)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess && devPtr)
        e = from_driver(D.memFree((uintptr_t)devPtr));
    return ret(e);
}

static cudaError_t malloc_async(void **devPtr, size_t size, cudaMemPool_t pool, int use_pool,
                                cudaStream_t stream, int ptsz)
{
    if (!devPtr)
        return cudaErrorInvalidValue;
    cudaError_t e = ensure_ctx();
    if (e != cudaSuccess)
        return e;
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p;
    CUresult r;
    if (use_pool)
        r = (ptsz ? D.memAllocFromPool_ptsz : D.memAllocFromPool)(&p, size, pool, stream);
    else
        r = (ptsz ? D.memAllocAsync_ptsz : D.memAllocAsync)(&p, size, stream);
    e = from_driver(r);
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)p;
    return e;
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return ret(malloc_async(devPtr, size, NULL, 0, hStream, 0));
}

cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return ret(malloc_async(devPtr, size, NULL, 0, hStream, 1));
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream)
{
    return ret(malloc_async(ptr, size, memPool, 1, stream, 0));
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream)
{
    return ret(malloc_async(ptr, size, memPool, 1, stream, 1));
}

static cudaError_t free_async(void *devPtr, cudaStream_t stream, int ptsz)
{
    cudaError_t e = ensure_ctx();
    if (e != cudaSuccess || !devPtr)
        return e;
    return from_driver((ptsz ? D.memFreeAsync_ptsz : D.memFreeAsync)((uintptr_t)devPtr, stream));
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return ret(free_async(devPtr, hStream, 0));
}

cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return ret(free_async(devPtr, hStream, 1));
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    cudaError_t e = ensure_ctx();
    CUdeviceptr p;
    if (e == cudaSuccess)
        e = from_driver(D.memAllocManaged(&p, size, flags));
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)p;
    return ret(e);
}

/* Rows are padded to 512 bytes, the texture alignment of current GPUs. */
static cudaError_t pitched(void **devPtr, size_t *pitch, size_t width, size_t rows)
{
    cudaError_t e = ensure_ctx();
    if (e != cudaSuccess)
        return e;
    if (width > SIZE_MAX - 511)
        return cudaErrorMemoryAllocation;
    *pitch = (width + 511) / 512 * 512;
    if (width == 0 || rows == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p;
    size_t got;
    e = from_driver(D.memAllocPitch(&p, &got, width, rows, 16));
    if (e == cudaSuccess) {
        assert(got == *pitch);
        *devPtr = (void *)(uintptr_t)p;
    }
    return e;
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    if (!devPtr || !pitch)
        return ret(cudaErrorInvalidValue);
    return ret(pitched(devPtr, pitch, width, height));
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
    if (!pitchedDevPtr)
        return ret(cudaErrorInvalidValue);
    if (extent.depth != 0 && extent.height > SIZE_MAX / extent.depth)
        return ret(cudaErrorMemoryAllocation);
    void *p = NULL;
    size_t pitch = 0;
    cudaError_t e = pitched(&p, &pitch, extent.width, extent.height * extent.depth);
    if (e == cudaSuccess) {
        pitchedDevPtr->ptr = p;
        pitchedDevPtr->pitch = pitch;
        pitchedDevPtr->xsize = extent.width;
        pitchedDevPtr->ysize = extent.height;
    }
    return ret(e);
}

static cudaError_t host_alloc(void **ptr, size_t size, unsigned int flags)
{
    if (!ptr)
        return cudaErrorInvalidValue;
    cudaError_t e = ensure_ctx();
    if (e != cudaSuccess)
        return e;
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    return from_driver(flags ? D.memHostAlloc(ptr, size, flags) : D.memAllocHost(ptr, size));
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return ret(host_alloc(ptr, size, 0));
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    return ret(host_alloc(pHost, size, flags));
}

cudaError_t cudaFreeHost(void *ptr)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess && ptr)
        e = from_driver(D.memFreeHost(ptr));
    return ret(e);
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.memGetInfo(free, total));
    return ret(e);
}

/* Unified addressing: the driver tells host from device memory, not `kind`. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return ret(cudaErrorInvalidMemcpyDirection);
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.memcpy((uintptr_t)dst, (uintptr_t)src, count));
    return ret(e);
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.memsetD8((uintptr_t)devPtr, (unsigned char)value, count));
    return ret(e);
}

/*
 * Work queued on a stream. The fake has no asynchrony: outside a capture the
 * work is done now; while the stream captures it becomes part of the graph
 * (which the fake never runs), so nothing is done. *captured says which. The
 * stream is resolved as the driver resolves it (NULL: legacy, or per-thread
 * for _ptsz), so an unknown stream fails as it would on a GPU.
 */
static cudaError_t stream_work(cudaStream_t stream, int ptsz, int *captured)
{
    cudaError_t e = ensure_ctx();
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (e == cudaSuccess)
        e = from_driver((ptsz ? D.isCapturing_ptsz : D.isCapturing)(stream, &st));
    if (e == cudaSuccess && st == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        e = cudaErrorStreamCaptureInvalidated;
    *captured = e == cudaSuccess && st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return e;
}

/* For tests/gpu/fakecuda13/nvcc_shim.c: a kernel launch is stream work too. */
__attribute__((visibility("hidden"))) cudaError_t fake_rt_stream_work(cudaStream_t stream, int ptsz,
                                                                      int *captured);
cudaError_t fake_rt_stream_work(cudaStream_t stream, int ptsz, int *captured)
{
    return ret(stream_work(stream, ptsz, captured));
}

/* For the shim: an error its own checks found, remembered for cudaGetLastError. */
__attribute__((visibility("hidden"))) cudaError_t fake_rt_error(cudaError_t e);
cudaError_t fake_rt_error(cudaError_t e)
{
    return ret(e);
}

static cudaError_t memset_async(void *devPtr, int value, size_t count, cudaStream_t stream,
                                int ptsz)
{
    int captured = 0;
    cudaError_t e = stream_work(stream, ptsz, &captured);
    if (e == cudaSuccess && !captured)
        e = from_driver(D.memsetD8((uintptr_t)devPtr, (unsigned char)value, count));
    return e;
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return ret(memset_async(devPtr, value, count, stream, 0));
}

cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return ret(memset_async(devPtr, value, count, stream, 1));
}

static cudaError_t memcpy_async(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                cudaStream_t stream, int ptsz)
{
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    int captured = 0;
    cudaError_t e = stream_work(stream, ptsz, &captured);
    if (e == cudaSuccess && !captured)
        e = from_driver(D.memcpy((uintptr_t)dst, (uintptr_t)src, count));
    return e;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    return ret(memcpy_async(dst, src, count, kind, stream, 0));
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream)
{
    return ret(memcpy_async(dst, src, count, kind, stream, 1));
}

/* ------------------------------------------------------------------------ */
/* IPC                                                                        */
/* ------------------------------------------------------------------------ */

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    if (!handle)
        return ret(cudaErrorInvalidValue);
    cudaError_t e = ensure_ctx();
    CUipcMemHandle h;
    if (e == cudaSuccess)
        e = from_driver(D.ipcGetMemHandle(&h, (uintptr_t)devPtr));
    if (e == cudaSuccess)
        memcpy(handle->reserved, h.reserved, sizeof handle->reserved);
    return ret(e);
}

cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags)
{
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    cudaError_t e = ensure_ctx();
    CUipcMemHandle h;
    CUdeviceptr p;
    _Static_assert(sizeof h.reserved == sizeof handle.reserved, "IPC handles are 64 bytes");
    memcpy(h.reserved, handle.reserved, sizeof h.reserved);
    if (e == cudaSuccess)
        e = from_driver(D.ipcOpenMemHandle(&p, h, flags));
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)p;
    return ret(e);
}

cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.ipcCloseMemHandle((uintptr_t)devPtr));
    return ret(e);
}

/* ------------------------------------------------------------------------ */
/* Memory pools                                                               */
/* ------------------------------------------------------------------------ */

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    cudaError_t e = rt_init();
    if (e == cudaSuccess && !memPool)
        e = cudaErrorInvalidValue;
    else if (e == cudaSuccess && (device < 0 || device >= g_ndev))
        e = cudaErrorInvalidDevice;
    if (e == cudaSuccess)
        e = from_driver(D.defaultMemPool(memPool, device));
    return ret(e);
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
    cudaError_t e = rt_init();
    if (e == cudaSuccess && (!memPool || !poolProps))
        e = cudaErrorInvalidValue;
    if (e != cudaSuccess)
        return ret(e);
    CUmemPoolProps p;
    memset(&p, 0, sizeof p);
    p.allocType = (CUmemAllocationType)poolProps->allocType;
    p.handleTypes = (CUmemAllocationHandleType)poolProps->handleTypes;
    p.location.type = (CUmemLocationType)poolProps->location.type;
    p.location.id = poolProps->location.id;
    p.maxSize = poolProps->maxSize;
    p.usage = poolProps->usage;
    return ret(from_driver(D.memPoolCreate(memPool, &p)));
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    cudaError_t e = rt_init();
    if (e == cudaSuccess)
        e = from_driver(D.memPoolDestroy(memPool));
    return ret(e);
}

/*
 * The fake driver gives stream-ordered memory back at cuMemFreeAsync (its
 * pools keep nothing), so there is never anything to trim: only the handle is
 * checked, as far as the runtime can without the driver.
 */
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;
    cudaError_t e = rt_init();
    if (e == cudaSuccess && !memPool)
        e = cudaErrorInvalidValue;
    return ret(e);
}

/* ------------------------------------------------------------------------ */
/* Streams and graphs                                                         */
/* ------------------------------------------------------------------------ */

static cudaError_t stream_create(cudaStream_t *pStream, unsigned int flags)
{
    if (!pStream)
        return cudaErrorInvalidValue;
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.streamCreate(pStream, flags));
    return e;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    return ret(stream_create(pStream, cudaStreamDefault));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    return ret(stream_create(pStream, flags));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.streamDestroy(stream));
    return ret(e);
}

static cudaError_t stream_sync(cudaStream_t stream, int ptsz)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver((ptsz ? D.streamSynchronize_ptsz : D.streamSynchronize)(stream));
    return e;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    FAKE_BLOCK_POINT("cudaStreamSynchronize");
    return ret(stream_sync(stream, 0));
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    FAKE_BLOCK_POINT("cudaStreamSynchronize");
    return ret(stream_sync(stream, 1));
}

/* Events, through the driver's (complete once recorded: docs/fakes.md). */
cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.eventCreate((CUevent *)event, CU_EVENT_DEFAULT));
    return ret(e);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.eventRecord((CUevent)event, (CUstream)stream));
    return ret(e);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    FAKE_BLOCK_POINT("cudaEventSynchronize");
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.eventSynchronize((CUevent)event));
    return ret(e);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.eventDestroy((CUevent)event));
    return ret(e);
}

/* The capture enums share their values with the driver's. */
static cudaError_t begin_capture(cudaStream_t stream, enum cudaStreamCaptureMode mode, int ptsz)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(
            (ptsz ? D.beginCapture_ptsz : D.beginCapture)(stream, (CUstreamCaptureMode)mode));
    return e;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return ret(begin_capture(stream, mode, 0));
}

cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return ret(begin_capture(stream, mode, 1));
}

static cudaError_t end_capture(cudaStream_t stream, cudaGraph_t *pGraph, int ptsz)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver((ptsz ? D.endCapture_ptsz : D.endCapture)(stream, pGraph));
    return e;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return ret(end_capture(stream, pGraph, 0));
}

cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return ret(end_capture(stream, pGraph, 1));
}

static cudaError_t is_capturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status, int ptsz)
{
    if (!status)
        return cudaErrorInvalidValue;
    cudaError_t e = ensure_ctx();
    CUstreamCaptureStatus s;
    if (e == cudaSuccess)
        e = from_driver((ptsz ? D.isCapturing_ptsz : D.isCapturing)(stream, &s));
    if (e == cudaSuccess)
        *status = (enum cudaStreamCaptureStatus)s;
    return e;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return ret(is_capturing(stream, pCaptureStatus, 0));
}

cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                       enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return ret(is_capturing(stream, pCaptureStatus, 1));
}

static cudaError_t instantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                               unsigned long long flags)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver(D.graphInstantiate(pGraphExec, graph, flags));
    return e;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags)
{
    return ret(instantiate(pGraphExec, graph, flags));
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                          unsigned long long flags)
{
    return ret(instantiate(pGraphExec, graph, flags));
}

static cudaError_t graph_launch(cudaGraphExec_t exec, cudaStream_t stream, int ptsz)
{
    cudaError_t e = ensure_ctx();
    if (e == cudaSuccess)
        e = from_driver((ptsz ? D.graphLaunch_ptsz : D.graphLaunch)(exec, stream));
    return e;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return ret(graph_launch(graphExec, stream, 0));
}

cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return ret(graph_launch(graphExec, stream, 1));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    cudaError_t e = rt_init();
    if (e == cudaSuccess)
        e = from_driver(D.graphDestroy(graph));
    return ret(e);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    cudaError_t e = rt_init();
    if (e == cudaSuccess)
        e = from_driver(D.graphExecDestroy(graphExec));
    return ret(e);
}

/* ------------------------------------------------------------------------ */
/* Driver entry points                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Forwards to the driver's cuGetProcAddress_v2. A symbol the driver lacks is
 * not an error: *funcPtr is NULL and driverStatus says why, as documented.
 */
static cudaError_t entry_point(const char *symbol, void **funcPtr, int version,
                               unsigned long long flags, int ptsz,
                               enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (!symbol || !funcPtr)
        return cudaErrorInvalidValue;
    rt_init();
    if (!g_have_driver)
        return g_init_err;
    cuuint64_t cuflags;
    switch (flags) {
    case cudaEnableDefault:
        cuflags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                       : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        break;
    case cudaEnableLegacyStream:
        cuflags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        break;
    case cudaEnablePerThreadDefaultStream:
        cuflags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        break;
    default:
        return cudaErrorInvalidValue;
    }
    int drv = 0;
    CUresult r = D.driverGetVersion(&drv);
    if (r != CUDA_SUCCESS)
        return from_driver(r);
    if (version > drv)
        return cudaErrorInvalidValue;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    *funcPtr = NULL;
    r = D.getProcAddress(symbol, funcPtr, version, cuflags, &st);
    if (driverStatus)
        *driverStatus = (enum cudaDriverEntryPointQueryResult)st;
    if (r == CUDA_ERROR_NOT_FOUND) {
        *funcPtr = NULL;
        return cudaSuccess;
    }
    return from_driver(r);
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return ret(entry_point(symbol, funcPtr, RUNTIME_VERSION, flags, 0, driverStatus));
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                         unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return ret(entry_point(symbol, funcPtr, RUNTIME_VERSION, flags, 1, driverStatus));
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (cudaVersion > INT32_MAX)
        return ret(cudaErrorInvalidValue);
    return ret(entry_point(symbol, funcPtr, (int)cudaVersion, flags, 0, driverStatus));
}

cudaError_t
cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                      unsigned long long flags,
                                      enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (cudaVersion > INT32_MAX)
        return ret(cudaErrorInvalidValue);
    return ret(entry_point(symbol, funcPtr, (int)cudaVersion, flags, 1, driverStatus));
}
