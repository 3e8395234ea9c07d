/*
 * fake_driver.c - a fake libcuda.so.1 (CUDA driver API) for machines without
 * a GPU.
 *
 * cutrace is an LD_PRELOAD tracer, so its tests must run the real preload
 * against libraries shaped like the real ones: same soname, same versioned
 * entry points (cuMemAlloc_v2, ...), the same cuGetProcAddress_v2 protocol the
 * real runtime uses, and the same error codes. Behind those entry points this
 * file simulates devices whose memory is only bookkeeping:
 *
 *   - device addresses come from a PROT_NONE range reserved per process, so
 *     they can be reused after a free and never alias host memory;
 *   - memory use is shared between processes through fake_state.c, so
 *     cuMemGetInfo agrees across ranks and a killed rank's memory comes back;
 *   - pinned host and managed memory are real, writable host mappings.
 *
 * Everything process-local is guarded by one mutex (g_mu); the shared file has
 * its own robust mutex, always taken inside g_mu. Entry points never call
 * each other through their exported names: they share static helpers, and the
 * library is linked -Bsymbolic, so cuGetProcAddress hands out this library's
 * own functions even when a preloaded tracer defines the same names.
 *
 * Facts (names, prototypes, codes, versions) come from the CUDA headers; see
 * docs/fakes.md for what is simulated and what is approximated.
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* declares the _v1 and _ptsz variants too */
#include <cuda.h>

#include "fake_block.h"
#include "fake_state.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAKE_DRIVER_VERSION 13000
#define MAX_DEV             FS_MAX_DEVICES
#define GRAN                (2ull << 20) /* VMM granularity and large-allocation alignment */
#define SMALL_ALIGN         512ull
#define CTX_STACK_MAX       32
#define GiB                 (1ull << 30)

#define MAGIC_CTX    0x43545831u
#define MAGIC_STREAM 0x53545231u
#define MAGIC_GRAPH  0x47524131u
#define MAGIC_EXEC   0x45584531u
#define MAGIC_POOL   0x504f4f31u

/* ------------------------------------------------------------------------ */
/* Error names and strings                                                    */
/* ------------------------------------------------------------------------ */

/* Names are the enumerators themselves, so the table cannot drift from cuda.h. */
#define CU_ERROR_LIST(X)                                                                           \
    X(CUDA_SUCCESS, "no error")                                                                    \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                                \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                   \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                          \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                            \
    X(CUDA_ERROR_PROFILER_DISABLED, "profiler disabled")                                           \
    X(CUDA_ERROR_PROFILER_NOT_INITIALIZED, "profiler not initialized")                             \
    X(CUDA_ERROR_PROFILER_ALREADY_STARTED, "profiler already started")                             \
    X(CUDA_ERROR_PROFILER_ALREADY_STOPPED, "profiler already stopped")                             \
    X(CUDA_ERROR_STUB_LIBRARY, "stub library loaded instead of the driver")                        \
    X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "call requires a newer driver")                       \
    X(CUDA_ERROR_DEVICE_UNAVAILABLE, "device unavailable")                                         \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                                  \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                         \
    X(CUDA_ERROR_DEVICE_NOT_LICENSED, "device not licensed")                                       \
    X(CUDA_ERROR_INVALID_IMAGE, "invalid device kernel image")                                     \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                        \
    X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current")                               \
    X(CUDA_ERROR_MAP_FAILED, "mapping failed")                                                     \
    X(CUDA_ERROR_UNMAP_FAILED, "unmapping failed")                                                 \
    X(CUDA_ERROR_ARRAY_IS_MAPPED, "array is mapped")                                               \
    X(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped")                                        \
    X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image for the device")                              \
    X(CUDA_ERROR_ALREADY_ACQUIRED, "resource already acquired")                                    \
    X(CUDA_ERROR_NOT_MAPPED, "resource not mapped")                                                \
    X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "resource not mapped as array")                              \
    X(CUDA_ERROR_NOT_MAPPED_AS_POINTER, "resource not mapped as pointer")                          \
    X(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error")                                     \
    X(CUDA_ERROR_UNSUPPORTED_LIMIT, "limit not supported")                                         \
    X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "context already in use")                                 \
    X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access unsupported")                               \
    X(CUDA_ERROR_INVALID_PTX, "invalid PTX")                                                       \
    X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "invalid graphics context")                             \
    X(CUDA_ERROR_NVLINK_UNCORRECTABLE, "uncorrectable NVLink error")                               \
    X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "JIT compiler not found")                                 \
    X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "unsupported PTX version")                               \
    X(CUDA_ERROR_JIT_COMPILATION_DISABLED, "JIT compilation disabled")                             \
    X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "execution affinity not supported")                    \
    X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "device-side synchronization not supported")            \
    X(CUDA_ERROR_CONTAINED, "contained error")                                                     \
    X(CUDA_ERROR_INVALID_SOURCE, "invalid source")                                                 \
    X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")                                                 \
    X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found")                 \
    X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed")                 \
    X(CUDA_ERROR_OPERATING_SYSTEM, "operating system call failed")                                 \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                        \
    X(CUDA_ERROR_ILLEGAL_STATE, "illegal state")                                                   \
    X(CUDA_ERROR_LOSSY_QUERY, "lossy query")                                                       \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                              \
    X(CUDA_ERROR_NOT_READY, "device not ready")                                                    \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "illegal memory access")                                         \
    X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch")               \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, "launch timed out")                                               \
    X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "incompatible texturing")                          \
    X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access already enabled")                       \
    X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access not enabled")                               \
    X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "primary context active")                                 \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")                                     \
    X(CUDA_ERROR_ASSERT, "device-side assert triggered")                                           \
    X(CUDA_ERROR_TOO_MANY_PEERS, "too many peers")                                                 \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "host memory already registered")                 \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "host memory not registered")                         \
    X(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error")                                     \
    X(CUDA_ERROR_ILLEGAL_INSTRUCTION, "illegal instruction")                                       \
    X(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address")                                         \
    X(CUDA_ERROR_INVALID_ADDRESS_SPACE, "invalid address space")                                   \
    X(CUDA_ERROR_INVALID_PC, "invalid program counter")                                            \
    X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                                      \
    X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "cooperative launch too large")                     \
    X(CUDA_ERROR_TENSOR_MEMORY_LEAK, "tensor memory leak")                                         \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                                         \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                         \
    X(CUDA_ERROR_SYSTEM_NOT_READY, "system not ready")                                             \
    X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system driver mismatch")                                 \
    X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "forward compatibility not supported")            \
    X(CUDA_ERROR_MPS_CONNECTION_FAILED, "MPS connection failed")                                   \
    X(CUDA_ERROR_MPS_RPC_FAILURE, "MPS RPC failure")                                               \
    X(CUDA_ERROR_MPS_SERVER_NOT_READY, "MPS server not ready")                                     \
    X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "MPS client limit reached")                              \
    X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "MPS connection limit reached")                      \
    X(CUDA_ERROR_MPS_CLIENT_TERMINATED, "MPS client terminated")                                   \
    X(CUDA_ERROR_CDP_NOT_SUPPORTED, "dynamic parallelism not supported")                           \
    X(CUDA_ERROR_CDP_VERSION_MISMATCH, "dynamic parallelism version mismatch")                     \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing")   \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "stream capture invalidated")                         \
    X(CUDA_ERROR_STREAM_CAPTURE_MERGE, "stream capture merge not permitted")                       \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "stream capture unmatched")                             \
    X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "stream capture unjoined")                               \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "stream capture isolation violated")                    \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "implicit dependency on a capturing stream")             \
    X(CUDA_ERROR_CAPTURED_EVENT, "operation not permitted on a captured event")                    \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "capture ended from the wrong thread")               \
    X(CUDA_ERROR_TIMEOUT, "timeout")                                                               \
    X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "graph update not performed")                          \
    X(CUDA_ERROR_EXTERNAL_DEVICE, "external device error")                                         \
    X(CUDA_ERROR_INVALID_CLUSTER_SIZE, "invalid cluster size")                                     \
    X(CUDA_ERROR_FUNCTION_NOT_LOADED, "function not loaded")                                       \
    X(CUDA_ERROR_INVALID_RESOURCE_TYPE, "invalid resource type")                                   \
    X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "invalid resource configuration")                 \
    X(CUDA_ERROR_KEY_ROTATION, "key rotation error")                                               \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

struct err_entry {
    CUresult code;
    const char *name;
    const char *text;
};

static const struct err_entry g_errors[] = {
#define ERR_ENTRY(code, text) {code, #code, text},
    CU_ERROR_LIST(ERR_ENTRY)
#undef ERR_ENTRY
};

static const struct err_entry *find_error(CUresult e)
{
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].code == e)
            return &g_errors[i];
    return NULL;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct err_entry *e = find_error(error);
    *pStr = e ? e->text : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct err_entry *e = find_error(error);
    *pStr = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ------------------------------------------------------------------------ */
/* Process-local state                                                        */
/* ------------------------------------------------------------------------ */

struct CUctx_st {
    uint32_t magic;
    uint64_t id;
    int ordinal; /* CUdevice, i.e. index among the visible devices */
    int phys;    /* physical index: the accounting and UUID key */
    int primary;
    int refcount; /* primary only: outstanding retains */
    int active;   /* its context memory is charged and it may own allocations */
    struct CUctx_st *next;
};

struct CUstream_st {
    uint32_t magic;
    uint64_t id;
    struct CUctx_st *ctx;
    unsigned flags;
    struct capture {
        int active;
        int invalidated;
        CUstreamCaptureMode mode;
        uint64_t nodes;
    } cap;
    struct CUstream_st *next;
};

struct CUgraph_st {
    uint32_t magic;
    uint64_t id;
    uint64_t nodes;
    struct CUgraph_st *next;
};

struct CUgraphExec_st {
    uint32_t magic;
    uint64_t id;
    uint64_t graph_id;
    uint64_t nodes;
    struct CUgraphExec_st *next;
};

struct CUmemPoolHandle_st {
    uint32_t magic;
    int ordinal;
    int is_default;
    struct CUmemPoolHandle_st *next;
};

enum akind {
    A_DEVICE,  /* cuMemAlloc, cuMemAllocPitch: may be exported over IPC */
    A_ASYNC,   /* stream-ordered and pool allocations */
    A_MANAGED, /* real host memory, not charged */
    A_HOST,    /* pinned host memory, real, not charged */
    A_IPC,     /* a peer's allocation opened here, not charged */
    A_VA,      /* cuMemAddressReserve range */
};

struct alloc {
    CUdeviceptr base;
    size_t size; /* as requested; what cuMemGetAddressRange reports */
    size_t span; /* bytes taken from the arena, or mapped for host kinds */
    enum akind kind;
    struct CUctx_st *ctx; /* owner; NULL for A_VA */
    int phys;             /* device charged, -1 for none */
    uint64_t charged;
    uint64_t id;
    int exported;
    int refs; /* A_IPC: opens in this context */
    int32_t peer_pid;
    uint64_t peer_start, peer_id;
};

struct vmm_phys {
    CUmemGenericAllocationHandle handle;
    size_t size;
    int phys; /* -1 for host memory */
    uint64_t charged;
    int handle_refs; /* cuMemCreate/import minus cuMemRelease */
    int maps;        /* live cuMemMap ranges */
    unsigned long long handle_types;
    struct vmm_phys *next;
};

struct vmm_map {
    CUdeviceptr base;
    size_t size;
    struct vmm_phys *phys;
    struct vmm_map *next;
};

struct extent {
    uintptr_t start;
    size_t len;
};

struct config {
    int nphys;
    uint64_t mem;
    uint64_t ctx_mem;
    char name[256];
    char seed[256];
    CUuuid uuid[MAX_DEV];
    int nvis;
    int vis[MAX_DEV]; /* ordinal -> physical index */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_init_done;
static CUresult g_init_result = CUDA_ERROR_NOT_INITIALIZED;
static uint64_t g_epoch = 1; /* bumped in a forked child to invalidate every thread's TLS */
static uint64_t g_next_id = 1;
static struct config g_cfg;

static struct CUctx_st g_primary[MAX_DEV];
static struct CUctx_st *g_ctxs;
static struct CUstream_st *g_streams;
static struct CUgraph_st *g_graphs;
static struct CUgraphExec_st *g_execs;
static struct CUmemPoolHandle_st g_default_pool[MAX_DEV];
static struct CUmemPoolHandle_st *g_pools;
static struct vmm_phys *g_vmm_phys;
static struct vmm_map *g_vmm_maps;

static struct alloc **g_allocs; /* sorted by base */
static size_t g_nallocs, g_cap_allocs;

static uintptr_t g_arena_base;
static size_t g_arena_size;
static struct extent *g_free; /* sorted, coalesced free ranges of the arena */
static size_t g_nfree, g_cap_free;

struct tls_state {
    uint64_t epoch;
    int depth;
    struct {
        struct CUctx_st *ctx;
        uint64_t id;
    } stack[CTX_STACK_MAX];
    struct capture ptds_cap; /* the per-thread default stream's capture */
};
static __thread struct tls_state t_tls;

static struct tls_state *tls(void)
{
    if (t_tls.epoch != g_epoch) {
        memset(&t_tls, 0, sizeof t_tls);
        t_tls.epoch = g_epoch;
    }
    return &t_tls;
}

static void lock(void)
{
    int r = pthread_mutex_lock(&g_mu);
    assert(r == 0);
    (void)r;
}

static void unlock(void)
{
    int r = pthread_mutex_unlock(&g_mu);
    assert(r == 0);
    (void)r;
}

/* Takes the lock; the caller unlocks whatever this returns. */
static CUresult enter(void)
{
    lock();
    if (!g_init_done || g_init_result != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    return CUDA_SUCCESS;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static int dev_valid(CUdevice d)
{
    return d >= 0 && d < g_cfg.nvis;
}

/* ------------------------------------------------------------------------ */
/* Configuration                                                              */
/* ------------------------------------------------------------------------ */

__attribute__((format(printf, 1, 2))) static void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cutrace fake libcuda: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Whole numbers with an optional binary suffix: "96G", "512M", "1Ki", "1048576". */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno != 0 || strchr(s, '-')) /* strtoull would negate "-1" */
        return -1;
    uint64_t mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        mul = 1ull << 10;
        end++;
        break;
    case 'M':
        mul = 1ull << 20;
        end++;
        break;
    case 'G':
        mul = 1ull << 30;
        end++;
        break;
    case 'T':
        mul = 1ull << 40;
        end++;
        break;
    default:
        break;
    }
    if (mul > 1 && *end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || (v != 0 && mul > UINT64_MAX / v))
        return -1;
    *out = v * mul;
    return 0;
}

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Deterministic in (seed, physical index): two simulated hosts differ by seed. */
static void make_uuid(const char *seed, int phys, CUuuid *u)
{
    uint64_t s = fnv1a(seed, strlen(seed), 0xcbf29ce484222325ull);
    uint32_t idx = (uint32_t)phys;
    s = fnv1a(&idx, sizeof idx, s);
    uint64_t w[2] = {splitmix(&s), splitmix(&s)};
    memcpy(u->bytes, w, sizeof u->bytes);
}

static void uuid_string(const CUuuid *u, char *buf, size_t len)
{
    const unsigned char *b = (const unsigned char *)u->bytes;
    snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* PCI location of a physical device: distinct for every index. */
static void pci_location(int phys, int *domain, int *bus)
{
    *domain = phys / 15;
    *bus = 0x18 + 0x10 * (phys % 15);
}

/*
 * CUDA_VISIBLE_DEVICES like the real driver: indices or GPU-UUID prefixes, in
 * the order given; the first invalid (or repeated) entry ends the list.
 */
static void parse_visible(const char *env)
{
    g_cfg.nvis = 0;
    if (!env) {
        for (int i = 0; i < g_cfg.nphys; i++)
            g_cfg.vis[g_cfg.nvis++] = i;
        return;
    }
    char *copy = strdup(env);
    if (!copy)
        return;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok))
            tok++;
        size_t n = strlen(tok);
        while (n > 0 && isspace((unsigned char)tok[n - 1]))
            tok[--n] = '\0';
        int phys = -1;
        if (strncmp(tok, "GPU-", 4) == 0 && n > 4) {
            for (int i = 0; i < g_cfg.nphys; i++) {
                char u[64];
                uuid_string(&g_cfg.uuid[i], u, sizeof u);
                if (strncmp(u, tok, n) == 0) {
                    if (phys >= 0) { /* ambiguous prefix */
                        phys = -1;
                        break;
                    }
                    phys = i;
                }
            }
        } else if (n > 0) {
            char *end;
            long v = strtol(tok, &end, 10);
            if (*end == '\0' && v >= 0 && v < g_cfg.nphys)
                phys = (int)v;
        }
        for (int i = 0; phys >= 0 && i < g_cfg.nvis; i++)
            if (g_cfg.vis[i] == phys)
                phys = -1;
        if (phys < 0)
            break;
        g_cfg.vis[g_cfg.nvis++] = phys;
    }
    free(copy);
}

static void read_config(void)
{
    const char *s;
    uint64_t v;
    g_cfg.nphys = 1;
    if ((s = getenv("CUTRACE_FAKE_GPUS")) != NULL) {
        char *end;
        long n = strtol(s, &end, 10);
        if (end != s && *end == '\0' && n >= 0 && n <= MAX_DEV)
            g_cfg.nphys = (int)n;
        else
            warn("ignoring CUTRACE_FAKE_GPUS=%s (0..%d)", s, MAX_DEV);
    }
    g_cfg.mem = 96 * GiB;
    if ((s = getenv("CUTRACE_FAKE_GPU_MEM")) != NULL) {
        if (parse_size(s, &v) == 0 && v > 0)
            g_cfg.mem = v;
        else
            warn("ignoring CUTRACE_FAKE_GPU_MEM=%s", s);
    }
    g_cfg.ctx_mem = 512ull << 20;
    if ((s = getenv("CUTRACE_FAKE_CTX_MEM")) != NULL) {
        if (parse_size(s, &v) == 0)
            g_cfg.ctx_mem = v;
        else
            warn("ignoring CUTRACE_FAKE_CTX_MEM=%s", s);
    }
    s = getenv("CUTRACE_FAKE_GPU_NAME");
    snprintf(g_cfg.name, sizeof g_cfg.name, "%s", s ? s : "NVIDIA H200 (cutrace fake)");
    s = getenv("CUTRACE_FAKE_UUID_SEED");
    if (s) {
        snprintf(g_cfg.seed, sizeof g_cfg.seed, "%s", s);
    } else if (gethostname(g_cfg.seed, sizeof g_cfg.seed - 1) != 0) {
        snprintf(g_cfg.seed, sizeof g_cfg.seed, "localhost");
    }
    for (int i = 0; i < g_cfg.nphys; i++)
        make_uuid(g_cfg.seed, i, &g_cfg.uuid[i]);
    parse_visible(getenv("CUDA_VISIBLE_DEVICES"));
}

/* The default state path lives in a per-user directory that must be ours. */
static int state_path(char *buf, size_t len, char *err, size_t errlen)
{
    const char *s = getenv("CUTRACE_FAKE_STATE");
    if (s && *s) {
        snprintf(buf, len, "%s", s);
        return 0;
    }
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/cutrace-fake-%u", (unsigned)getuid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
        snprintf(err, errlen, "%s is not a directory owned by this user", dir);
        return -1;
    }
    char seed[sizeof g_cfg.seed];
    size_t i = 0;
    for (; g_cfg.seed[i] && i < sizeof seed - 1; i++) {
        unsigned char c = (unsigned char)g_cfg.seed[i];
        seed[i] = (isalnum(c) || c == '.' || c == '-' || c == '_') ? (char)c : '_';
    }
    seed[i] = '\0';
    snprintf(buf, len, "%s/state-%s", dir, seed);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Device address arena                                                       */
/* ------------------------------------------------------------------------ */

static int free_reserve(size_t n)
{
    if (n <= g_cap_free)
        return 0;
    size_t cap = g_cap_free ? g_cap_free * 2 : 64;
    while (cap < n)
        cap *= 2;
    struct extent *p = realloc(g_free, cap * sizeof *p);
    if (!p)
        return -1;
    g_free = p;
    g_cap_free = cap;
    return 0;
}

/* Removes [a, a+len) from free extent i, which must contain it. */
static int carve(size_t i, uintptr_t a, size_t len)
{
    struct extent e = g_free[i];
    assert(a >= e.start && a + len <= e.start + e.len);
    size_t before = a - e.start, after = e.start + e.len - (a + len);
    if (before && after) {
        if (free_reserve(g_nfree + 1) != 0)
            return -1;
        memmove(&g_free[i + 2], &g_free[i + 1], (g_nfree - i - 1) * sizeof *g_free);
        g_free[i] = (struct extent){e.start, before};
        g_free[i + 1] = (struct extent){a + len, after};
        g_nfree++;
    } else if (before) {
        g_free[i].len = before;
    } else if (after) {
        g_free[i] = (struct extent){a + len, after};
    } else {
        memmove(&g_free[i], &g_free[i + 1], (g_nfree - i - 1) * sizeof *g_free);
        g_nfree--;
    }
    return 0;
}

/* First fit, lowest address first: a freed range is handed out again. */
static int arena_alloc(size_t len, size_t align, uintptr_t *out)
{
    for (size_t i = 0; i < g_nfree; i++) {
        uintptr_t a = (uintptr_t)align_up(g_free[i].start, align);
        if (a < g_free[i].start + g_free[i].len && g_free[i].start + g_free[i].len - a >= len) {
            if (carve(i, a, len) != 0)
                return -1;
            *out = a;
            return 0;
        }
    }
    return -1;
}

/* Takes exactly [a, a+len) if it is free (cuMemAddressReserve's address hint). */
static int arena_take(uintptr_t a, size_t len)
{
    for (size_t i = 0; i < g_nfree; i++)
        if (a >= g_free[i].start && a + len <= g_free[i].start + g_free[i].len)
            return carve(i, a, len);
    return -1;
}

static void arena_release(uintptr_t a, size_t len)
{
    assert(a >= g_arena_base && a + len <= g_arena_base + g_arena_size);
    size_t i = 0;
    while (i < g_nfree && g_free[i].start < a)
        i++;
    assert(i == 0 || g_free[i - 1].start + g_free[i - 1].len <= a);
    assert(i == g_nfree || a + len <= g_free[i].start);
    int join_prev = i > 0 && g_free[i - 1].start + g_free[i - 1].len == a;
    int join_next = i < g_nfree && a + len == g_free[i].start;
    if (join_prev && join_next) {
        g_free[i - 1].len += len + g_free[i].len;
        memmove(&g_free[i], &g_free[i + 1], (g_nfree - i - 1) * sizeof *g_free);
        g_nfree--;
    } else if (join_prev) {
        g_free[i - 1].len += len;
    } else if (join_next) {
        g_free[i].start = a;
        g_free[i].len += len;
    } else {
        if (free_reserve(g_nfree + 1) != 0)
            return; /* leaks address space only, never memory accounting */
        memmove(&g_free[i + 1], &g_free[i], (g_nfree - i) * sizeof *g_free);
        g_free[i] = (struct extent){a, len};
        g_nfree++;
    }
}

static int in_arena(uintptr_t p)
{
    return g_arena_size && p >= g_arena_base && p < g_arena_base + g_arena_size;
}

static void arena_reset(void)
{
    g_nfree = 0;
    if (g_arena_size && free_reserve(1) == 0) {
        g_free[0] = (struct extent){g_arena_base, g_arena_size};
        g_nfree = 1;
    }
}

/*
 * Enough address space for every device twice over plus slack for imports
 * and reservations; smaller if the system (or a sanitizer) refuses.
 */
static int arena_create(void)
{
    uint64_t want = 64 * GiB;
    for (int i = 0; i < g_cfg.nphys; i++)
        want = want + 2 * g_cfg.mem > want ? want + 2 * g_cfg.mem : UINT64_MAX;
    if (want > (32ull << 40))
        want = 32ull << 40;
    for (uint64_t size = align_up(want, GRAN); size >= 4 * GiB; size /= 2) {
        void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            g_arena_base = (uintptr_t)p;
            g_arena_size = size;
            arena_reset();
            return g_nfree == 1 ? 0 : -1;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Allocation table                                                           */
/* ------------------------------------------------------------------------ */

/* Index of the last allocation whose base is <= p, or -1. */
static ptrdiff_t find_le(CUdeviceptr p)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)g_nallocs - 1, best = -1;
    while (lo <= hi) {
        ptrdiff_t mid = lo + (hi - lo) / 2;
        if (g_allocs[mid]->base <= p) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return best;
}

static struct alloc *find_exact(CUdeviceptr p)
{
    ptrdiff_t i = find_le(p);
    return i >= 0 && g_allocs[i]->base == p ? g_allocs[i] : NULL;
}

static struct alloc *find_containing(CUdeviceptr p)
{
    ptrdiff_t i = find_le(p);
    if (i < 0)
        return NULL;
    struct alloc *a = g_allocs[i];
    return p - a->base < a->size ? a : NULL;
}

static int table_insert(struct alloc *a)
{
    if (g_nallocs == g_cap_allocs) {
        size_t cap = g_cap_allocs ? g_cap_allocs * 2 : 256;
        struct alloc **p = realloc(g_allocs, cap * sizeof *p);
        if (!p)
            return -1;
        g_allocs = p;
        g_cap_allocs = cap;
    }
    size_t i = (size_t)(find_le(a->base) + 1);
    assert(i == 0 || g_allocs[i - 1]->base != a->base);
    memmove(&g_allocs[i + 1], &g_allocs[i], (g_nallocs - i) * sizeof *g_allocs);
    g_allocs[i] = a;
    g_nallocs++;
    return 0;
}

static void table_remove(struct alloc *a)
{
    ptrdiff_t i = find_le(a->base);
    assert(i >= 0 && g_allocs[i] == a);
    memmove(&g_allocs[i], &g_allocs[i + 1], (g_nallocs - (size_t)i - 1) * sizeof *g_allocs);
    g_nallocs--;
}

static int is_host_kind(enum akind k)
{
    return k == A_HOST || k == A_MANAGED;
}

/* Releases everything an allocation holds: address range, accounting, export. */
static void alloc_destroy(struct alloc *a)
{
    table_remove(a);
    if (is_host_kind(a->kind))
        munmap((void *)(uintptr_t)a->base, a->span);
    else
        arena_release((uintptr_t)a->base, a->span);
    if (a->charged)
        fs_uncharge(a->phys, a->charged);
    if (a->exported)
        fs_export_remove(a->id);
    free(a);
}

static size_t small_or_large_align(size_t size)
{
    return size >= GRAN ? GRAN : SMALL_ALIGN;
}

/* Reserves device addresses; charges phys (when >= 0) with charge bytes. */
static CUresult device_range(struct CUctx_st *ctx, enum akind kind, int phys, size_t size,
                             uint64_t charge, struct alloc **out)
{
    size_t align = small_or_large_align(size);
    if (size > SIZE_MAX - align)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t span = align_up(size, align);
    assert(span >= size && size > 0);
    struct alloc *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base;
    if (arena_alloc(span, align, &base) != 0) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (phys >= 0 && charge && fs_charge(phys, charge, g_cfg.mem) != 0) {
        arena_release(base, span);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *a = (struct alloc){.base = base,
                        .size = size,
                        .span = span,
                        .kind = kind,
                        .ctx = ctx,
                        .phys = phys,
                        .charged = phys >= 0 ? charge : 0,
                        .id = g_next_id++};
    if (table_insert(a) != 0) {
        if (a->charged)
            fs_uncharge(phys, charge);
        arena_release(base, span);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = a;
    return CUDA_SUCCESS;
}

/* Real, writable, page-aligned host memory (pinned and managed). */
static CUresult host_range(struct CUctx_st *ctx, enum akind kind, size_t size, struct alloc **out)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size > SIZE_MAX - page)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t span = align_up(size, page);
    struct alloc *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *a = (struct alloc){.base = (uintptr_t)p,
                        .size = size,
                        .span = span,
                        .kind = kind,
                        .ctx = ctx,
                        .phys = -1,
                        .id = g_next_id++};
    if (table_insert(a) != 0) {
        munmap(p, span);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = a;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Contexts                                                                   */
/* ------------------------------------------------------------------------ */

static int ctx_is_primary_handle(const struct CUctx_st *c)
{
    return c >= &g_primary[0] && c < &g_primary[MAX_DEV];
}

static struct CUctx_st *ctx_lookup(CUcontext c, uint64_t id)
{
    if (!c)
        return NULL;
    if (ctx_is_primary_handle(c))
        return c - &g_primary[0] < g_cfg.nvis && (id == 0 || c->id == id) ? c : NULL;
    for (struct CUctx_st *x = g_ctxs; x; x = x->next)
        if (x == c && (id == 0 || x->id == id))
            return x;
    return NULL;
}

static CUresult ctx_activate(struct CUctx_st *c)
{
    assert(!c->active);
    if (g_cfg.ctx_mem && fs_charge(c->phys, g_cfg.ctx_mem, g_cfg.mem) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->active = 1;
    return CUDA_SUCCESS;
}

/* Frees what the context owns and gives its context memory back. */
static void ctx_teardown(struct CUctx_st *c)
{
    /* Backwards, so removing entry i leaves the unvisited ones in place. */
    for (size_t i = g_nallocs; i-- > 0;) {
        struct alloc *a = g_allocs[i];
        if (a->ctx == c)
            alloc_destroy(a);
    }
    for (struct CUstream_st **pp = &g_streams; *pp;) {
        struct CUstream_st *s = *pp;
        if (s->ctx == c) {
            *pp = s->next;
            free(s);
        } else {
            pp = &s->next;
        }
    }
    if (c->active && g_cfg.ctx_mem)
        fs_uncharge(c->phys, g_cfg.ctx_mem);
    c->active = 0;
    for (size_t i = 0; i < g_nallocs; i++)
        assert(g_allocs[i]->ctx != c);
}

static struct CUctx_st *tls_top(void)
{
    struct tls_state *t = tls();
    if (t->depth == 0)
        return NULL;
    return ctx_lookup(t->stack[t->depth - 1].ctx, t->stack[t->depth - 1].id);
}

/*
 * The context calls run in. A primary context reset while still retained
 * comes back (and is charged again) on first use, as the real one does.
 */
static CUresult current_ctx(struct CUctx_st **out, int need_active)
{
    struct CUctx_st *c = tls_top();
    if (!c || (c->primary && c->refcount == 0))
        return CUDA_ERROR_INVALID_CONTEXT;
    assert(c->phys >= 0 && c->phys < g_cfg.nphys);
    if (need_active && !c->active) {
        CUresult r = ctx_activate(c);
        if (r != CUDA_SUCCESS)
            return r;
    }
    *out = c;
    return CUDA_SUCCESS;
}

static CUresult tls_push(struct CUctx_st *c)
{
    struct tls_state *t = tls();
    if (t->depth == CTX_STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    t->stack[t->depth].ctx = c;
    t->stack[t->depth].id = c->id;
    t->depth++;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Initialisation and fork                                                    */
/* ------------------------------------------------------------------------ */

static void atfork_prepare(void)
{
    lock();
}

static void atfork_parent(void)
{
    unlock();
}

/*
 * The child is a new process for the fake: it keeps the configuration and the
 * mapping of the state file, but none of the parent's contexts, allocations
 * or accounting slot. Host mappings stay mapped (they are the child's copy).
 */
static void atfork_child(void)
{
    for (size_t i = 0; i < g_nallocs; i++)
        free(g_allocs[i]);
    g_nallocs = 0;
    arena_reset();
    while (g_ctxs) {
        struct CUctx_st *c = g_ctxs;
        g_ctxs = c->next;
        free(c);
    }
    for (int i = 0; i < MAX_DEV; i++) {
        g_primary[i].refcount = 0;
        g_primary[i].active = 0;
    }
    while (g_streams) {
        struct CUstream_st *s = g_streams;
        g_streams = s->next;
        free(s);
    }
    while (g_graphs) {
        struct CUgraph_st *g = g_graphs;
        g_graphs = g->next;
        free(g);
    }
    while (g_execs) {
        struct CUgraphExec_st *e = g_execs;
        g_execs = e->next;
        free(e);
    }
    while (g_pools) {
        struct CUmemPoolHandle_st *p = g_pools;
        g_pools = p->next;
        free(p);
    }
    while (g_vmm_maps) {
        struct vmm_map *m = g_vmm_maps;
        g_vmm_maps = m->next;
        free(m);
    }
    while (g_vmm_phys) {
        struct vmm_phys *p = g_vmm_phys;
        g_vmm_phys = p->next;
        free(p);
    }
    g_epoch++;
    fs_forget_after_fork();
    unlock();
}

/*
 * Registered when the library loads, not at cuInit: a fork while another
 * thread is inside cuInit (holding g_mu, before any later registration) must
 * still hand the child an unlocked g_mu, as the real driver's handlers do.
 * The handlers are safe before any initialisation (nothing to free).
 */
__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static CUresult init_locked(void)
{
    read_config();
    for (int i = 0; i < MAX_DEV; i++) {
        g_primary[i] = (struct CUctx_st){.magic = MAGIC_CTX,
                                         .id = g_next_id++,
                                         .ordinal = i,
                                         .phys = i < g_cfg.nvis ? g_cfg.vis[i] : -1,
                                         .primary = 1};
        g_default_pool[i] =
            (struct CUmemPoolHandle_st){.magic = MAGIC_POOL, .ordinal = i, .is_default = 1};
    }
    if (g_cfg.nvis == 0)
        return CUDA_ERROR_NO_DEVICE;
    char path[4096], err[512];
    if (state_path(path, sizeof path, err, sizeof err) != 0 ||
        fs_attach(path, err, sizeof err) != 0) {
        fprintf(stderr, "cutrace fake libcuda: %s\n", err);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    if (fs_join() != 0) {
        fprintf(stderr, "cutrace fake libcuda: every process slot of %s is in use\n", path);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    if (arena_create() != 0) {
        fprintf(stderr, "cutrace fake libcuda: cannot reserve device address space\n");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    if (!g_init_done) {
        g_init_result = init_locked();
        g_init_done = 1;
    }
    CUresult r = g_init_result;
    unlock();
    return r;
}

/* A process that exits normally gives its memory back at once. */
__attribute__((destructor)) static void fake_driver_fini(void)
{
    lock();
    if (g_init_done && g_init_result == CUDA_SUCCESS)
        fs_leave();
    unlock();
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = FAKE_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                    */
/* ------------------------------------------------------------------------ */

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !device)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(ordinal))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (r == CUDA_SUCCESS)
        *device = ordinal;
    unlock();
    return r;
}

CUresult cuDeviceGetCount(int *count)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !count)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS)
        *count = g_cfg.nvis;
    unlock();
    return r;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && (!name || len <= 0))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (r == CUDA_SUCCESS)
        snprintf(name, (size_t)len, "%s", g_cfg.name);
    unlock();
    return r;
}

static CUresult get_uuid(CUuuid *uuid, CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !uuid)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (r == CUDA_SUCCESS)
        *uuid = g_cfg.uuid[g_cfg.vis[dev]];
    unlock();
    return r;
}

/* Without MIG both versions return the GPU's UUID. */
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return get_uuid(uuid, dev);
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return get_uuid(uuid, dev);
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && (!pciBusId || len <= 0))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (r == CUDA_SUCCESS) {
        int domain, bus;
        pci_location(g_cfg.vis[dev], &domain, &bus);
        snprintf(pciBusId, (size_t)len, "%04X:%02X:00.0", domain, bus);
    }
    unlock();
    return r;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !bytes)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (r == CUDA_SUCCESS)
        *bytes = g_cfg.mem;
    unlock();
    return r;
}

static int attribute(CUdevice_attribute a, int phys, int *out)
{
    int domain, bus;
    pci_location(phys, &domain, &bus);
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *out = 9;
        return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *out = 0;
        return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        *out = bus;
        return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
        *out = 0;
        return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
        *out = domain;
        return 0;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *out = 132;
        return 0;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        *out = 32;
        return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *out = 1024;
        return 0;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
        *out = 0;
        return 0;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
        *out = 1;
        return 0;
    default:
        return -1;
    }
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !pi)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (r == CUDA_SUCCESS && attribute(attrib, g_cfg.vis[dev], pi) != 0)
        r = CUDA_ERROR_INVALID_VALUE;
    unlock();
    return r;
}

/* ------------------------------------------------------------------------ */
/* Context API                                                                */
/* ------------------------------------------------------------------------ */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS) {
        struct CUctx_st *c = &g_primary[dev];
        if (!c->active)
            r = ctx_activate(c);
        if (r == CUDA_SUCCESS) {
            c->refcount++;
            *pctx = c;
        }
    }
    unlock();
    return r;
}

static CUresult primary_release(CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (r == CUDA_SUCCESS && g_primary[dev].refcount == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS && --g_primary[dev].refcount == 0)
        ctx_teardown(&g_primary[dev]);
    assert(r != CUDA_SUCCESS || g_primary[dev].refcount >= 0);
    unlock();
    return r;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return primary_release(dev);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(dev);
}

/* Destroys the primary context's resources now; retains stay outstanding. */
static CUresult primary_reset(CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS)
        ctx_teardown(&g_primary[dev]);
    unlock();
    return r;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return primary_reset(dev);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return primary_reset(dev);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && (!flags || !active))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (r == CUDA_SUCCESS) {
        *flags = 0;
        *active = g_primary[dev].active && g_primary[dev].refcount > 0;
    }
    unlock();
    return r;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK)))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    struct CUctx_st *c = NULL;
    if (r == CUDA_SUCCESS && !(c = calloc(1, sizeof *c)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        *c = (struct CUctx_st){
            .magic = MAGIC_CTX, .id = g_next_id++, .ordinal = dev, .phys = g_cfg.vis[dev]};
        r = ctx_activate(c);
        if (r == CUDA_SUCCESS && (r = tls_push(c)) != CUDA_SUCCESS)
            ctx_teardown(c);
        if (r == CUDA_SUCCESS) {
            c->next = g_ctxs;
            g_ctxs = c;
            *pctx = c;
        } else {
            free(c);
        }
    }
    unlock();
    return r;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

/* Execution affinity only changes scheduling, which the fake does not have. */
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    if (ctxCreateParams && ctxCreateParams->numExecAffinityParams > 0 &&
        !ctxCreateParams->execAffinityParams)
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext ctx)
{
    CUresult r = enter();
    struct CUctx_st *c = r == CUDA_SUCCESS ? ctx_lookup(ctx, 0) : NULL;
    if (r == CUDA_SUCCESS && (!c || c->primary))
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        ctx_teardown(c);
        for (struct CUctx_st **pp = &g_ctxs; *pp; pp = &(*pp)->next) {
            if (*pp == c) {
                *pp = c->next;
                break;
            }
        }
        struct tls_state *t = tls();
        if (t->depth > 0 && t->stack[t->depth - 1].ctx == c)
            t->depth--;
        free(c);
    }
    unlock();
    return r;
}

CUresult cuCtxDestroy(CUcontext ctx)
{
    return ctx_destroy(ctx);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    return ctx_destroy(ctx);
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS)
        *pctx = tls_top();
    unlock();
    return r;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS) {
        struct tls_state *t = tls();
        struct CUctx_st *c = ctx_lookup(ctx, 0);
        if (!ctx) {
            if (t->depth > 0)
                t->depth--;
        } else if (!c) {
            r = CUDA_ERROR_INVALID_CONTEXT;
        } else if (t->depth == 0) {
            r = tls_push(c);
        } else {
            t->stack[t->depth - 1].ctx = c;
            t->stack[t->depth - 1].id = c->id;
        }
    }
    unlock();
    return r;
}

static CUresult ctx_push(CUcontext ctx)
{
    CUresult r = enter();
    struct CUctx_st *c = r == CUDA_SUCCESS ? ctx_lookup(ctx, 0) : NULL;
    if (r == CUDA_SUCCESS && !c)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS)
        r = tls_push(c);
    unlock();
    return r;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
    return ctx_push(ctx);
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    return ctx_push(ctx);
}

static CUresult ctx_pop(CUcontext *pctx)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS) {
        struct tls_state *t = tls();
        if (t->depth == 0) {
            r = CUDA_ERROR_INVALID_CONTEXT;
        } else {
            struct CUctx_st *c = ctx_lookup(t->stack[t->depth - 1].ctx, t->stack[t->depth - 1].id);
            t->depth--;
            if (pctx)
                *pctx = c;
        }
    }
    unlock();
    return r;
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    return ctx_pop(pctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    return ctx_pop(pctx);
}

static CUresult ctx_device(CUdevice *device, CUcontext ctx)
{
    CUresult r = enter();
    struct CUctx_st *c = NULL;
    if (r == CUDA_SUCCESS && !device)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && ctx)
        r = (c = ctx_lookup(ctx, 0)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    else if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 0);
    if (r == CUDA_SUCCESS)
        *device = c->ordinal;
    unlock();
    return r;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    return ctx_device(device, NULL);
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    return ctx_device(device, ctx);
}

/* Nothing ever runs on the fake device, so there is nothing to wait for. */
static CUresult ctx_sync(CUcontext ctx)
{
    CUresult r = enter();
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS && ctx)
        r = ctx_lookup(ctx, 0) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    else if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 0);
    unlock();
    return r;
}

CUresult cuCtxSynchronize(void)
{
    FAKE_BLOCK_POINT("cuCtxSynchronize");
    return ctx_sync(NULL);
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    FAKE_BLOCK_POINT("cuCtxSynchronize");
    return ctx_sync(ctx);
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                     */
/* ------------------------------------------------------------------------ */

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    CUresult r = enter();
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS && (!free_bytes || !total_bytes))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS) {
        uint64_t used = fs_used(c->phys);
        *total_bytes = g_cfg.mem;
        *free_bytes = used >= g_cfg.mem ? 0 : g_cfg.mem - used;
    }
    unlock();
    return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct alloc *a;
    if (r == CUDA_SUCCESS && (!dptr || bytesize == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS)
        r = device_range(c, A_DEVICE, c->phys, bytesize, bytesize, &a);
    if (r == CUDA_SUCCESS)
        *dptr = a->base;
    unlock();
    return r;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct alloc *a;
    size_t pitch = 0;
    if (r == CUDA_SUCCESS &&
        (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
         (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) ||
         WidthInBytes > SIZE_MAX - SMALL_ALIGN))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        pitch = align_up(WidthInBytes, SMALL_ALIGN);
        if (Height > SIZE_MAX / pitch)
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS)
        r = device_range(c, A_DEVICE, c->phys, pitch * Height, pitch * Height, &a);
    if (r == CUDA_SUCCESS) {
        *dptr = a->base;
        *pPitch = pitch;
    }
    unlock();
    return r;
}

/* cuMemFree frees device and managed memory; any context may free it (UVA). */
static CUresult free_device_locked(CUdeviceptr dptr)
{
    struct CUctx_st *c;
    CUresult r = current_ctx(&c, 0);
    if (r != CUDA_SUCCESS)
        return r;
    struct alloc *a = find_exact(dptr);
    if (!a || (a->kind != A_DEVICE && a->kind != A_ASYNC && a->kind != A_MANAGED))
        return CUDA_ERROR_INVALID_VALUE;
    alloc_destroy(a);
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS)
        r = free_device_locked(dptr);
    unlock();
    return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct alloc *a;
    if (r == CUDA_SUCCESS &&
        (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS)
        r = host_range(c, A_MANAGED, bytesize, &a);
    if (r == CUDA_SUCCESS)
        *dptr = a->base;
    unlock();
    return r;
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int flags)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct alloc *a;
    unsigned valid =
        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
    if (r == CUDA_SUCCESS && (!pp || bytesize == 0 || (flags & ~valid)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS)
        r = host_range(c, A_HOST, bytesize, &a);
    if (r == CUDA_SUCCESS)
        *pp = (void *)(uintptr_t)a->base;
    unlock();
    return r;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return host_alloc(pp, bytesize, 0);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    return host_alloc(pp, bytesize, Flags);
}

CUresult cuMemFreeHost(void *p)
{
    CUresult r = enter();
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 0);
    if (r == CUDA_SUCCESS) {
        struct alloc *a = find_exact((uintptr_t)p);
        if (a && a->kind == A_HOST)
            alloc_destroy(a);
        else
            r = CUDA_ERROR_INVALID_VALUE;
    }
    unlock();
    return r;
}

static struct vmm_map *find_mapping(CUdeviceptr p)
{
    for (struct vmm_map *m = g_vmm_maps; m; m = m->next)
        if (p >= m->base && p - m->base < m->size)
            return m;
    return NULL;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUresult r = enter();
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 0);
    if (r == CUDA_SUCCESS) {
        struct alloc *a = find_containing(dptr);
        struct vmm_map *m = NULL;
        CUdeviceptr base = 0;
        size_t size = 0;
        if (a && a->kind != A_VA) {
            base = a->base;
            size = a->size;
        } else if ((m = find_mapping(dptr)) != NULL) {
            base = m->base;
            size = m->size;
        } else {
            r = CUDA_ERROR_NOT_FOUND;
        }
        if (r == CUDA_SUCCESS && pbase)
            *pbase = base;
        if (r == CUDA_SUCCESS && psize)
            *psize = size;
    }
    unlock();
    return r;
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                    */
/* ------------------------------------------------------------------------ */

enum stream_kind { S_LEGACY, S_PER_THREAD, S_USER };

struct stream_ref {
    enum stream_kind kind;
    struct CUstream_st *s;
    struct capture *cap; /* NULL for the legacy stream, which cannot capture */
};

static struct CUstream_st *stream_lookup(CUstream h)
{
    for (struct CUstream_st *s = g_streams; s; s = s->next)
        if (s == h)
            return s;
    return NULL;
}

/* The NULL stream is legacy for plain entry points, per-thread for _ptsz. */
static CUresult resolve_stream(CUstream h, int ptsz, struct stream_ref *out)
{
    if (h == NULL)
        h = ptsz ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (h == CU_STREAM_LEGACY) {
        *out = (struct stream_ref){S_LEGACY, NULL, NULL};
    } else if (h == CU_STREAM_PER_THREAD) {
        *out = (struct stream_ref){S_PER_THREAD, NULL, &tls()->ptds_cap};
    } else {
        struct CUstream_st *s = stream_lookup(h);
        if (!s)
            return CUDA_ERROR_INVALID_HANDLE;
        *out = (struct stream_ref){S_USER, s, &s->cap};
    }
    return CUDA_SUCCESS;
}

/* A user stream works in its own context; the default streams in the current one. */
static CUresult stream_ctx(const struct stream_ref *sr, struct CUctx_st **out)
{
    if (sr->kind == S_USER) {
        struct CUctx_st *c = sr->s->ctx;
        if (!c->active) {
            CUresult r = ctx_activate(c);
            if (r != CUDA_SUCCESS)
                return r;
        }
        *out = c;
        return CUDA_SUCCESS;
    }
    return current_ctx(out, 1);
}

static void note_captured_op(const struct stream_ref *sr)
{
    if (sr->cap && sr->cap->active)
        sr->cap->nodes++;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct CUstream_st *s = NULL;
    if (r == CUDA_SUCCESS && (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS && !(s = calloc(1, sizeof *s)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        *s = (struct CUstream_st){
            .magic = MAGIC_STREAM, .id = g_next_id++, .ctx = c, .flags = Flags, .next = g_streams};
        g_streams = s;
        *phStream = s;
    }
    unlock();
    return r;
}

static CUresult stream_destroy(CUstream h)
{
    CUresult r = enter();
    struct CUstream_st *s = r == CUDA_SUCCESS ? stream_lookup(h) : NULL;
    if (r == CUDA_SUCCESS && !s)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        for (struct CUstream_st **pp = &g_streams; *pp; pp = &(*pp)->next) {
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        }
        free(s);
    }
    unlock();
    return r;
}

CUresult cuStreamDestroy(CUstream hStream)
{
    return stream_destroy(hStream);
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
    return stream_destroy(hStream);
}

/* Synchronizing a capturing stream is illegal and invalidates the capture. */
static CUresult stream_sync(CUstream h, int ptsz)
{
    CUresult r = enter();
    struct stream_ref sr;
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS)
        r = resolve_stream(h, ptsz, &sr);
    if (r == CUDA_SUCCESS)
        r = stream_ctx(&sr, &c);
    if (r == CUDA_SUCCESS && sr.cap && sr.cap->active) {
        sr.cap->invalidated = 1;
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    unlock();
    return r;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    FAKE_BLOCK_POINT("cuStreamSynchronize");
    return stream_sync(hStream, 0);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    FAKE_BLOCK_POINT("cuStreamSynchronize");
    return stream_sync(hStream, 1);
}

/*
 * Events: nothing runs on a simulated device, so an event is complete as
 * soon as it is recorded; they exist so that programs can wait on them
 * (cuEventSynchronize, a blocking point). Kept in a list like streams, so a
 * destroyed or foreign handle is CUDA_ERROR_INVALID_HANDLE.
 */
#define MAGIC_EVENT 0x45564e54u
struct CUevent_st {
    uint32_t magic;
    struct CUctx_st *ctx;
    unsigned flags;
    int recorded;
    struct CUevent_st *next;
};
static struct CUevent_st *g_events;

static struct CUevent_st *event_lookup(CUevent h)
{
    for (struct CUevent_st *e = g_events; e; e = e->next)
        if (e == h && e->magic == MAGIC_EVENT)
            return e;
    return NULL;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct CUevent_st *e = NULL;
    if (r == CUDA_SUCCESS && !phEvent)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS && !(e = calloc(1, sizeof *e)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        *e = (struct CUevent_st){.magic = MAGIC_EVENT, .ctx = c, .flags = Flags, .next = g_events};
        g_events = e;
        *phEvent = e;
    }
    unlock();
    return r;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    CUresult r = enter();
    struct CUevent_st *e = r == CUDA_SUCCESS ? event_lookup(hEvent) : NULL;
    struct stream_ref sr;
    if (r == CUDA_SUCCESS && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        r = resolve_stream(hStream, 0, &sr);
    if (r == CUDA_SUCCESS)
        e->recorded = 1;
    unlock();
    return r;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    FAKE_BLOCK_POINT("cuEventSynchronize");
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !event_lookup(hEvent))
        r = CUDA_ERROR_INVALID_HANDLE;
    unlock();
    return r;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CUresult r = enter();
    struct CUevent_st *e = r == CUDA_SUCCESS ? event_lookup(hEvent) : NULL;
    if (r == CUDA_SUCCESS && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        for (struct CUevent_st **pp = &g_events; *pp; pp = &(*pp)->next) {
            if (*pp == e) {
                *pp = e->next;
                break;
            }
        }
        e->magic = 0;
        free(e);
    }
    unlock();
    return r;
}

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int ptsz)
{
    CUresult r = enter();
    struct stream_ref sr;
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS &&
        (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = resolve_stream(h, ptsz, &sr);
    if (r == CUDA_SUCCESS)
        r = stream_ctx(&sr, &c);
    if (r == CUDA_SUCCESS && sr.kind == S_LEGACY)
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    else if (r == CUDA_SUCCESS && sr.cap->active)
        r = CUDA_ERROR_ILLEGAL_STATE;
    if (r == CUDA_SUCCESS)
        *sr.cap = (struct capture){.active = 1, .mode = mode};
    unlock();
    return r;
}

CUresult cuStreamBeginCapture(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 1);
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, 0);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, 1);
}

static CUresult end_capture(CUstream h, CUgraph *phGraph, int ptsz)
{
    CUresult r = enter();
    struct stream_ref sr;
    struct CUgraph_st *g = NULL;
    if (r == CUDA_SUCCESS && !phGraph)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = resolve_stream(h, ptsz, &sr);
    if (r == CUDA_SUCCESS && (!sr.cap || !sr.cap->active))
        r = CUDA_ERROR_ILLEGAL_STATE;
    if (r == CUDA_SUCCESS && sr.cap->invalidated) {
        memset(sr.cap, 0, sizeof *sr.cap);
        *phGraph = NULL;
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (r == CUDA_SUCCESS && !(g = calloc(1, sizeof *g)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        *g = (struct CUgraph_st){
            .magic = MAGIC_GRAPH, .id = g_next_id++, .nodes = sr.cap->nodes, .next = g_graphs};
        g_graphs = g;
        memset(sr.cap, 0, sizeof *sr.cap);
        *phGraph = g;
    }
    unlock();
    return r;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, 0);
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, 1);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *st, int ptsz)
{
    CUresult r = enter();
    struct stream_ref sr;
    if (r == CUDA_SUCCESS && !st)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = resolve_stream(h, ptsz, &sr);
    if (r == CUDA_SUCCESS) {
        if (!sr.cap || !sr.cap->active)
            *st = CU_STREAM_CAPTURE_STATUS_NONE;
        else if (sr.cap->invalidated)
            *st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        else
            *st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    }
    unlock();
    return r;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, captureStatus, 0);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, captureStatus, 1);
}

/* ------------------------------------------------------------------------ */
/* Graphs                                                                     */
/* ------------------------------------------------------------------------ */

static struct CUgraph_st *graph_lookup(CUgraph h)
{
    for (struct CUgraph_st *g = g_graphs; g; g = g->next)
        if (g == h)
            return g;
    return NULL;
}

static struct CUgraphExec_st *exec_lookup(CUgraphExec h)
{
    for (struct CUgraphExec_st *e = g_execs; e; e = e->next)
        if (e == h)
            return e;
    return NULL;
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct CUgraph_st *g = r == CUDA_SUCCESS ? graph_lookup(hGraph) : NULL;
    struct CUgraphExec_st *e = NULL;
    const unsigned long long valid =
        CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
        CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    if (r == CUDA_SUCCESS && (!phGraphExec || !g || (flags & ~valid)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS && !(e = calloc(1, sizeof *e)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        *e = (struct CUgraphExec_st){.magic = MAGIC_EXEC,
                                     .id = g_next_id++,
                                     .graph_id = g->id,
                                     .nodes = g->nodes,
                                     .next = g_execs};
        g_execs = e;
        *phGraphExec = e;
    }
    unlock();
    return r;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    return instantiate(phGraphExec, hGraph, flags);
}

/* The pre-12.0 signature: the fake never fails to build, so no error node/log. */
CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                            char *logBuffer, size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize > 0)
        logBuffer[0] = '\0';
    return instantiate(phGraphExec, hGraph, 0);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize > 0)
        logBuffer[0] = '\0';
    return instantiate(phGraphExec, hGraph, 0);
}

static CUresult graph_launch(CUgraphExec hExec, CUstream h, int ptsz)
{
    CUresult r = enter();
    struct stream_ref sr;
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS && !exec_lookup(hExec))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = resolve_stream(h, ptsz, &sr);
    if (r == CUDA_SUCCESS)
        r = stream_ctx(&sr, &c);
    if (r == CUDA_SUCCESS)
        note_captured_op(&sr);
    unlock();
    return r;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 0);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 1);
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    CUresult r = enter();
    struct CUgraph_st *g = r == CUDA_SUCCESS ? graph_lookup(hGraph) : NULL;
    if (r == CUDA_SUCCESS && !g)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        for (struct CUgraph_st **pp = &g_graphs; *pp; pp = &(*pp)->next) {
            if (*pp == g) {
                *pp = g->next;
                break;
            }
        }
        free(g);
    }
    unlock();
    return r;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CUresult r = enter();
    struct CUgraphExec_st *e = r == CUDA_SUCCESS ? exec_lookup(hGraphExec) : NULL;
    if (r == CUDA_SUCCESS && !e)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        for (struct CUgraphExec_st **pp = &g_execs; *pp; pp = &(*pp)->next) {
            if (*pp == e) {
                *pp = e->next;
                break;
            }
        }
        free(e);
    }
    unlock();
    return r;
}

/* ------------------------------------------------------------------------ */
/* Stream-ordered allocation and pools                                        */
/* ------------------------------------------------------------------------ */

static struct CUmemPoolHandle_st *pool_lookup(CUmemoryPool h)
{
    if (h >= &g_default_pool[0] && h < &g_default_pool[MAX_DEV])
        return h - &g_default_pool[0] < g_cfg.nvis ? h : NULL;
    for (struct CUmemPoolHandle_st *p = g_pools; p; p = p->next)
        if (p == h)
            return p;
    return NULL;
}

/*
 * Stream-ordered memory is charged at once: the fake has no asynchrony, and a
 * capture records the call without deferring the allocation to the launch.
 */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, int use_pool,
                            CUstream h, int ptsz)
{
    CUresult r = enter();
    struct stream_ref sr;
    struct CUctx_st *c;
    struct alloc *a;
    struct CUmemPoolHandle_st *p = NULL;
    if (r == CUDA_SUCCESS && (!dptr || bytesize == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && use_pool && !(p = pool_lookup(pool)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = resolve_stream(h, ptsz, &sr);
    if (r == CUDA_SUCCESS)
        r = stream_ctx(&sr, &c);
    if (r == CUDA_SUCCESS) {
        int phys = p ? g_cfg.vis[p->ordinal] : c->phys;
        r = device_range(c, A_ASYNC, phys, bytesize, bytesize, &a);
    }
    if (r == CUDA_SUCCESS) {
        note_captured_op(&sr);
        *dptr = a->base;
    }
    unlock();
    return r;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, 0, hStream, 0);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, 0, hStream, 1);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, 1, hStream, 0);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, 1, hStream, 1);
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, int ptsz)
{
    CUresult r = enter();
    struct stream_ref sr;
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS)
        r = resolve_stream(h, ptsz, &sr);
    if (r == CUDA_SUCCESS)
        r = stream_ctx(&sr, &c);
    if (r == CUDA_SUCCESS) {
        struct alloc *a = find_exact(dptr);
        if (!a || (a->kind != A_DEVICE && a->kind != A_ASYNC))
            r = CUDA_ERROR_INVALID_VALUE;
        else
            alloc_destroy(a);
    }
    if (r == CUDA_SUCCESS)
        note_captured_op(&sr);
    unlock();
    return r;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, 0);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, 1);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && !pool_out)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (r == CUDA_SUCCESS)
        *pool_out = &g_default_pool[dev];
    unlock();
    return r;
}

/* Only device-located pools: host pools would need host-accessible memory. */
CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CUresult r = enter();
    struct CUmemPoolHandle_st *p = NULL;
    if (r == CUDA_SUCCESS &&
        (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        r = CUDA_ERROR_NOT_SUPPORTED;
    else if (r == CUDA_SUCCESS && !dev_valid(poolProps->location.id))
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS && !(p = calloc(1, sizeof *p)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        *p = (struct CUmemPoolHandle_st){
            .magic = MAGIC_POOL, .ordinal = poolProps->location.id, .next = g_pools};
        g_pools = p;
        *pool = p;
    }
    unlock();
    return r;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult r = enter();
    struct CUmemPoolHandle_st *p = r == CUDA_SUCCESS ? pool_lookup(pool) : NULL;
    if (r == CUDA_SUCCESS && (!p || p->is_default))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        for (struct CUmemPoolHandle_st **pp = &g_pools; *pp; pp = &(*pp)->next) {
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        }
        free(p);
    }
    unlock();
    return r;
}

/* ------------------------------------------------------------------------ */
/* Legacy IPC                                                                 */
/* ------------------------------------------------------------------------ */

/* The 64 handle bytes: everything an importer needs, plus a checksum. */
struct ipc_wire {
    char magic[8];
    int32_t pid;
    int32_t dev;
    uint64_t start;
    uint64_t alloc_id;
    uint64_t size;
    uint64_t check;
    char pad[16];
};
_Static_assert(sizeof(struct ipc_wire) == CU_IPC_HANDLE_SIZE, "IPC handle is 64 bytes");
static const char IPC_MAGIC[8] = {'C', 'T', 'F', 'K', 'I', 'P', 'C', '1'};

static uint64_t ipc_check(const struct ipc_wire *w)
{
    return fnv1a(w, offsetof(struct ipc_wire, check), 0xcbf29ce484222325ull);
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct alloc *a = NULL;
    if (r == CUDA_SUCCESS && !pHandle)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS && (!(a = find_exact(dptr)) || a->kind != A_DEVICE))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && !a->exported) {
        struct fs_export_info e = {.dev = a->phys, .alloc_id = a->id, .size = a->size};
        if (fs_export_add(&e) != 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            a->exported = 1;
    }
    if (r == CUDA_SUCCESS) {
        struct ipc_wire w;
        memset(&w, 0, sizeof w);
        memcpy(w.magic, IPC_MAGIC, sizeof w.magic);
        fs_self(&w.pid, &w.start);
        w.dev = a->phys;
        w.alloc_id = a->id;
        w.size = a->size;
        w.check = ipc_check(&w);
        memcpy(pHandle->reserved, &w, sizeof w);
    }
    unlock();
    return r;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct ipc_wire w;
    memcpy(&w, handle.reserved, sizeof w);
    if (r == CUDA_SUCCESS && (!pdptr || (Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS &&
        (memcmp(w.magic, IPC_MAGIC, sizeof w.magic) != 0 || w.check != ipc_check(&w)))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        int32_t pid;
        uint64_t start;
        fs_self(&pid, &start);
        /* Like the real driver: a process cannot open its own handle. */
        if (w.pid == pid && w.start == start)
            r = CUDA_ERROR_INVALID_CONTEXT;
    }
    struct alloc *a = NULL;
    for (size_t i = 0; r == CUDA_SUCCESS && i < g_nallocs; i++) {
        struct alloc *x = g_allocs[i];
        if (x->kind == A_IPC && x->ctx == c && x->peer_pid == w.pid && x->peer_start == w.start &&
            x->peer_id == w.alloc_id)
            a = x;
    }
    if (r == CUDA_SUCCESS && a) {
        a->refs++; /* opened again in this context: same pointer, one more reference */
        *pdptr = a->base;
    } else if (r == CUDA_SUCCESS) {
        struct fs_export_info e = {0};
        if (fs_export_lookup(w.pid, w.start, w.alloc_id, &e) != 0 || e.size != w.size)
            r = CUDA_ERROR_INVALID_HANDLE;
        if (r == CUDA_SUCCESS)
            r = device_range(c, A_IPC, -1, (size_t)e.size, 0, &a);
        if (r == CUDA_SUCCESS) {
            a->refs = 1;
            a->peer_pid = w.pid;
            a->peer_start = w.start;
            a->peer_id = w.alloc_id;
            *pdptr = a->base;
        }
    }
    unlock();
    return r;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    return ipc_open(pdptr, handle, Flags);
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    return ipc_open(pdptr, handle, Flags);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    CUresult r = enter();
    struct CUctx_st *c;
    struct alloc *a = NULL;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 0);
    if (r == CUDA_SUCCESS && (!(a = find_exact(dptr)) || a->kind != A_IPC))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && --a->refs == 0)
        alloc_destroy(a);
    unlock();
    return r;
}

/* ------------------------------------------------------------------------ */
/* Virtual memory management                                                  */
/* ------------------------------------------------------------------------ */

#define VMM_HANDLE_TAG 0x564d4d0000000000ull

static struct vmm_phys *phys_lookup(CUmemGenericAllocationHandle h)
{
    for (struct vmm_phys *p = g_vmm_phys; p; p = p->next)
        if (p->handle == h)
            return p;
    return NULL;
}

static void phys_maybe_destroy(struct vmm_phys *p)
{
    if (p->handle_refs > 0 || p->maps > 0)
        return;
    if (p->charged)
        fs_uncharge(p->phys, p->charged);
    for (struct vmm_phys **pp = &g_vmm_phys; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    free(p);
}

static int location_is_host(CUmemLocationType t)
{
    return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && (!granularity || !prop ||
                              (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                               option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS)
        *granularity = GRAN;
    unlock();
    return r;
}

/* Device memory is charged to its device; host (NUMA) memory to none. */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult r = enter();
    struct vmm_phys *p = NULL;
    int phys = -1;
    if (r == CUDA_SUCCESS && (!handle || !prop || flags != 0 || size == 0 || size % GRAN != 0 ||
                              prop->type != CU_MEM_ALLOCATION_TYPE_PINNED))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
            if (!dev_valid(prop->location.id))
                r = CUDA_ERROR_INVALID_DEVICE;
            else
                phys = g_cfg.vis[prop->location.id];
        } else if (!location_is_host(prop->location.type)) {
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    if (r == CUDA_SUCCESS && !(p = calloc(1, sizeof *p)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS && phys >= 0 && fs_charge(phys, size, g_cfg.mem) != 0) {
        free(p);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        *p = (struct vmm_phys){.handle = VMM_HANDLE_TAG | g_next_id++,
                               .size = size,
                               .phys = phys,
                               .charged = phys >= 0 ? size : 0,
                               .handle_refs = 1,
                               .handle_types = prop->requestedHandleTypes,
                               .next = g_vmm_phys};
        g_vmm_phys = p;
        *handle = p->handle;
    }
    unlock();
    return r;
}

/* The memory itself goes when the last mapping of it goes. */
CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult r = enter();
    struct vmm_phys *p = r == CUDA_SUCCESS ? phys_lookup(handle) : NULL;
    if (r == CUDA_SUCCESS && (!p || p->handle_refs == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        p->handle_refs--;
        phys_maybe_destroy(p);
    }
    unlock();
    return r;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    CUresult r = enter();
    struct alloc *a = NULL;
    if (r == CUDA_SUCCESS &&
        (!ptr || size == 0 || size % GRAN != 0 || flags != 0 || (alignment & (alignment - 1)) != 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && !(a = calloc(1, sizeof *a)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = 0;
    if (r == CUDA_SUCCESS) {
        size_t align = alignment > GRAN ? alignment : GRAN;
        /* The address is a hint: honoured when free, ignored otherwise. */
        if (addr && addr % align == 0 && arena_take((uintptr_t)addr, size) == 0)
            base = (uintptr_t)addr;
        else if (arena_alloc(size, align, &base) != 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        *a = (struct alloc){
            .base = base, .size = size, .span = size, .kind = A_VA, .phys = -1, .id = g_next_id++};
        if (table_insert(a) != 0) {
            arena_release(base, size);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            *ptr = base;
        }
    }
    if (r != CUDA_SUCCESS)
        free(a);
    unlock();
    return r;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult r = enter();
    struct alloc *a = r == CUDA_SUCCESS ? find_exact(ptr) : NULL;
    if (r == CUDA_SUCCESS && (!a || a->kind != A_VA || a->size != size))
        r = CUDA_ERROR_INVALID_VALUE;
    for (struct vmm_map *m = g_vmm_maps; r == CUDA_SUCCESS && m; m = m->next)
        if (m->base >= a->base && m->base - a->base < a->size)
            r = CUDA_ERROR_INVALID_VALUE; /* still mapped: unmap first */
    if (r == CUDA_SUCCESS)
        alloc_destroy(a);
    unlock();
    return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    CUresult r = enter();
    struct vmm_phys *p = r == CUDA_SUCCESS ? phys_lookup(handle) : NULL;
    struct alloc *va = r == CUDA_SUCCESS ? find_containing(ptr) : NULL;
    struct vmm_map *m = NULL;
    if (r == CUDA_SUCCESS &&
        (size == 0 || flags != 0 || ptr % GRAN != 0 || size % GRAN != 0 || offset % GRAN != 0))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && (!p || p->handle_refs == 0))
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (r == CUDA_SUCCESS && (!va || va->kind != A_VA || size > va->size - (ptr - va->base) ||
                                   offset > p->size || size > p->size - offset))
        r = CUDA_ERROR_INVALID_VALUE;
    for (struct vmm_map *x = g_vmm_maps; r == CUDA_SUCCESS && x; x = x->next)
        if (ptr < x->base + x->size && x->base < ptr + size)
            r = CUDA_ERROR_ALREADY_MAPPED;
    if (r == CUDA_SUCCESS && !(m = calloc(1, sizeof *m)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        *m = (struct vmm_map){.base = ptr, .size = size, .phys = p, .next = g_vmm_maps};
        g_vmm_maps = m;
        p->maps++;
    }
    unlock();
    return r;
}

/* The range must cover whole mappings, as with the real driver. */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult r = enter();
    int found = 0;
    for (struct vmm_map *m = g_vmm_maps; r == CUDA_SUCCESS && m; m = m->next) {
        if (!(ptr < m->base + m->size && m->base < ptr + size))
            continue;
        if (m->base < ptr || m->base + m->size > ptr + size)
            r = CUDA_ERROR_INVALID_VALUE;
        found = 1;
    }
    if (r == CUDA_SUCCESS && (!found || size == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    for (struct vmm_map **pp = &g_vmm_maps; r == CUDA_SUCCESS && *pp;) {
        struct vmm_map *m = *pp;
        if (m->base >= ptr && m->base + m->size <= ptr + size) {
            *pp = m->next;
            m->phys->maps--;
            phys_maybe_destroy(m->phys);
            free(m);
        } else {
            pp = &m->next;
        }
    }
    unlock();
    return r;
}

/* Access is not enforced; the range must be mapped. */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult r = enter();
    if (r == CUDA_SUCCESS && (!desc || count == 0 || size == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++)
        if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE && !dev_valid(desc[i].location.id))
            r = CUDA_ERROR_INVALID_DEVICE;
    for (CUdeviceptr p = ptr; r == CUDA_SUCCESS && p < ptr + size;) {
        struct vmm_map *m = find_mapping(p);
        if (!m)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            p = m->base + m->size;
    }
    unlock();
    return r;
}

/* What a shareable file descriptor carries: enough to find the allocation. */
struct vmm_wire {
    char magic[8];
    int32_t pid;
    int32_t phys;
    uint64_t start;
    uint64_t handle;
    uint64_t size;
};
static const char VMM_MAGIC[8] = {'C', 'T', 'F', 'K', 'V', 'M', 'M', '1'};

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags)
{
    CUresult r = enter();
    struct vmm_phys *p = r == CUDA_SUCCESS ? phys_lookup(handle) : NULL;
    if (r == CUDA_SUCCESS && (!shareableHandle || flags != 0 || !p || p->handle_refs == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        r = CUDA_ERROR_NOT_SUPPORTED;
    else if (r == CUDA_SUCCESS && !(p->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        r = CUDA_ERROR_INVALID_VALUE; /* not requested at cuMemCreate */
    if (r == CUDA_SUCCESS) {
        struct vmm_wire w;
        memset(&w, 0, sizeof w);
        memcpy(w.magic, VMM_MAGIC, sizeof w.magic);
        fs_self(&w.pid, &w.start);
        w.phys = p->phys;
        w.handle = p->handle;
        w.size = p->size;
        int fd = memfd_create("cutrace-fake-vmm", MFD_CLOEXEC);
        if (fd < 0 || pwrite(fd, &w, sizeof w, 0) != (ssize_t)sizeof w) {
            if (fd >= 0)
                close(fd);
            r = CUDA_ERROR_OPERATING_SYSTEM;
        } else {
            *(int *)shareableHandle = fd;
        }
    }
    unlock();
    return r;
}

/*
 * Importing in the exporting process returns the same handle (one more
 * reference); elsewhere a new handle that is not charged: it is the peer's.
 */
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    CUresult r = enter();
    struct vmm_wire w;
    struct vmm_phys *p = NULL;
    if (r == CUDA_SUCCESS && !handle)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS) {
        int fd = (int)(intptr_t)osHandle;
        if (pread(fd, &w, sizeof w, 0) != (ssize_t)sizeof w ||
            memcmp(w.magic, VMM_MAGIC, sizeof w.magic) != 0)
            r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        int32_t pid;
        uint64_t start;
        fs_self(&pid, &start);
        if (w.pid == pid && w.start == start && (p = phys_lookup(w.handle)) != NULL &&
            p->handle_refs > 0) {
            p->handle_refs++;
            *handle = p->handle;
        } else if (!(p = calloc(1, sizeof *p))) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            *p = (struct vmm_phys){.handle = VMM_HANDLE_TAG | g_next_id++,
                                   .size = w.size,
                                   .phys = w.phys,
                                   .handle_refs = 1,
                                   .handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                   .next = g_vmm_phys};
            g_vmm_phys = p;
            *handle = p->handle;
        }
    }
    unlock();
    return r;
}

/* ------------------------------------------------------------------------ */
/* Copies                                                                     */
/* ------------------------------------------------------------------------ */

enum space { SP_HOST, SP_DEVICE, SP_INVALID };

/*
 * Host-accessible memory is really copied; device memory only exists as
 * bookkeeping, so a range there is checked and nothing moves. Memory outside
 * every allocation and outside the arena is pageable host memory.
 */
static enum space classify(CUdeviceptr p, size_t n)
{
    struct alloc *a = find_containing(p);
    if (a && a->kind != A_VA)
        return n <= a->size - (p - a->base) ? (is_host_kind(a->kind) ? SP_HOST : SP_DEVICE)
                                            : SP_INVALID;
    struct vmm_map *m = find_mapping(p);
    if (m) {
        /* Mappings that abut are one range to the device (PyTorch's expandable
         * segments map a tensor page by page and copy across the pages). */
        while (n > m->size - (p - m->base)) {
            n -= m->size - (p - m->base);
            p = m->base + m->size;
            if (!(m = find_mapping(p)))
                return SP_INVALID;
        }
        return SP_DEVICE;
    }
    return in_arena((uintptr_t)p) ? SP_INVALID : SP_HOST;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    CUresult r = enter();
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS && ByteCount > 0) {
        enum space d = classify(dst, ByteCount), s = classify(src, ByteCount);
        if (d == SP_INVALID || s == SP_INVALID)
            r = CUDA_ERROR_INVALID_VALUE;
        else if (d == SP_HOST && s == SP_HOST)
            memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, ByteCount);
    }
    unlock();
    return r;
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    CUresult r = enter();
    struct CUctx_st *c;
    if (r == CUDA_SUCCESS)
        r = current_ctx(&c, 1);
    if (r == CUDA_SUCCESS && N > 0) {
        struct alloc *a = find_containing(dstDevice);
        enum space d = classify(dstDevice, N);
        /* Plain pageable memory is not something the device can set. */
        if (d == SP_INVALID || (d == SP_HOST && !a))
            r = CUDA_ERROR_INVALID_VALUE;
        else if (d == SP_HOST)
            memset((void *)(uintptr_t)dstDevice, uc, N);
    }
    unlock();
    return r;
}

/* ------------------------------------------------------------------------ */
/* cuGetProcAddress                                                           */
/* ------------------------------------------------------------------------ */

/*
 * One row per (base name, first CUDA version, per-thread variant): the same
 * facts cudaTypedefs.h encodes in its PFN_<name>_v<version>[_ptsz] names.
 */
struct proc_entry {
    const char *name;
    int version;
    int ptds;
    void *fn;
};

#define P(name, version, fn)                                                                       \
    {                                                                                              \
        name, version, 0, (void *)fn                                                               \
    }
#define PT(name, version, fn)                                                                      \
    {                                                                                              \
        name, version, 1, (void *)fn                                                               \
    }
static const struct proc_entry g_procs[] = {
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    P("cuGetErrorString", 6000, cuGetErrorString),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    P("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
    P("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    P("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxCreate", 11040, cuCtxCreate_v3),
    P("cuCtxCreate", 12050, cuCtxCreate_v4),
    P("cuCtxDestroy", 2000, cuCtxDestroy),
    P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxPushCurrent", 2000, cuCtxPushCurrent),
    P("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    P("cuCtxPopCurrent", 2000, cuCtxPopCurrent),
    P("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    P("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    P("cuMemFree", 3020, cuMemFree_v2),
    P("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    P("cuMemHostAlloc", 2020, cuMemHostAlloc),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    P("cuMemcpy", 4000, cuMemcpy),
    P("cuMemsetD8", 3020, cuMemsetD8_v2),
    P("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PT("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    P("cuMemFreeAsync", 11020, cuMemFreeAsync),
    PT("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    P("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    PT("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuMemPoolCreate", 11020, cuMemPoolCreate),
    P("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    P("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    P("cuIpcOpenMemHandle", 4010, cuIpcOpenMemHandle),
    P("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    P("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 2000, cuStreamDestroy),
    P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    P("cuStreamSynchronize", 2000, cuStreamSynchronize),
    P("cuEventCreate", 2000, cuEventCreate),
    P("cuEventRecord", 2000, cuEventRecord),
    P("cuEventSynchronize", 2000, cuEventSynchronize),
    P("cuEventDestroy", 4000, cuEventDestroy_v2),
    PT("cuStreamSynchronize", 7000, cuStreamSynchronize_ptsz),
    P("cuStreamBeginCapture", 10000, cuStreamBeginCapture),
    PT("cuStreamBeginCapture", 10000, cuStreamBeginCapture_ptsz),
    P("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    PT("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2_ptsz),
    P("cuStreamEndCapture", 10000, cuStreamEndCapture),
    PT("cuStreamEndCapture", 10000, cuStreamEndCapture_ptsz),
    P("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
    PT("cuStreamIsCapturing", 10000, cuStreamIsCapturing_ptsz),
    P("cuGraphInstantiate", 10000, cuGraphInstantiate),
    P("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    P("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
    P("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    P("cuGraphLaunch", 10000, cuGraphLaunch),
    PT("cuGraphLaunch", 10000, cuGraphLaunch_ptsz),
    P("cuGraphDestroy", 10000, cuGraphDestroy),
    P("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
    P("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    P("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
};
#undef P
#undef PT

/*
 * The newest variant no newer than cudaVersion; with the per-thread flag a
 * _ptsz/_ptds variant wins over a legacy one of the same or older version.
 */
static CUresult proc_lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status)
{
    const cuuint64_t known =
        CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (!symbol || !pfn || (flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    const struct proc_entry *legacy = NULL, *ptds = NULL;
    int seen = 0;
    for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++) {
        const struct proc_entry *e = &g_procs[i];
        if (strcmp(e->name, symbol) != 0)
            continue;
        seen = 1;
        if (e->version > cudaVersion)
            continue;
        const struct proc_entry **best = e->ptds ? &ptds : &legacy;
        if (!*best || e->version > (*best)->version)
            *best = e;
    }
    const struct proc_entry *pick = legacy;
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && ptds &&
        (!legacy || ptds->version >= legacy->version))
        pick = ptds;
    *pfn = pick ? pick->fn : NULL;
    if (status)
        *status = pick   ? CU_GET_PROC_ADDRESS_SUCCESS
                  : seen ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                         : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return pick ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    return proc_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return proc_lookup(symbol, pfn, cudaVersion, flags, NULL);
}
