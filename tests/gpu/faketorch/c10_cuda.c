/*
 * c10_cuda.c - libc10_cuda.so of the fake torch package: a model of PyTorch's
 * CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), its host
 * (pinned) caching allocator and the receiving side of CUDA IPC
 * (CudaIPCTypes), written from the public behaviour described in
 * tests/gpu/faketorch/README.md. No PyTorch code is copied.
 *
 * The Python package calls these functions through ctypes, so every
 * cudaMalloc, cuMemCreate/cuMemMap, cudaHostAlloc and cudaIpcOpenMemHandle a
 * tracer sees has a native frame in this library under the Python frame that
 * made the tensor (ctypes releases the GIL during the call, as torch's
 * operators do).
 *
 * Every function returns 0 or the cudaError_t / CUresult of the failing call.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* The public constants of CUDACachingAllocator.cpp. */
#define MIN_BLOCK_SIZE  ((size_t)512) /* every size is rounded to this */
#define SMALL_SIZE      (1 * MIB)     /* largest "small" request */
#define SMALL_BUFFER    (2 * MIB)     /* small-pool segment (and page) size */
#define LARGE_BUFFER    (20 * MIB)    /* segment for large requests < MIN_LARGE_ALLOC */
#define MIN_LARGE_ALLOC (10 * MIB)    /* from here a request gets its own segment */
#define ROUND_LARGE     (2 * MIB)     /* ... rounded up to this */

enum { POOL_SMALL, POOL_LARGE, NPOOLS };

/* Statistic types and their order in c10_stats' output (see c10_stat_names). */
enum {
    ST_ALLOCATION,
    ST_SEGMENT,
    ST_ACTIVE,
    ST_ALLOCATED_BYTES,
    ST_RESERVED_BYTES,
    ST_ACTIVE_BYTES,
    ST_REQUESTED_BYTES,
    NSTATS
};
/* Per stat type and pool (all, small, large): current, peak, allocated, freed. */
#define STAT_SLOTS (NSTATS * 3 * 4)
/* After the slots: num_alloc_retries, num_ooms, num_device_alloc, num_device_free. */
#define STAT_TOTAL (STAT_SLOTS + 4)

struct segment;

struct block {
    uint64_t ptr;
    size_t size;
    size_t requested; /* what the caller asked for (allocated blocks) */
    int allocated;
    int mapped; /* expandable segments: backed by physical pages */
    struct segment *seg;
    struct block *prev, *next; /* address order inside the segment */
};

struct segment {
    uint64_t base;
    size_t size; /* cudaMalloc size, or the reservation's size */
    int pool;
    int device;
    uint64_t key; /* the stream, or a graph's private pool */
    int expandable;
    size_t page;                           /* expandable: bytes per physical page */
    CUmemGenericAllocationHandle *handles; /* expandable: per page, 0 if unmapped */
    int *fds;                              /* expandable: per page, its exported fd or -1 */
    size_t npages, mapped_pages;
    struct block *head;
    struct segment *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct segment *g_segments;
static int g_expandable = -1; /* -1: not configured yet */
static int64_t g_stats[STAT_TOTAL];

/* Driver entry points for expandable segments (c10's DriverAPI). */
static struct {
    int loaded;
    CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                           unsigned long long);
    CUresult (*address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                        unsigned long long);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*mem_unmap)(CUdeviceptr, size_t);
    CUresult (*mem_release)(CUmemGenericAllocationHandle);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*export_handle)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                              unsigned long long);
    CUresult (*import_handle)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_total_mem)(size_t *, CUdevice);
    CUresult (*device_get_name)(char *, int, CUdevice);
} g_drv;

/* Exported API (declared here: the library has no header, ctypes binds it). */
int c10_configure(int expandable);
int c10_malloc(size_t size, uint64_t key, int device, uint64_t *ptr);
int c10_free(uint64_t ptr);
int c10_empty_cache(void);
int c10_block_info(uint64_t ptr, uint64_t *seg_base, uint64_t *seg_size, uint64_t *block_size);
int c10_stats(int64_t *out, int n);
int c10_mapping_end(uint64_t ptr, uint64_t *end);
int c10_stat_count(void);
int c10_mem_get_info(size_t *free_bytes, size_t *total_bytes);
int c10_device_count(int *count);
int c10_set_device(int device);
int c10_get_device(int *device);
int c10_device_props(int device, size_t *total, char *name, int len);
int c10_host_alloc(size_t size, uint64_t *ptr);
int c10_host_free(uint64_t ptr);
int c10_host_is_pinned(uint64_t ptr);
int c10_host_stats(uint64_t *reserved, uint64_t *allocated);
int c10_ipc_export(uint64_t ptr, unsigned char *handle, uint64_t *offset, uint64_t *seg_size);
int c10_ipc_open(const unsigned char *handle, uint64_t *base);
int c10_ipc_close(uint64_t base);
int c10_ipc_open_count(void);
int c10_ipc_export_expandable(uint64_t ptr, size_t size, unsigned char *buf, size_t cap,
                              size_t *len, uint64_t *offset);
int c10_ipc_open_expandable(const unsigned char *buf, size_t len, uint64_t *base);

/* ------------------------------------------------------------------------ */
/* Statistics                                                                 */
/* ------------------------------------------------------------------------ */

static void stat_add(int type, int pool, int64_t delta)
{
    int pools[2] = {0, 1 + pool};
    for (int i = 0; i < 2; i++) {
        int64_t *s = &g_stats[(type * 3 + pools[i]) * 4];
        s[0] += delta;
        if (s[0] > s[1])
            s[1] = s[0];
        if (delta > 0)
            s[2] += delta;
        else
            s[3] -= delta;
    }
}

static size_t round_size(size_t size)
{
    if (size < MIN_BLOCK_SIZE)
        return MIN_BLOCK_SIZE;
    return (size + MIN_BLOCK_SIZE - 1) / MIN_BLOCK_SIZE * MIN_BLOCK_SIZE;
}

static size_t round_up(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

static int pool_of(size_t rounded)
{
    return rounded <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
}

/* Size of a new (non-expandable) segment for a request of `rounded` bytes. */
static size_t segment_size(size_t rounded)
{
    if (rounded <= SMALL_SIZE)
        return SMALL_BUFFER;
    if (rounded < MIN_LARGE_ALLOC)
        return LARGE_BUFFER;
    return round_up(rounded, ROUND_LARGE);
}

/* Splitting rule: a small block is split when at least 512 B remain, a large
 * one when more than 1 MiB remains. */
static int should_split(int pool, size_t remaining)
{
    return pool == POOL_SMALL ? remaining >= MIN_BLOCK_SIZE : remaining > SMALL_SIZE;
}

/* ------------------------------------------------------------------------ */
/* Blocks and segments                                                        */
/* ------------------------------------------------------------------------ */

static struct block *new_block(struct segment *s, uint64_t ptr, size_t size, int mapped)
{
    struct block *b = calloc(1, sizeof *b);
    if (b) {
        b->ptr = ptr;
        b->size = size;
        b->mapped = mapped;
        b->seg = s;
    }
    return b;
}

/* Splits b so that it keeps `size` bytes; the rest becomes a free block after it. */
static int split_block(struct block *b, size_t size)
{
    struct block *r = new_block(b->seg, b->ptr + size, b->size - size, b->mapped);
    if (!r)
        return -1;
    r->prev = b;
    r->next = b->next;
    if (b->next)
        b->next->prev = r;
    b->next = r;
    b->size = size;
    return 0;
}

/* True if b has a free next block in the same mapped state, which it then absorbs. */
static bool absorb_next(struct block *b)
{
    struct block *n = b->next;
    if (!n || n->allocated || n->mapped != b->mapped)
        return false;
    b->size += n->size;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    free(n);
    return true;
}

/* Merges b with its free neighbours of the same mapped state; returns the result. */
static struct block *merge_free(struct block *b)
{
    struct block *p = b->prev;
    if (p && !p->allocated && absorb_next(p))
        b = p;
    absorb_next(b);
    return b;
}

static void unlink_segment(struct segment *s)
{
    for (struct segment **pp = &g_segments; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    for (struct block *b = s->head, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    free(s->handles);
    free(s->fds);
    free(s);
}

static struct block *find_block(uint64_t ptr)
{
    for (struct segment *s = g_segments; s; s = s->next)
        if (ptr >= s->base && ptr < s->base + s->size)
            for (struct block *b = s->head; b; b = b->next)
                if (b->ptr == ptr)
                    return b;
    return NULL;
}

/* Best fit: the smallest free mapped block of the pool and key that holds `rounded`. */
static struct block *best_fit(int pool, uint64_t key, int device, size_t rounded)
{
    struct block *best = NULL;
    for (struct segment *s = g_segments; s; s = s->next) {
        if (s->pool != pool || s->key != key || s->device != device)
            continue;
        for (struct block *b = s->head; b; b = b->next)
            if (!b->allocated && b->mapped && b->size >= rounded &&
                (!best || b->size < best->size || (b->size == best->size && b->ptr < best->ptr)))
                best = b;
    }
    return best;
}

/* ------------------------------------------------------------------------ */
/* Expandable segments                                                        */
/* ------------------------------------------------------------------------ */

static int load_driver(void)
{
    if (g_drv.loaded)
        return 0;
    static const struct {
        const char *name;
        size_t off;
    } want[] = {
        {"cuMemCreate", offsetof(__typeof__(g_drv), mem_create)},
        {"cuMemAddressReserve", offsetof(__typeof__(g_drv), address_reserve)},
        {"cuMemMap", offsetof(__typeof__(g_drv), mem_map)},
        {"cuMemSetAccess", offsetof(__typeof__(g_drv), set_access)},
        {"cuMemUnmap", offsetof(__typeof__(g_drv), mem_unmap)},
        {"cuMemRelease", offsetof(__typeof__(g_drv), mem_release)},
        {"cuMemAddressFree", offsetof(__typeof__(g_drv), address_free)},
        {"cuMemExportToShareableHandle", offsetof(__typeof__(g_drv), export_handle)},
        {"cuMemImportFromShareableHandle", offsetof(__typeof__(g_drv), import_handle)},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        void *p = NULL;
        enum cudaDriverEntryPointQueryResult q;
        cudaError_t e =
            cudaGetDriverEntryPointByVersion(want[i].name, &p, 12000, cudaEnableDefault, &q);
        if (e != cudaSuccess)
            return e;
        if (!p || q != cudaDriverEntryPointSuccess)
            return cudaErrorSymbolNotFound;
        memcpy((char *)&g_drv + want[i].off, &p, sizeof p);
    }
    g_drv.loaded = 1;
    return 0;
}

/* A new expandable segment for (pool, key, device): one large reservation,
 * 1 1/8 of the device's memory (falling back to halves when the address space
 * refuses), nothing mapped. */
static int new_expandable(int pool, uint64_t key, int device, size_t at_least, struct segment **out)
{
    int r = load_driver();
    if (r)
        return r;
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total);
    if (e != cudaSuccess)
        return e;
    size_t page = pool == POOL_SMALL ? SMALL_BUFFER : LARGE_BUFFER;
    size_t want = round_up(total + total / 8, page);
    size_t need = round_up(at_least, page);
    CUdeviceptr base = 0;
    CUresult cr = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t size = want; size >= need && size >= page; size = round_up(size / 2, page)) {
        cr = g_drv.address_reserve(&base, size, 0, 0, 0);
        if (cr == CUDA_SUCCESS) {
            want = size;
            break;
        }
        if (size == page)
            break;
    }
    if (cr != CUDA_SUCCESS)
        return cr;
    struct segment *s = calloc(1, sizeof *s);
    if (s) {
        s->handles = calloc(want / page, sizeof *s->handles);
        s->fds = malloc(want / page * sizeof *s->fds);
    }
    if (s && s->handles && s->fds) {
        for (size_t i = 0; i < want / page; i++)
            s->fds[i] = -1;
        s->head = new_block(s, base, want, 0);
    }
    if (!s || !s->handles || !s->fds || !s->head) {
        if (s) {
            free(s->handles);
            free(s->fds);
        }
        free(s);
        g_drv.address_free(base, want);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->base = base;
    s->size = want;
    s->pool = pool;
    s->device = device;
    s->key = key;
    s->expandable = 1;
    s->page = page;
    s->npages = want / page;
    s->next = g_segments;
    g_segments = s;
    *out = s;
    return 0;
}

static void unmap_page(struct segment *s, size_t i)
{
    g_drv.mem_unmap(s->base + i * s->page, s->page);
    g_drv.mem_release(s->handles[i]);
    s->handles[i] = 0;
    if (s->fds[i] >= 0) {
        close(s->fds[i]);
        s->fds[i] = -1;
    }
    s->mapped_pages--;
    stat_add(ST_RESERVED_BYTES, s->pool, -(int64_t)s->page);
}

/* Maps `bytes` (whole pages) at the start of the free unmapped block u. */
static int map_front(struct block *u, size_t bytes)
{
    struct segment *s = u->seg;
    if (bytes < u->size && split_block(u, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t first = (u->ptr - s->base) / s->page, n = u->size / s->page;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = s->device;
    /* Shareable with other processes as a file descriptor (torch's default). */
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (size_t i = first; i < first + n; i++) {
        CUdeviceptr at = s->base + i * s->page;
        CUmemGenericAllocationHandle h = 0;
        CUresult r = g_drv.mem_create(&h, s->page, &prop, 0);
        if (r == CUDA_SUCCESS) {
            r = g_drv.mem_map(at, s->page, 0, h, 0);
            if (r != CUDA_SUCCESS)
                g_drv.mem_release(h);
        }
        if (r == CUDA_SUCCESS) {
            r = g_drv.set_access(at, s->page, &access, 1);
            if (r != CUDA_SUCCESS) {
                g_drv.mem_unmap(at, s->page);
                g_drv.mem_release(h);
            }
        }
        if (r != CUDA_SUCCESS) {
            for (size_t j = first; j < i; j++)
                unmap_page(s, j);
            merge_free(u);
            return r;
        }
        s->handles[i] = h;
        s->mapped_pages++;
        stat_add(ST_RESERVED_BYTES, s->pool, (int64_t)s->page);
    }
    /* As torch's map_block: reserved bytes and one device allocation per mapping,
     * no "segment" (that statistic counts cudaMalloc segments only). */
    g_stats[STAT_SLOTS + 2]++;
    u->mapped = 1;
    merge_free(u);
    return 0;
}

/* Grows the expandable segments of (pool, key, device) so that a free mapped
 * block of `rounded` bytes exists: the lowest run of free blocks long enough
 * has its unmapped parts mapped. */
static int expand(int pool, uint64_t key, int device, size_t rounded)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        for (struct segment *s = g_segments; s; s = s->next) {
            if (!s->expandable || s->pool != pool || s->key != key || s->device != device)
                continue;
            for (struct block *b = s->head; b; b = b->next) {
                size_t acc = 0;
                struct block *c = b;
                while (c && !c->allocated && acc < rounded) {
                    acc += c->size;
                    c = c->next;
                }
                if (b->allocated || acc < rounded)
                    continue;
                uint64_t start = b->ptr;
                uint64_t end = s->base + round_up(start + rounded - s->base, s->page);
                /* Map every unmapped (hence free) block of [start, end), lowest first;
                 * map_front merges what it maps into the free run. */
                for (;;) {
                    c = s->head;
                    while (c && (c->mapped || c->ptr + c->size <= start || c->ptr >= end))
                        c = c->next;
                    if (!c)
                        break;
                    uint64_t stop = c->ptr + c->size < end ? c->ptr + c->size : end;
                    int r = map_front(c, stop - c->ptr);
                    if (r)
                        return r;
                }
                return 0;
            }
        }
        struct segment *fresh;
        int r = new_expandable(pool, key, device, rounded, &fresh);
        if (r)
            return r;
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* ------------------------------------------------------------------------ */
/* Device allocator                                                           */
/* ------------------------------------------------------------------------ */

static int parse_conf_locked(void)
{
    if (g_expandable >= 0)
        return 0;
    const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
    g_expandable = conf && strstr(conf, "expandable_segments:True") ? 1 : 0;
    return 0;
}

int c10_configure(int expandable)
{
    pthread_mutex_lock(&g_lock);
    if (expandable >= 0 && !g_segments)
        g_expandable = expandable ? 1 : 0;
    else
        parse_conf_locked();
    int r = g_expandable;
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* Frees every cached segment that holds no allocation (cudaFree), and unmaps
 * the free pages of expandable segments; a segment left with nothing mapped
 * gives its reservation back. */
static void release_cached(void)
{
    for (struct segment *s = g_segments, *next; s; s = next) {
        next = s->next;
        if (!s->expandable) {
            if (!s->head->allocated && !s->head->next) {
                cudaFree((void *)(uintptr_t)s->base);
                stat_add(ST_SEGMENT, s->pool, -1);
                stat_add(ST_RESERVED_BYTES, s->pool, -(int64_t)s->size);
                g_stats[STAT_SLOTS + 3]++;
                unlink_segment(s);
            }
            continue;
        }
        for (struct block *b = s->head; b; b = b->next) {
            if (b->allocated || !b->mapped)
                continue;
            size_t lo = round_up(b->ptr - s->base, s->page) / s->page;
            size_t hi = (b->ptr + b->size - s->base) / s->page;
            if (lo >= hi)
                continue;
            uint64_t ulo = s->base + lo * s->page, uhi = s->base + hi * s->page;
            if (ulo > b->ptr) {
                if (split_block(b, ulo - b->ptr) != 0)
                    continue;
                b = b->next;
            }
            if (uhi < b->ptr + b->size && split_block(b, uhi - b->ptr) != 0)
                continue;
            for (size_t i = lo; i < hi; i++)
                unmap_page(s, i);
            g_stats[STAT_SLOTS + 3]++;
            b->mapped = 0;
            b = merge_free(b);
        }
        if (s->mapped_pages == 0) {
            g_drv.address_free(s->base, s->size);
            unlink_segment(s);
        }
    }
}

int c10_malloc(size_t size, uint64_t key, int device, uint64_t *ptr)
{
    if (!ptr)
        return cudaErrorInvalidValue;
    *ptr = 0;
    if (size == 0)
        return 0;
    pthread_mutex_lock(&g_lock);
    parse_conf_locked();
    size_t rounded = round_size(size);
    int pool = pool_of(rounded);
    int r = 0;
    struct block *b = best_fit(pool, key, device, rounded);
    if (!b && g_expandable) {
        r = expand(pool, key, device, rounded);
        if (r) {
            release_cached();
            g_stats[STAT_SLOTS + 0]++;
            r = expand(pool, key, device, rounded);
        }
        if (!r)
            b = best_fit(pool, key, device, rounded);
    } else if (!b) {
        size_t ssize = segment_size(rounded);
        void *p = NULL;
        cudaError_t e = cudaMalloc(&p, ssize);
        if (e != cudaSuccess) {
            /* Give the cached memory back and try once more. */
            release_cached();
            g_stats[STAT_SLOTS + 0]++;
            e = cudaMalloc(&p, ssize);
        }
        if (e != cudaSuccess) {
            r = e;
        } else {
            struct segment *s = calloc(1, sizeof *s);
            if (s)
                s->head = new_block(s, (uint64_t)(uintptr_t)p, ssize, 1);
            if (!s || !s->head) {
                free(s);
                cudaFree(p);
                r = cudaErrorMemoryAllocation;
            } else {
                s->base = (uint64_t)(uintptr_t)p;
                s->size = ssize;
                s->pool = pool;
                s->device = device;
                s->key = key;
                s->next = g_segments;
                g_segments = s;
                g_stats[STAT_SLOTS + 2]++;
                stat_add(ST_SEGMENT, pool, 1);
                stat_add(ST_RESERVED_BYTES, pool, (int64_t)ssize);
                b = s->head;
            }
        }
    }
    if (!b && !r)
        r = cudaErrorMemoryAllocation;
    if (r) {
        g_stats[STAT_SLOTS + 1]++;
        pthread_mutex_unlock(&g_lock);
        return r;
    }
    if (should_split(pool, b->size - rounded))
        split_block(b, rounded);
    b->allocated = 1;
    b->requested = size;
    stat_add(ST_ALLOCATION, pool, 1);
    stat_add(ST_ACTIVE, pool, 1);
    stat_add(ST_ALLOCATED_BYTES, pool, (int64_t)b->size);
    stat_add(ST_ACTIVE_BYTES, pool, (int64_t)b->size);
    stat_add(ST_REQUESTED_BYTES, pool, (int64_t)size);
    *ptr = b->ptr;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int c10_free(uint64_t ptr)
{
    if (!ptr)
        return 0;
    pthread_mutex_lock(&g_lock);
    struct block *b = find_block(ptr);
    if (!b || !b->allocated) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorInvalidValue;
    }
    int pool = b->seg->pool;
    stat_add(ST_ALLOCATION, pool, -1);
    stat_add(ST_ACTIVE, pool, -1);
    stat_add(ST_ALLOCATED_BYTES, pool, -(int64_t)b->size);
    stat_add(ST_ACTIVE_BYTES, pool, -(int64_t)b->size);
    stat_add(ST_REQUESTED_BYTES, pool, -(int64_t)b->requested);
    b->allocated = 0;
    b->requested = 0;
    merge_free(b);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int c10_empty_cache(void)
{
    pthread_mutex_lock(&g_lock);
    release_cached();
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int c10_block_info(uint64_t ptr, uint64_t *seg_base, uint64_t *seg_size, uint64_t *block_size)
{
    pthread_mutex_lock(&g_lock);
    struct block *b = find_block(ptr);
    if (b) {
        *seg_base = b->seg->base;
        *seg_size = b->seg->size;
        *block_size = b->size;
    }
    pthread_mutex_unlock(&g_lock);
    return b ? 0 : cudaErrorInvalidValue;
}

/* Where the driver mapping holding ptr ends: the segment's end, or for an
 * expandable segment the end of ptr's page (each page is its own mapping). */
int c10_mapping_end(uint64_t ptr, uint64_t *end)
{
    int r = cudaErrorInvalidValue;
    pthread_mutex_lock(&g_lock);
    for (struct segment *s = g_segments; s; s = s->next) {
        if (ptr < s->base || ptr >= s->base + s->size)
            continue;
        *end =
            s->expandable ? s->base + ((ptr - s->base) / s->page + 1) * s->page : s->base + s->size;
        r = 0;
        break;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

int c10_stat_count(void)
{
    return STAT_TOTAL;
}

int c10_stats(int64_t *out, int n)
{
    if (!out || n < STAT_TOTAL)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_lock);
    memcpy(out, g_stats, sizeof g_stats);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Device queries                                                             */
/* ------------------------------------------------------------------------ */

int c10_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    return cudaMemGetInfo(free_bytes, total_bytes);
}

int c10_device_count(int *count)
{
    return cudaGetDeviceCount(count);
}

int c10_set_device(int device)
{
    return cudaSetDevice(device);
}

int c10_get_device(int *device)
{
    return cudaGetDevice(device);
}

/* cudaGetDeviceProperties' total memory and name, read from the driver. */
int c10_device_props(int device, size_t *total, char *name, int len)
{
    pthread_mutex_lock(&g_lock);
    if (!g_drv.device_get) {
        const char *names[] = {"cuDeviceGet", "cuDeviceTotalMem", "cuDeviceGetName"};
        void **slots[] = {(void **)&g_drv.device_get, (void **)&g_drv.device_total_mem,
                          (void **)&g_drv.device_get_name};
        for (int i = 0; i < 3; i++) {
            enum cudaDriverEntryPointQueryResult q;
            cudaError_t e =
                cudaGetDriverEntryPointByVersion(names[i], slots[i], 12000, cudaEnableDefault, &q);
            if (e == cudaSuccess && !*slots[i])
                e = cudaErrorSymbolNotFound;
            if (e != cudaSuccess) {
                g_drv.device_get = NULL;
                pthread_mutex_unlock(&g_lock);
                return e;
            }
        }
    }
    pthread_mutex_unlock(&g_lock);
    CUdevice dev;
    CUresult r = g_drv.device_get(&dev, device);
    if (r == CUDA_SUCCESS)
        r = g_drv.device_total_mem(total, dev);
    if (r == CUDA_SUCCESS)
        r = g_drv.device_get_name(name, len, dev);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Host (pinned) caching allocator                                            */
/* ------------------------------------------------------------------------ */

struct host_block {
    uint64_t ptr;
    size_t size;
    int allocated;
    struct host_block *next;
};

static struct host_block *g_host;
static uint64_t g_host_reserved, g_host_allocated;

/* Pinned blocks are rounded up to a power of two and kept for reuse. */
int c10_host_alloc(size_t size, uint64_t *ptr)
{
    if (!ptr)
        return cudaErrorInvalidValue;
    *ptr = 0;
    if (size == 0)
        return 0;
    size_t rounded = 1;
    while (rounded < size)
        rounded <<= 1;
    pthread_mutex_lock(&g_lock);
    struct host_block *best = NULL;
    for (struct host_block *h = g_host; h; h = h->next)
        if (!h->allocated && h->size == rounded) {
            best = h;
            break;
        }
    int r = 0;
    if (!best) {
        void *p = NULL;
        cudaError_t e = cudaHostAlloc(&p, rounded, cudaHostAllocDefault);
        if (e != cudaSuccess) {
            r = e;
        } else if (!(best = calloc(1, sizeof *best))) {
            cudaFreeHost(p);
            r = cudaErrorMemoryAllocation;
        } else {
            best->ptr = (uint64_t)(uintptr_t)p;
            best->size = rounded;
            best->next = g_host;
            g_host = best;
            g_host_reserved += rounded;
        }
    }
    if (best) {
        best->allocated = 1;
        g_host_allocated += best->size;
        *ptr = best->ptr;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

int c10_host_free(uint64_t ptr)
{
    int r = cudaErrorInvalidValue;
    pthread_mutex_lock(&g_lock);
    for (struct host_block *h = g_host; h; h = h->next)
        if (h->ptr == ptr && h->allocated) {
            h->allocated = 0;
            g_host_allocated -= h->size;
            r = 0;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    return r;
}

int c10_host_is_pinned(uint64_t ptr)
{
    int found = 0;
    pthread_mutex_lock(&g_lock);
    for (struct host_block *h = g_host; h && !found; h = h->next)
        found = ptr >= h->ptr && ptr < h->ptr + h->size;
    pthread_mutex_unlock(&g_lock);
    return found;
}

int c10_host_stats(uint64_t *reserved, uint64_t *allocated)
{
    pthread_mutex_lock(&g_lock);
    *reserved = g_host_reserved;
    *allocated = g_host_allocated;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* CUDA IPC                                                                   */
/* ------------------------------------------------------------------------ */

/* The sender's side: a handle of the segment holding ptr, and ptr's offset. */
int c10_ipc_export(uint64_t ptr, unsigned char *handle, uint64_t *offset, uint64_t *seg_size)
{
    pthread_mutex_lock(&g_lock);
    struct segment *s = NULL;
    for (struct segment *t = g_segments; t && !s; t = t->next)
        if (ptr >= t->base && ptr < t->base + t->size)
            s = t;
    uint64_t base = s ? s->base : 0, size = s ? s->size : 0;
    int expandable = s ? s->expandable : 0;
    pthread_mutex_unlock(&g_lock);
    if (!s)
        return cudaErrorInvalidValue;
    if (expandable)
        return cudaErrorNotSupported;
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base);
    if (e != cudaSuccess)
        return e;
    memcpy(handle, h.reserved, sizeof h.reserved);
    *offset = ptr - base;
    *seg_size = size;
    return 0;
}

/* The receiver's side: each handle is opened once, then reference counted. */
struct ipc_open {
    unsigned char handle[CUDA_IPC_HANDLE_SIZE];
    uint64_t base;
    int refs;
    /* An expandable segment's pages: the shared description, imported handles. */
    unsigned char *blob;
    size_t blob_len;
    CUmemGenericAllocationHandle *vmm;
    size_t npages, page;
    struct ipc_open *next;
};

static struct ipc_open *g_ipc;

int c10_ipc_open(const unsigned char *handle, uint64_t *base)
{
    pthread_mutex_lock(&g_lock);
    for (struct ipc_open *o = g_ipc; o; o = o->next)
        if (memcmp(o->handle, handle, CUDA_IPC_HANDLE_SIZE) == 0) {
            o->refs++;
            *base = o->base;
            pthread_mutex_unlock(&g_lock);
            return 0;
        }
    pthread_mutex_unlock(&g_lock);
    cudaIpcMemHandle_t h;
    memcpy(h.reserved, handle, sizeof h.reserved);
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess)
        return e;
    struct ipc_open *o = calloc(1, sizeof *o);
    if (!o) {
        cudaIpcCloseMemHandle(p);
        return cudaErrorMemoryAllocation;
    }
    memcpy(o->handle, handle, CUDA_IPC_HANDLE_SIZE);
    o->base = (uint64_t)(uintptr_t)p;
    o->refs = 1;
    pthread_mutex_lock(&g_lock);
    o->next = g_ipc;
    g_ipc = o;
    pthread_mutex_unlock(&g_lock);
    *base = o->base;
    return 0;
}

int c10_ipc_close(uint64_t base)
{
    pthread_mutex_lock(&g_lock);
    struct ipc_open **pp = &g_ipc;
    while (*pp && (*pp)->base != base)
        pp = &(*pp)->next;
    struct ipc_open *o = *pp;
    if (!o) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorInvalidValue;
    }
    if (--o->refs > 0) {
        pthread_mutex_unlock(&g_lock);
        return 0;
    }
    *pp = o->next;
    pthread_mutex_unlock(&g_lock);
    int e = 0;
    if (o->vmm) {
        for (size_t i = 0; i < o->npages; i++) {
            g_drv.mem_unmap(o->base + i * o->page, o->page);
            g_drv.mem_release(o->vmm[i]);
        }
        e = g_drv.address_free(o->base, o->npages * o->page);
        free(o->vmm);
        free(o->blob);
    } else {
        e = cudaIpcCloseMemHandle((void *)(uintptr_t)o->base);
    }
    free(o);
    return e;
}

int c10_ipc_open_count(void)
{
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (struct ipc_open *o = g_ipc; o; o = o->next)
        n++;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/*
 * Expandable segments cannot use cudaIpcGetMemHandle: as torch's
 * ExpandableSegment does, the sender exports the physical pages covering
 * [ptr, ptr+size) as POSIX file descriptors (cuMemExportToShareableHandle)
 * and sends its pid, the page size and the descriptor numbers; the receiver
 * takes the descriptors with pidfd_getfd, imports them
 * (cuMemImportFromShareableHandle) and maps them into a reservation of its own.
 */
struct share_header {
    int32_t pid;
    uint32_t npages;
    uint64_t page;
};

int c10_ipc_export_expandable(uint64_t ptr, size_t size, unsigned char *buf, size_t cap,
                              size_t *len, uint64_t *offset)
{
    if (!buf || !len || !offset || size == 0)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_lock);
    struct segment *s = NULL;
    for (struct segment *t = g_segments; t && !s; t = t->next)
        if (ptr >= t->base && ptr < t->base + t->size)
            s = t;
    int r = 0;
    if (!s || !s->expandable || ptr + size > s->base + s->size)
        r = cudaErrorInvalidValue;
    size_t first = 0, n = 0;
    if (!r) {
        first = (ptr - s->base) / s->page;
        n = (ptr + size - s->base + s->page - 1) / s->page - first;
        if (sizeof(struct share_header) + n * sizeof(int32_t) > cap)
            r = cudaErrorInvalidValue;
    }
    for (size_t i = first; !r && i < first + n; i++) {
        if (!s->handles[i])
            r = cudaErrorInvalidValue;
        else if (s->fds[i] < 0) {
            int fd = -1;
            r = g_drv.export_handle(&fd, s->handles[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                    0);
            if (!r)
                s->fds[i] = fd;
        }
    }
    if (!r) {
        struct share_header h = {.pid = (int32_t)getpid(), .npages = (uint32_t)n, .page = s->page};
        memcpy(buf, &h, sizeof h);
        for (size_t i = 0; i < n; i++) {
            int32_t fd = s->fds[first + i];
            memcpy(buf + sizeof h + i * sizeof fd, &fd, sizeof fd);
        }
        *len = sizeof h + n * sizeof(int32_t);
        *offset = ptr - (s->base + first * s->page);
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

int c10_ipc_open_expandable(const unsigned char *buf, size_t len, uint64_t *base)
{
    struct share_header h;
    if (!buf || !base || len < sizeof h)
        return cudaErrorInvalidValue;
    memcpy(&h, buf, sizeof h);
    if (h.npages == 0 || len != sizeof h + h.npages * sizeof(int32_t))
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_lock);
    int r = load_driver();
    for (struct ipc_open *o = g_ipc; !r && o; o = o->next)
        if (o->blob && o->blob_len == len && memcmp(o->blob, buf, len) == 0) {
            o->refs++;
            *base = o->base;
            pthread_mutex_unlock(&g_lock);
            return 0;
        }
    pthread_mutex_unlock(&g_lock);
    if (r)
        return r;
    struct ipc_open *o = calloc(1, sizeof *o);
    if (o) {
        o->vmm = calloc(h.npages, sizeof *o->vmm);
        o->blob = malloc(len);
    }
    if (!o || !o->vmm || !o->blob) {
        if (o) {
            free(o->vmm);
            free(o->blob);
        }
        free(o);
        return cudaErrorMemoryAllocation;
    }
    memcpy(o->blob, buf, len);
    o->blob_len = len;
    o->npages = h.npages;
    o->page = h.page;
    int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)h.pid, 0);
    size_t imported = 0, mapped = 0;
    CUdeviceptr va = 0;
    r = pidfd < 0 ? cudaErrorInvalidResourceHandle : 0;
    for (; !r && imported < h.npages; imported++) {
        int32_t remote;
        memcpy(&remote, buf + sizeof h + imported * sizeof remote, sizeof remote);
        int fd = (int)syscall(SYS_pidfd_getfd, pidfd, remote, 0);
        if (fd < 0) {
            r = cudaErrorInvalidResourceHandle;
            break;
        }
        r = g_drv.import_handle(&o->vmm[imported], (void *)(uintptr_t)fd,
                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        close(fd);
        if (r)
            break;
    }
    if (pidfd >= 0)
        close(pidfd);
    if (!r)
        r = g_drv.address_reserve(&va, h.npages * h.page, 0, 0, 0);
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    int dev = 0;
    cudaGetDevice(&dev);
    access.location.id = dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (; !r && mapped < h.npages; mapped++) {
        r = g_drv.mem_map(va + mapped * h.page, h.page, 0, o->vmm[mapped], 0);
        if (!r && (r = g_drv.set_access(va + mapped * h.page, h.page, &access, 1)) != 0)
            g_drv.mem_unmap(va + mapped * h.page, h.page);
        if (r)
            break;
    }
    if (r) {
        for (size_t i = 0; i < mapped; i++)
            g_drv.mem_unmap(va + i * h.page, h.page);
        if (va)
            g_drv.address_free(va, h.npages * h.page);
        for (size_t i = 0; i < imported; i++)
            g_drv.mem_release(o->vmm[i]);
        free(o->vmm);
        free(o->blob);
        free(o);
        return r;
    }
    o->base = va;
    o->refs = 1;
    pthread_mutex_lock(&g_lock);
    o->next = g_ipc;
    g_ipc = o;
    pthread_mutex_unlock(&g_lock);
    *base = va;
    return 0;
}
