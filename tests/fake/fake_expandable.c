/*
 * fake_expandable.c - libfake_expandable.so: a library shaped like PyTorch's
 * expandable segments (see fake_expandable.h for the API).
 *
 * What is copied is the road, not the code: PyTorch links libcudart
 * dynamically, but its expandable segments get the driver's VMM functions
 * from cudaGetDriverEntryPointByVersion (base names, version 12000) and call
 * them through the returned pointers. A tracer that interposes cuMemCreate or
 * cuMemMap by symbol therefore sees nothing; it has to wrap what
 * cuGetProcAddress (which the runtime forwards to) hands out. This library is
 * linked -z defs against libcudart only, so a direct cu* reference fails the
 * build; test_fake_roads counts its cudaGetDriverEntryPointByVersion calls and
 * checks that the pointers it got are the ones it calls.
 *
 * The segment: one cuMemAddressReserve up front, then physical chunks of
 * 20 MiB (rounded up to the allocation granularity) created, mapped and made
 * accessible one after another at its end as it grows, unmapped and released
 * from the end as it shrinks. Sizes are facts from PyTorch's documentation;
 * no PyTorch or NVIDIA code is copied.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fake_expandable.h"

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The version PyTorch asks cudaGetDriverEntryPointByVersion for. */
#define ENTRY_POINT_VERSION 12000
/* An expandable segment grows by this much (before rounding to the granularity). */
#define CHUNK_TARGET (20ull << 20)

/* X(field, base name, prototype it must match): the prototype only types the pointer. */
#define DRIVER_API(X)                                                                              \
    X(memGranularity, "cuMemGetAllocationGranularity", cuMemGetAllocationGranularity)              \
    X(memAddressReserve, "cuMemAddressReserve", cuMemAddressReserve)                               \
    X(memAddressFree, "cuMemAddressFree", cuMemAddressFree)                                        \
    X(memCreate, "cuMemCreate", cuMemCreate)                                                       \
    X(memRelease, "cuMemRelease", cuMemRelease)                                                    \
    X(memMap, "cuMemMap", cuMemMap)                                                                \
    X(memUnmap, "cuMemUnmap", cuMemUnmap)                                                          \
    X(memSetAccess, "cuMemSetAccess", cuMemSetAccess)

struct driver {
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

/* Chunks [0, nmapped) of the reservation (max_chunks * chunk bytes from va) are mapped. */
struct segment {
    int live; /* fex_reserve done, fex_release not yet */
    int device;
    CUdeviceptr va;
    size_t chunk; /* bytes per chunk, a multiple of the granularity */
    size_t max_chunks;
    size_t nmapped;
    CUmemGenericAllocationHandle *handles; /* max_chunks entries, 0 where unmapped */
};

static struct driver D;
static CUresult g_load_err = CUDA_ERROR_NOT_INITIALIZED;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Guards g_seg; held across driver calls, so that a segment changes as a whole. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct segment g_seg;

static void on_prepare(void)
{
    pthread_mutex_lock(&g_mu);
}

static void on_parent(void)
{
    pthread_mutex_unlock(&g_mu);
}

/* The driver forgets a forked child's VMM objects, so the child has no segment. */
static void on_child(void)
{
    free(g_seg.handles);
    memset(&g_seg, 0, sizeof g_seg);
    pthread_mutex_unlock(&g_mu);
}

static void load_once(void)
{
    struct driver d;
    memset(&d, 0, sizeof d);
    for (size_t i = 0; i < sizeof g_wanted / sizeof g_wanted[0]; i++) {
        void *p = NULL;
        enum cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
        cudaError_t e = cudaGetDriverEntryPointByVersion(g_wanted[i].name, &p, ENTRY_POINT_VERSION,
                                                         cudaEnableDefault, &st);
        if (e != cudaSuccess) {
            g_load_err = CUDA_ERROR_NOT_INITIALIZED; /* the runtime has no usable driver */
            return;
        }
        if (!p || st != cudaDriverEntryPointSuccess) {
            g_load_err = CUDA_ERROR_NOT_FOUND;
            return;
        }
        memcpy((char *)&d + g_wanted[i].offset, &p, sizeof p);
    }
    D = d;
    g_load_err = CUDA_SUCCESS;
    /*
     * The lookups initialised the runtime, which registered its fork handlers
     * after the driver's; ours come last, so their prepare runs first and
     * g_mu is taken before the runtime's and driver's locks, as in a call.
     */
    pthread_atfork(on_prepare, on_parent, on_child);
}

static CUresult load(void)
{
    pthread_once(&g_once, load_once);
    return g_load_err;
}

static CUmemAllocationProp device_prop(int device)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop); /* reserved fields must be zero */
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

/* Whole chunks covering bytes; 0 with *ok = 0 on overflow. */
static size_t chunks_for(size_t bytes, size_t chunk, int *ok)
{
    assert(chunk > 0);
    *ok = bytes <= SIZE_MAX - (chunk - 1);
    return *ok ? (bytes + chunk - 1) / chunk : 0;
}

/* Unmaps and releases chunk i; both steps run, the first error is returned. */
static CUresult unmap_chunk(size_t i)
{
    assert(i < g_seg.max_chunks);
    CUresult r = D.memUnmap(g_seg.va + i * g_seg.chunk, g_seg.chunk);
    CUresult r2 = D.memRelease(g_seg.handles[i]);
    g_seg.handles[i] = 0;
    return r != CUDA_SUCCESS ? r : r2;
}

/* cuMemCreate + cuMemMap + cuMemSetAccess of chunk i; on failure nothing is left of it. */
static CUresult map_chunk(size_t i)
{
    assert(i < g_seg.max_chunks && g_seg.handles[i] == 0);
    CUmemAllocationProp prop = device_prop(g_seg.device);
    CUdeviceptr at = g_seg.va + i * g_seg.chunk;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = D.memCreate(&h, g_seg.chunk, &prop, 0);
    if (r != CUDA_SUCCESS)
        return r;
    r = D.memMap(at, g_seg.chunk, 0, h, 0);
    if (r != CUDA_SUCCESS) {
        D.memRelease(h);
        return r;
    }
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = D.memSetAccess(at, g_seg.chunk, &access, 1);
    if (r != CUDA_SUCCESS) {
        D.memUnmap(at, g_seg.chunk);
        D.memRelease(h);
        return r;
    }
    g_seg.handles[i] = h;
    return CUDA_SUCCESS;
}

int fex_reserve(size_t va_bytes, int device)
{
    if (va_bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = load();
    if (r != CUDA_SUCCESS)
        return (int)r;
    pthread_mutex_lock(&g_mu);
    if (g_seg.live) {
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    CUmemAllocationProp prop = device_prop(device);
    size_t gran = 0;
    r = D.memGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    size_t chunk = 0, n = 0;
    int ok = 1;
    if (r == CUDA_SUCCESS) {
        assert(gran > 0);
        chunk = (CHUNK_TARGET + gran - 1) / gran * gran;
        n = chunks_for(va_bytes, chunk, &ok);
        if (!ok || n > SIZE_MAX / chunk)
            r = CUDA_ERROR_INVALID_VALUE;
    }
    CUmemGenericAllocationHandle *handles = NULL;
    if (r == CUDA_SUCCESS && !(handles = calloc(n, sizeof *handles)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr va = 0;
    if (r == CUDA_SUCCESS)
        r = D.memAddressReserve(&va, n * chunk, 0, 0, 0);
    if (r == CUDA_SUCCESS) {
        g_seg = (struct segment){.live = 1,
                                 .device = device,
                                 .va = va,
                                 .chunk = chunk,
                                 .max_chunks = n,
                                 .nmapped = 0,
                                 .handles = handles};
    } else {
        free(handles);
    }
    pthread_mutex_unlock(&g_mu);
    return (int)r;
}

int fex_grow(size_t bytes)
{
    pthread_mutex_lock(&g_mu);
    CUresult r = g_seg.live ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
    size_t n = 0;
    int ok = 1;
    if (r == CUDA_SUCCESS) {
        n = chunks_for(bytes, g_seg.chunk, &ok);
        if (!ok || n > g_seg.max_chunks - g_seg.nmapped)
            r = CUDA_ERROR_INVALID_VALUE; /* past the end of the reservation */
    }
    size_t first = g_seg.nmapped, done = 0;
    while (r == CUDA_SUCCESS && done < n) {
        r = map_chunk(first + done);
        if (r == CUDA_SUCCESS)
            done++;
    }
    if (r == CUDA_SUCCESS) {
        g_seg.nmapped += n;
    } else {
        /* All or nothing, so a failed grow leaves the segment (and the device) as it was. */
        while (done > 0)
            unmap_chunk(first + --done);
    }
    pthread_mutex_unlock(&g_mu);
    return (int)r;
}

/* Unmaps n chunks from the end; the caller holds g_mu and checked n. */
static CUresult shrink_locked(size_t n)
{
    assert(g_seg.live && n <= g_seg.nmapped);
    CUresult first_err = CUDA_SUCCESS;
    for (; n > 0; n--) {
        CUresult r = unmap_chunk(--g_seg.nmapped);
        if (first_err == CUDA_SUCCESS)
            first_err = r;
    }
    return first_err;
}

int fex_shrink(size_t bytes)
{
    pthread_mutex_lock(&g_mu);
    CUresult r = g_seg.live ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
    size_t n = 0;
    int ok = 1;
    if (r == CUDA_SUCCESS) {
        n = chunks_for(bytes, g_seg.chunk, &ok);
        if (!ok || n > g_seg.nmapped)
            r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS)
        r = shrink_locked(n);
    pthread_mutex_unlock(&g_mu);
    return (int)r;
}

int fex_release(void)
{
    pthread_mutex_lock(&g_mu);
    if (!g_seg.live) {
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    CUresult r = shrink_locked(g_seg.nmapped);
    CUresult r2 = D.memAddressFree(g_seg.va, g_seg.max_chunks * g_seg.chunk);
    free(g_seg.handles);
    memset(&g_seg, 0, sizeof g_seg);
    pthread_mutex_unlock(&g_mu);
    return (int)(r != CUDA_SUCCESS ? r : r2);
}

size_t fex_mapped_bytes(void)
{
    pthread_mutex_lock(&g_mu);
    size_t n = g_seg.nmapped * g_seg.chunk;
    pthread_mutex_unlock(&g_mu);
    return n;
}

void *fex_base(void)
{
    pthread_mutex_lock(&g_mu);
    void *p = g_seg.live ? (void *)(uintptr_t)g_seg.va : NULL;
    pthread_mutex_unlock(&g_mu);
    return p;
}

size_t fex_chunk_bytes(void)
{
    pthread_mutex_lock(&g_mu);
    size_t c = g_seg.chunk;
    pthread_mutex_unlock(&g_mu);
    return c;
}
