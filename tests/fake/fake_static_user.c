/*
 * fake_static_user.c - libfake_static_user.so: a library shaped like one that
 * links the CUDA runtime statically (see fake_static_user.h for the API).
 *
 * The real static cudart, and with it cuBLAS, cuDNN and NCCL, has no DT_NEEDED
 * on libcudart or libcuda and calls no cuda* symbol across a library
 * boundary. On first use it dlopen()s libcuda.so.1, dlsym()s only
 * cuGetProcAddress_v2, asks that for "cuGetProcAddress" itself (12000) and
 * then gets every driver function by base name at its own CUDA version. That
 * is the road an LD_PRELOAD tracer cannot see by interposing symbols, so this
 * library takes it and nothing else: it is linked -z defs without libcuda, so
 * a direct cu* reference fails the build, and test_fake_roads checks with
 * LD_DEBUG that cuGetProcAddress_v2 is the only driver name it looks up.
 *
 * Only facts (names, versions, the lookup protocol) come from CUDA's headers
 * and documentation; no NVIDIA code is copied.
 */
#include <cuda.h>

#include "fake_static_user.h"

#include <assert.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The CUDA version a static cudart 12.8 asks the driver for. */
#define STATIC_RUNTIME_VERSION 12080

/*
 * X(field, base name, prototype it must match). The prototype only types the
 * pointer (so a mismatch with cuda.h is a compile error); the symbol itself is
 * never referenced.
 */
#define DRIVER_API(X)                                                                              \
    X(init, "cuInit", cuInit)                                                                      \
    X(deviceGet, "cuDeviceGet", cuDeviceGet)                                                       \
    X(primaryRetain, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain)                         \
    X(ctxGetCurrent, "cuCtxGetCurrent", cuCtxGetCurrent)                                           \
    X(ctxSetCurrent, "cuCtxSetCurrent", cuCtxSetCurrent)                                           \
    X(memAlloc, "cuMemAlloc", cuMemAlloc_v2)                                                       \
    X(memFree, "cuMemFree", cuMemFree_v2)                                                          \
    X(memGetInfo, "cuMemGetInfo", cuMemGetInfo_v2)                                                 \
    X(memGranularity, "cuMemGetAllocationGranularity", cuMemGetAllocationGranularity)              \
    X(memAddressReserve, "cuMemAddressReserve", cuMemAddressReserve)                               \
    X(memAddressFree, "cuMemAddressFree", cuMemAddressFree)                                        \
    X(memCreate, "cuMemCreate", cuMemCreate)                                                       \
    X(memRelease, "cuMemRelease", cuMemRelease)                                                    \
    X(memMap, "cuMemMap", cuMemMap)                                                                \
    X(memUnmap, "cuMemUnmap", cuMemUnmap)                                                          \
    X(memSetAccess, "cuMemSetAccess", cuMemSetAccess)

struct driver {
    __typeof__(cuGetProcAddress_v2) *getProcAddress;
#define DRIVER_FIELD(field, name, proto) __typeof__(proto) *field;
    DRIVER_API(DRIVER_FIELD)
#undef DRIVER_FIELD
};

struct wanted {
    const char *name;
    size_t offset;
};

static const struct wanted g_wanted[] = {
#define DRIVER_WANTED(field, name, proto) {name, offsetof(struct driver, field)},
    DRIVER_API(DRIVER_WANTED)
#undef DRIVER_WANTED
};

/* One VMM range handed out by fsu_vmm_alloc: what fsu_vmm_free needs to undo it. */
struct vmm_range {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle handle;
    struct vmm_range *next;
};

static struct driver D;
static CUresult g_load_err = CUDA_ERROR_NOT_INITIALIZED; /* until the driver is loaded */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/*
 * g_mu guards g_pctx and g_ranges. It is held across driver calls (the
 * primary-context retain), so at fork it is taken before the driver's own
 * lock: see load_once.
 */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static CUcontext g_pctx; /* device 0's primary context, retained once */
static struct vmm_range *g_ranges;

static void on_prepare(void)
{
    pthread_mutex_lock(&g_mu);
}

static void on_parent(void)
{
    pthread_mutex_unlock(&g_mu);
}

/*
 * The driver forgets a forked child's contexts and VMM objects (as the real
 * one makes them unusable there), so the child starts without ours too.
 */
static void on_child(void)
{
    g_pctx = NULL;
    while (g_ranges) {
        struct vmm_range *r = g_ranges;
        g_ranges = r->next;
        free(r);
    }
    pthread_mutex_unlock(&g_mu);
}

static void load_once(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    /* The only driver symbol ever looked up by name. */
    void *sym = dlsym(h, "cuGetProcAddress_v2");
    if (!sym)
        return;
    __typeof__(cuGetProcAddress_v2) *bootstrap = (__typeof__(cuGetProcAddress_v2) *)sym;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *p = NULL;
    /* From here on, the entry point used is the one the table hands out, as the runtime does. */
    CUresult r = bootstrap("cuGetProcAddress", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    if (r != CUDA_SUCCESS || !p) {
        g_load_err = r != CUDA_SUCCESS ? r : CUDA_ERROR_NOT_FOUND;
        return;
    }
    struct driver d = {.getProcAddress = (__typeof__(cuGetProcAddress_v2) *)p};
    for (size_t i = 0; i < sizeof g_wanted / sizeof g_wanted[0]; i++) {
        p = NULL;
        r = d.getProcAddress(g_wanted[i].name, &p, STATIC_RUNTIME_VERSION,
                             CU_GET_PROC_ADDRESS_DEFAULT, &st);
        if (r != CUDA_SUCCESS || !p) {
            g_load_err = r != CUDA_SUCCESS ? r : CUDA_ERROR_NOT_FOUND;
            return;
        }
        memcpy((char *)&d + g_wanted[i].offset, &p, sizeof p);
    }
    D = d;
    g_load_err = D.init(0);
    /*
     * Registered after cuInit, so our prepare handler runs before the
     * driver's (they run in reverse order): g_mu is then taken first, as it
     * is when a call holds it across a driver call.
     */
    if (g_load_err == CUDA_SUCCESS)
        pthread_atfork(on_prepare, on_parent, on_child);
}

static CUresult load(void)
{
    pthread_once(&g_once, load_once);
    return g_load_err;
}

/*
 * What the static runtime does before its first context-bound call: use the
 * thread's current context, else retain device 0's primary context (once per
 * process; it is never released, like the runtime's) and make it current.
 */
static CUresult ensure_ctx(void)
{
    CUcontext cur = NULL;
    CUresult r = D.ctxGetCurrent(&cur);
    if (r != CUDA_SUCCESS || cur)
        return r;
    pthread_mutex_lock(&g_mu);
    if (!g_pctx) {
        CUdevice dev;
        CUcontext c = NULL;
        r = D.deviceGet(&dev, 0);
        if (r == CUDA_SUCCESS)
            r = D.primaryRetain(&c, dev);
        if (r == CUDA_SUCCESS)
            g_pctx = c;
    }
    cur = g_pctx;
    pthread_mutex_unlock(&g_mu);
    if (r == CUDA_SUCCESS) {
        assert(cur);
        r = D.ctxSetCurrent(cur);
    }
    return r;
}

int fsu_alloc(size_t bytes, void **ptr)
{
    if (!ptr)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = load();
    if (r == CUDA_SUCCESS)
        r = ensure_ctx();
    CUdeviceptr d = 0;
    if (r == CUDA_SUCCESS)
        r = D.memAlloc(&d, bytes);
    if (r == CUDA_SUCCESS)
        *ptr = (void *)(uintptr_t)d;
    return (int)r;
}

int fsu_free(void *ptr)
{
    CUresult r = load();
    if (r == CUDA_SUCCESS)
        r = ensure_ctx();
    if (r == CUDA_SUCCESS)
        r = D.memFree((CUdeviceptr)(uintptr_t)ptr);
    return (int)r;
}

int fsu_free_memory(size_t *free_bytes, size_t *total)
{
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = load();
    if (r == CUDA_SUCCESS)
        r = ensure_ctx();
    if (r == CUDA_SUCCESS)
        r = D.memGetInfo(free_bytes, total);
    return (int)r;
}

static CUmemAllocationProp pinned_at(CUmemLocationType type, int id)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop); /* reserved fields must be zero */
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = type;
    prop.location.id = id;
    return prop;
}

int fsu_vmm_alloc(size_t bytes, int device, void **ptr)
{
    if (!ptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = load();
    if (r != CUDA_SUCCESS)
        return (int)r;
    CUmemAllocationProp prop = pinned_at(CU_MEM_LOCATION_TYPE_DEVICE, device);
    size_t gran = 0;
    r = D.memGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS)
        return (int)r;
    assert(gran > 0);
    if (bytes > SIZE_MAX - (gran - 1))
        return CUDA_ERROR_INVALID_VALUE;
    size_t size = (bytes + gran - 1) / gran * gran;
    struct vmm_range *rg = calloc(1, sizeof *rg);
    if (!rg)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* steps: how many of reserve, create, map succeeded, so a failure undoes just those. */
    int steps = 0;
    r = D.memAddressReserve(&rg->va, size, gran, 0, 0);
    if (r == CUDA_SUCCESS) {
        steps = 1;
        r = D.memCreate(&rg->handle, size, &prop, 0);
    }
    if (r == CUDA_SUCCESS) {
        steps = 2;
        r = D.memMap(rg->va, size, 0, rg->handle, 0);
    }
    if (r == CUDA_SUCCESS) {
        steps = 3;
        CUmemAccessDesc access;
        memset(&access, 0, sizeof access);
        access.location = prop.location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        r = D.memSetAccess(rg->va, size, &access, 1);
    }
    if (r != CUDA_SUCCESS) {
        assert(steps <= 3);
        if (steps >= 3)
            D.memUnmap(rg->va, size);
        if (steps >= 2)
            D.memRelease(rg->handle);
        if (steps >= 1)
            D.memAddressFree(rg->va, size);
        free(rg);
        return (int)r;
    }
    rg->size = size;
    pthread_mutex_lock(&g_mu);
    rg->next = g_ranges;
    g_ranges = rg;
    pthread_mutex_unlock(&g_mu);
    *ptr = (void *)(uintptr_t)rg->va;
    return CUDA_SUCCESS;
}

int fsu_vmm_free(void *ptr)
{
    CUresult r = load();
    if (r != CUDA_SUCCESS)
        return (int)r;
    /* Taken off the list first, so two threads freeing one pointer cannot both undo it. */
    struct vmm_range *rg = NULL;
    pthread_mutex_lock(&g_mu);
    for (struct vmm_range **pp = &g_ranges; *pp; pp = &(*pp)->next) {
        if ((*pp)->va == (CUdeviceptr)(uintptr_t)ptr) {
            rg = *pp;
            *pp = rg->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    if (!rg)
        return CUDA_ERROR_INVALID_VALUE;
    r = D.memUnmap(rg->va, rg->size);
    CUresult r2 = D.memRelease(rg->handle);
    CUresult r3 = D.memAddressFree(rg->va, rg->size);
    free(rg);
    /* Report the first failure; the later steps still ran, so nothing is left half done. */
    return (int)(r != CUDA_SUCCESS ? r : r2 != CUDA_SUCCESS ? r2 : r3);
}

int fsu_host_numa_probe(void)
{
    CUresult r = load();
    if (r != CUDA_SUCCESS)
        return (int)r;
    CUmemAllocationProp prop = pinned_at(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
    size_t gran = 0;
    r = D.memGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    CUmemGenericAllocationHandle h = 0;
    if (r == CUDA_SUCCESS)
        r = D.memCreate(&h, gran, &prop, 0);
    if (r == CUDA_SUCCESS)
        r = D.memRelease(h);
    return (int)r;
}
