/*
 * fake_nccl.c - a fake libnccl.so.2 (the NCCL 2.28 API of nccl.h) on top of
 * the fake (or any) libcuda.so.1, for machines without a GPU.
 *
 * cutrace traces NCCL calls and the memory NCCL takes, so its tests need a
 * library with the real one's structure, which is what a preloaded tracer has
 * to cope with:
 *
 *   - soname libnccl.so.2, exporting only nccl* and pnccl*, each ncclX a weak
 *     alias of the strong pncclX (the profiling interface);
 *   - no DT_NEEDED on libcudart or libcuda: the real NCCL links the CUDA
 *     runtime statically, so it reaches the driver on its own, by
 *     dlopen("libcuda.so.1") + dlsym(handle, "cuGetProcAddress_v2") and then
 *     cuGetProcAddress by base name. A tracer never sees NCCL bind a cu*
 *     symbol, and never sees a cuda* call from it;
 *   - its own device memory, the way recent NCCL allocates it: per peer buffers
 *     through cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess
 *     (or cuMemAlloc with NCCL_CUMEM_ENABLE=0), a host-NUMA cuMemCreate probe
 *     at the first init, and ncclMemAlloc through the same cuMem calls.
 *
 * Communicators are real across processes: ranks meet through files in a
 * directory named after the unique id (see "Rendezvous" below and
 * docs/fakes.md). Collectives only check their arguments: device memory is
 * simulated, so no data moves.
 *
 * Locking: g_mu guards the process-wide lists (communicators, jobs,
 * ncclMemAlloc ranges, retained contexts) and g_log_mu the last-error text.
 * Neither is ever held across a driver call or a file-system wait, so the
 * order of the fork handlers of this library and the driver does not matter.
 *
 * Facts (prototypes, codes, the version) come from nccl.h and cuda.h; no
 * NVIDIA code is copied.
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* plain names are the v1 prototypes: we pick versions */
#include <cuda.h>
#include <nccl.h>

#include "fake_block.h"

#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The CUDA version the statically linked runtime of NCCL 2.28 asks the driver for. */
#define CUDA_ABI_VERSION 12080
#define PEER_BUF_BYTES   (9ull << 20) /* internal buffers per peer, as NCCL's defaults add up */
#define MAX_DEV          64
#define COMM_MAGIC       0x4e43434cu /* "NCCL" */
#define WIN_MAGIC        0x4e57494eu /* "NWIN" */
#define REG_MAGIC        0x4e524547u /* "NREG" */
#define DEFAULT_TIMEOUT  60.0
#define ID_KEY_BYTES     16 /* of the random part: names the rendezvous directory */
#define GC_EMPTY_AGE_S   3600

/* The first bytes of every unique id this library makes. */
static const char ID_MAGIC[8] = {'C', 'T', 'F', 'K', 'N', 'C', 'L', '1'};

/*
 * Prototypes for the functions nccl.h declares with an empty parameter list,
 * so that their definitions below have a previous prototype.
 */
ncclResult_t pncclGroupStart(void);
ncclResult_t pncclGroupEnd(void);
void pncclResetDebugInit(void);

/* Makes ncclX a weak alias of the strong pncclX defined just before, as in the real library. */
#define NCCL_ALIAS(name) extern __typeof__(p##name) name __attribute__((weak, alias("p" #name)))

/* ------------------------------------------------------------------------ */
/* Driver entry points                                                        */
/* ------------------------------------------------------------------------ */

/* X(field, base name, prototype the pointer must have). */
#define DRIVER_API(X)                                                                              \
    X(init, "cuInit", cuInit)                                                                      \
    X(deviceGetCount, "cuDeviceGetCount", cuDeviceGetCount)                                        \
    X(deviceGetAttribute, "cuDeviceGetAttribute", cuDeviceGetAttribute)                            \
    X(getErrorName, "cuGetErrorName", cuGetErrorName)                                              \
    X(primaryRetain, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain)                         \
    X(primaryRelease, "cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2)                   \
    X(ctxGetCurrent, "cuCtxGetCurrent", cuCtxGetCurrent)                                           \
    X(ctxSetCurrent, "cuCtxSetCurrent", cuCtxSetCurrent)                                           \
    X(ctxGetDevice, "cuCtxGetDevice", cuCtxGetDevice)                                              \
    X(ctxPush, "cuCtxPushCurrent", cuCtxPushCurrent_v2)                                            \
    X(ctxPop, "cuCtxPopCurrent", cuCtxPopCurrent_v2)                                               \
    X(memAlloc, "cuMemAlloc", cuMemAlloc_v2)                                                       \
    X(memFree, "cuMemFree", cuMemFree_v2)                                                          \
    X(memGranularity, "cuMemGetAllocationGranularity", cuMemGetAllocationGranularity)              \
    X(memCreate, "cuMemCreate", cuMemCreate)                                                       \
    X(memRelease, "cuMemRelease", cuMemRelease)                                                    \
    X(memAddressReserve, "cuMemAddressReserve", cuMemAddressReserve)                               \
    X(memAddressFree, "cuMemAddressFree", cuMemAddressFree)                                        \
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

static struct driver D;
static ncclResult_t g_driver_err = ncclUnhandledCudaError; /* until loaded */
static int g_ndev;
static pthread_once_t g_driver_once = PTHREAD_ONCE_INIT;

/* ------------------------------------------------------------------------ */
/* Process state                                                              */
/* ------------------------------------------------------------------------ */

enum comm_state {
    C_PENDING,   /* rendezvous (or buffer allocation) not finished */
    C_READY,     /* usable */
    C_FAILED,    /* a deferred init or split failed: only destroy/abort are useful */
    C_FINALIZED, /* ncclCommFinalize done: only destroy/abort */
    C_REVOKED,   /* ncclCommRevoke done: only shrink, destroy, abort */
    C_INHERITED, /* a forked child's copy of its parent's communicator */
    C_DEAD,      /* destroyed; the struct is kept so its address is never reused */
};

/* Internal buffer or ncclMemAlloc range, on either allocation path. */
struct dev_buf {
    CUdeviceptr va;
    size_t size; /* charged to the device: rounded up to the granularity on the cuMem path */
    CUmemGenericAllocationHandle handle;
    int vmm;
};

struct job;

struct ncclComm {
    uint32_t magic;
    enum comm_state state;
    ncclResult_t error; /* C_FAILED: why */
    int rank, nranks;
    CUdevice dev;
    CUcontext ctx;
    int blocking;
    int share; /* split with splitShare: uses its parent's buffers */
    char *dir; /* rendezvous directory of this communicator (its splits go below), or NULL */
    int nsplits;
    struct job *job; /* C_PENDING: what finishes it */
    struct dev_buf *bufs;
    int nbufs;
    struct reg *regs;
    struct ncclWindow_vidmem *wins;
    unsigned char *ops; /* custom reduction ops in use: ops[i] is op ncclNumOps + i */
    int nops;
    struct ncclComm *next;
};

struct reg {
    uint32_t magic;
    void *buff;
    size_t size;
    struct reg *next;
};

struct ncclWindow_vidmem {
    uint32_t magic;
    void *buff;
    size_t size;
    int flags;
    struct ncclWindow_vidmem *next;
};

struct memalloc {
    struct dev_buf buf;
    CUcontext ctx; /* current at ncclMemAlloc: cuMemFree needs one on the legacy path */
    struct memalloc *next;
};

/*
 * A rendezvous in progress: started (records published) by an init or split
 * call, finished by the same call, by ncclGroupEnd, or by polling a
 * non-blocking communicator.
 */
enum job_kind { J_INIT, J_SPLIT };

struct job {
    enum job_kind kind;
    struct ncclComm *comm; /* what it builds; NULL for a split without color */
    char *dir;             /* where the records are */
    int n;                 /* records numbered 0..n-1: new ranks (init), parent ranks (split) */
    int self;              /* our number among them */
    int color, key;
    unsigned char *expect; /* shrink: which of the n take part; NULL: all */
    uint64_t nonce;        /* tells our record from a predecessor's */
    double deadline;       /* CLOCK_MONOTONIC seconds */
    int busy;              /* someone is running it (g_mu) */
    int in_group;          /* owned by a thread's group list, which frees it */
    int orphan;            /* its communicator was destroyed while in a group list */
    int done;              /* settled while in a group list */
    int met;               /* every record was seen: the others may rely on ours now */
    int nonblocking;
    const char *fn; /* the API call that started it, for messages */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm *g_comms; /* every communicator ever handed out, dead ones too */
static struct memalloc *g_memallocs;
static CUcontext g_pctx[MAX_DEV]; /* primary contexts this library retained, once per process */
static int g_first_init_done;     /* the host-NUMA probe ran in this process */
static int g_gc_done;
static char g_last_error[1024];

struct group {
    int depth;
    ncclResult_t err; /* first error of a call inside the group */
    struct job **jobs;
    int njobs, cap;
};
static __thread struct group t_group;

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

/* ------------------------------------------------------------------------ */
/* Configuration (read once per process)                                      */
/* ------------------------------------------------------------------------ */

struct config {
    char base[PATH_MAX]; /* rendezvous base directory; "" when none could be chosen */
    double timeout;
    int cumem;       /* NCCL_CUMEM_ENABLE != 0 */
    int cumem_host;  /* NCCL_CUMEM_HOST_ENABLE != 0 */
    int blocking;    /* NCCL_COMM_BLOCKING default */
    int split_share; /* NCCL_COMM_SPLIT_SHARE_RESOURCES default */
    int debug;       /* 0 none, 1 WARN, 2 INFO */
    char debug_file[PATH_MAX];
    int debug_fd;
};

static struct config g_cfg;
static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;

static void lib_init(void);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Integer environment variable; def when unset or not a number. */
static int env_int(const char *name, int def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < INT_MIN || v > INT_MAX) {
        fprintf(stderr, "cutrace fake libnccl: ignoring %s=%s\n", name, s);
        return def;
    }
    return (int)v;
}

/* NCCL_DEBUG_FILE's %h (host) and %p (pid) expanded, as NCCL does. */
static void expand_debug_file(const char *pat, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = pat; *p && o + 1 < len; p++) {
        char piece[256];
        if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
            if (p[1] == 'h' && gethostname(piece, sizeof piece - 1) != 0)
                snprintf(piece, sizeof piece, "localhost");
            else if (p[1] == 'p')
                snprintf(piece, sizeof piece, "%d", (int)getpid());
            piece[sizeof piece - 1] = '\0';
            o += (size_t)snprintf(out + o, len - o, "%s", piece);
            p++;
        } else {
            out[o++] = *p;
        }
        if (o >= len)
            o = len - 1;
    }
    out[o] = '\0';
}

/*
 * The base directory: CUTRACE_FAKE_NCCL_DIR, else the directory of the fake
 * driver's state file, else the driver's per-user default directory.
 */
static void choose_base(void)
{
    const char *s = getenv("CUTRACE_FAKE_NCCL_DIR");
    if (s && *s) {
        snprintf(g_cfg.base, sizeof g_cfg.base, "%s", s);
        return;
    }
    s = getenv("CUTRACE_FAKE_STATE");
    if (s && *s) {
        const char *slash = strrchr(s, '/');
        if (!slash)
            snprintf(g_cfg.base, sizeof g_cfg.base, ".");
        else if (slash == s)
            snprintf(g_cfg.base, sizeof g_cfg.base, "/");
        else
            snprintf(g_cfg.base, sizeof g_cfg.base, "%.*s", (int)(slash - s), s);
        return;
    }
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/cutrace-fake-%u", (unsigned)getuid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return;
    struct stat st;
    /* Like the driver: a shared /tmp name is only used when it is ours. */
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
        fprintf(stderr, "cutrace fake libnccl: %s is not a directory owned by this user\n", dir);
        return;
    }
    snprintf(g_cfg.base, sizeof g_cfg.base, "%s", dir);
}

static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);

static void cfg_init_once(void)
{
    choose_base();
    g_cfg.timeout = DEFAULT_TIMEOUT;
    const char *s = getenv("CUTRACE_FAKE_NCCL_TIMEOUT");
    if (s && *s) {
        char *end;
        double v = strtod(s, &end);
        if (*end == '\0' && v > 0 && v < 1e9)
            g_cfg.timeout = v;
        else
            fprintf(stderr, "cutrace fake libnccl: ignoring CUTRACE_FAKE_NCCL_TIMEOUT=%s\n", s);
    }
    g_cfg.cumem = env_int("NCCL_CUMEM_ENABLE", 1) != 0;
    g_cfg.cumem_host = env_int("NCCL_CUMEM_HOST_ENABLE", 1) != 0;
    g_cfg.blocking = env_int("NCCL_COMM_BLOCKING", 1) != 0;
    g_cfg.split_share = env_int("NCCL_COMM_SPLIT_SHARE_RESOURCES", 0) == 1;
    g_cfg.debug_fd = -1;
    s = getenv("NCCL_DEBUG");
    if (s && (strcasecmp(s, "INFO") == 0 || strcasecmp(s, "TRACE") == 0))
        g_cfg.debug = 2;
    else if (s && (strcasecmp(s, "WARN") == 0 || strcasecmp(s, "VERSION") == 0))
        g_cfg.debug = 1;
    s = getenv("NCCL_DEBUG_FILE");
    if (g_cfg.debug && s && *s) {
        expand_debug_file(s, g_cfg.debug_file, sizeof g_cfg.debug_file);
        g_cfg.debug_fd = open(g_cfg.debug_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    }
    if (g_cfg.debug && g_cfg.debug_fd < 0)
        g_cfg.debug_fd = STDOUT_FILENO; /* NCCL's default */
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void lib_init(void)
{
    pthread_once(&g_cfg_once, cfg_init_once);
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                   */
/* ------------------------------------------------------------------------ */

enum { LVL_WARN = 1, LVL_INFO = 2 };

/*
 * NCCL_DEBUG-style lines ("host:pid:tid NCCL INFO ..."). Each line is one
 * write(2), so a forked child never repeats buffered output. A WARN also
 * becomes the text of ncclGetLastError, whatever NCCL_DEBUG says.
 */
__attribute__((format(printf, 2, 3))) static void nlog(int level, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (level == LVL_WARN) {
        pthread_mutex_lock(&g_log_mu);
        snprintf(g_last_error, sizeof g_last_error, "%s", msg);
        pthread_mutex_unlock(&g_log_mu);
    }
    if (g_cfg.debug < level || g_cfg.debug_fd < 0)
        return;
    char host[64];
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    char line[1024];
    int n = snprintf(line, sizeof line, "%s:%d:%ld NCCL %s %s\n", host, (int)getpid(),
                     (long)syscall(SYS_gettid), level == LVL_WARN ? "WARN" : "INFO", msg);
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1;
    ssize_t w = write(g_cfg.debug_fd, line, (size_t)n);
    (void)w;
}

#define WARN(...) nlog(LVL_WARN, __VA_ARGS__)
#define INFO(...) nlog(LVL_INFO, __VA_ARGS__)

static const char *cu_name(CUresult r)
{
    const char *s = NULL;
    if (D.getErrorName && D.getErrorName(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown CUresult";
}

/* Inside a group, the first error of any call is also what ncclGroupEnd returns. */
static ncclResult_t group_note(ncclResult_t r)
{
    if (t_group.depth > 0 && r != ncclSuccess && r != ncclInProgress && t_group.err == ncclSuccess)
        t_group.err = r;
    return r;
}

/* ------------------------------------------------------------------------ */
/* Fork                                                                       */
/* ------------------------------------------------------------------------ */

static void atfork_prepare(void)
{
    lock();
    pthread_mutex_lock(&g_log_mu);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&g_log_mu);
    unlock();
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    free(j->dir);
    free(j->expect);
    free(j);
}

/*
 * A forked child is a new process, as for the fake driver (which forgets the
 * parent's contexts and allocations in the child): the parent's communicators
 * become unusable copies (destroying them frees only the child's copy, and
 * never touches the driver or the rendezvous files the parent still uses),
 * and the child starts with no retained contexts, no ncclMemAlloc ranges and
 * no probe done.
 */
static void atfork_child(void)
{
    for (struct ncclComm *c = g_comms; c; c = c->next) {
        if (c->state == C_DEAD)
            continue;
        c->state = C_INHERITED;
        if (c->job && !c->job->in_group)
            job_free(c->job);
        else if (c->job)
            c->job->orphan = 1;
        c->job = NULL;
    }
    while (g_memallocs) {
        struct memalloc *m = g_memallocs;
        g_memallocs = m->next;
        free(m);
    }
    memset(g_pctx, 0, sizeof g_pctx);
    g_first_init_done = 0;
    /* The forking thread's open group goes with it: its jobs are the parent's. */
    for (int i = 0; i < t_group.njobs; i++)
        job_free(t_group.jobs[i]);
    free(t_group.jobs);
    memset(&t_group, 0, sizeof t_group);
    pthread_mutex_unlock(&g_log_mu);
    unlock();
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                     */
/* ------------------------------------------------------------------------ */

/*
 * As NCCL's statically linked runtime does: dlopen the driver, look up only
 * cuGetProcAddress_v2, take "cuGetProcAddress" itself from it, and every other
 * entry point by base name at the runtime's CUDA version. Then cuInit.
 */
static void driver_load_once(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        WARN("cannot load libcuda.so.1: %s", dlerror());
        return;
    }
    void *sym = dlsym(h, "cuGetProcAddress_v2");
    if (!sym) {
        WARN("libcuda.so.1 has no cuGetProcAddress_v2");
        return;
    }
    __typeof__(cuGetProcAddress_v2) *bootstrap = (__typeof__(cuGetProcAddress_v2) *)sym;
    CUdriverProcAddressQueryResult st;
    void *p = NULL;
    if (bootstrap("cuGetProcAddress", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) !=
            CUDA_SUCCESS ||
        !p) {
        WARN("cuGetProcAddress_v2 does not know cuGetProcAddress");
        return;
    }
    D.getProcAddress = (__typeof__(cuGetProcAddress_v2) *)p;
    for (size_t i = 0; i < sizeof g_wanted / sizeof g_wanted[0]; i++) {
        p = NULL;
        CUresult r = D.getProcAddress(g_wanted[i].name, &p, CUDA_ABI_VERSION,
                                      CU_GET_PROC_ADDRESS_DEFAULT, &st);
        if (r != CUDA_SUCCESS || !p) {
            WARN("driver entry point %s not found (%d)", g_wanted[i].name, (int)r);
            memset(&D, 0, sizeof D);
            return;
        }
        memcpy((char *)&D + g_wanted[i].offset, &p, sizeof p);
    }
    CUresult r = D.init(0);
    if (r == CUDA_SUCCESS)
        r = D.deviceGetCount(&g_ndev);
    if (r != CUDA_SUCCESS) {
        WARN("cuInit failed: %s", cu_name(r));
        return;
    }
    if (g_ndev > MAX_DEV)
        g_ndev = MAX_DEV;
    g_driver_err = ncclSuccess;
}

static ncclResult_t driver_ready(void)
{
    pthread_once(&g_driver_once, driver_load_once);
    return g_driver_err;
}

#define CUCHECK(call, what)                                                                        \
    do {                                                                                           \
        CUresult cu_r_ = (call);                                                                   \
        if (cu_r_ != CUDA_SUCCESS) {                                                               \
            WARN("%s failed: %s", what, cu_name(cu_r_));                                           \
            return ncclUnhandledCudaError;                                                         \
        }                                                                                          \
    } while (0)

/* The primary context of dev, retained once per process and kept, as the runtime does. */
static ncclResult_t primary_ctx(CUdevice dev, CUcontext *out)
{
    assert(dev >= 0 && dev < MAX_DEV);
    lock();
    CUcontext c = g_pctx[dev];
    unlock();
    if (c) {
        *out = c;
        return ncclSuccess;
    }
    CUCHECK(D.primaryRetain(&c, dev), "cuDevicePrimaryCtxRetain");
    lock();
    int raced = g_pctx[dev] != NULL;
    if (!raced)
        g_pctx[dev] = c;
    *out = g_pctx[dev];
    unlock();
    if (raced) /* another thread retained it first: keep one retain only */
        D.primaryRelease(dev);
    return ncclSuccess;
}

/*
 * The calling thread's device and context, as NCCL's runtime sees them: the
 * current context; with none, device 0's primary context, made current.
 */
static ncclResult_t bind_context(CUdevice *dev, CUcontext *ctx)
{
    CUcontext cur = NULL;
    CUCHECK(D.ctxGetCurrent(&cur), "cuCtxGetCurrent");
    if (cur) {
        CUCHECK(D.ctxGetDevice(dev), "cuCtxGetDevice");
        *ctx = cur;
        return ncclSuccess;
    }
    ncclResult_t r = primary_ctx(0, ctx);
    if (r != ncclSuccess)
        return r;
    CUCHECK(D.ctxSetCurrent(*ctx), "cuCtxSetCurrent");
    *dev = 0;
    return ncclSuccess;
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static int use_cumem(CUdevice dev)
{
    if (!g_cfg.cumem)
        return 0;
    int vmm = 0;
    if (D.deviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) !=
        CUDA_SUCCESS)
        return 0;
    return vmm != 0;
}

static void device_prop(CUmemAllocationProp *prop, CUdevice dev)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
    /* NCCL asks for shareable handles so that peers in other processes can map them. */
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

/*
 * size bytes of device memory on dev, in the current context: cuMemCreate +
 * reserve + map + access (size rounded up to the granularity), or cuMemAlloc.
 */
static ncclResult_t dev_alloc(CUdevice dev, size_t size, int cumem, struct dev_buf *b)
{
    memset(b, 0, sizeof *b);
    if (!cumem) {
        CUCHECK(D.memAlloc(&b->va, size), "cuMemAlloc");
        b->size = size;
        return ncclSuccess;
    }
    CUmemAllocationProp prop;
    device_prop(&prop, dev);
    size_t gran = 0;
    CUCHECK(D.memGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity");
    assert(gran > 0);
    size = align_up(size, gran);
    CUmemGenericAllocationHandle h;
    CUCHECK(D.memCreate(&h, size, &prop, 0), "cuMemCreate");
    CUdeviceptr va = 0;
    CUresult r = D.memAddressReserve(&va, size, gran, 0, 0);
    if (r == CUDA_SUCCESS) {
        r = D.memMap(va, size, 0, h, 0);
        if (r != CUDA_SUCCESS)
            D.memAddressFree(va, size);
    }
    if (r == CUDA_SUCCESS) {
        CUmemAccessDesc desc;
        memset(&desc, 0, sizeof desc);
        desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc.location.id = dev;
        desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        r = D.memSetAccess(va, size, &desc, 1);
        if (r != CUDA_SUCCESS) {
            D.memUnmap(va, size);
            D.memAddressFree(va, size);
        }
    }
    if (r != CUDA_SUCCESS) {
        D.memRelease(h);
        WARN("cuMem allocation of %zu bytes failed: %s", size, cu_name(r));
        return ncclUnhandledCudaError;
    }
    *b = (struct dev_buf){.va = va, .size = size, .handle = h, .vmm = 1};
    return ncclSuccess;
}

/* Best effort: a context reset may already have taken cuMemAlloc memory away. */
static void dev_free(struct dev_buf *b)
{
    if (b->vmm) {
        D.memUnmap(b->va, b->size);
        D.memRelease(b->handle);
        D.memAddressFree(b->va, b->size);
    } else if (b->va) {
        D.memFree(b->va);
    }
    memset(b, 0, sizeof *b);
}

/* Runs with ctx current (pushed and popped), so cuMemAlloc lands in the comm's context. */
static int push_ctx(CUcontext ctx)
{
    return ctx && D.ctxPush(ctx) == CUDA_SUCCESS;
}

static void pop_ctx(int pushed)
{
    CUcontext dummy;
    if (pushed)
        D.ctxPop(&dummy);
}

/*
 * The real NCCL probes host-NUMA cuMem allocations once per process (for its
 * host buffers) and releases the probe at once. A tracer must record it as
 * memory that is not on a device; the driver charges nothing for it.
 */
static void host_numa_probe(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    CUresult r = D.memGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    CUmemGenericAllocationHandle h;
    if (r == CUDA_SUCCESS)
        r = D.memCreate(&h, gran, &prop, 0);
    if (r == CUDA_SUCCESS)
        r = D.memRelease(h);
    INFO("cuMem host allocations: probe of %zu bytes on host NUMA node 0: %s", gran,
         r == CUDA_SUCCESS ? "enabled" : cu_name(r));
}

/* ------------------------------------------------------------------------ */
/* Files                                                                      */
/* ------------------------------------------------------------------------ */

static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return -1;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

static char *path_join(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static char *path_join(const char *dir, const char *fmt, ...)
{
    char leaf[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(leaf, sizeof leaf, fmt, ap);
    va_end(ap);
    char *out = NULL;
    if (asprintf(&out, "%s/%s", dir, leaf) < 0)
        return NULL;
    return out;
}

static void rm_rf(const char *path, int depth)
{
    if (depth > 32)
        return;
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char sub[PATH_MAX];
            if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= (int)sizeof sub)
                continue;
            struct stat st;
            if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
                rm_rf(sub, depth + 1);
            else
                unlink(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

/* Start time of pid (field 22 of /proc/pid/stat) and its state letter; 0 when unreadable. */
static unsigned long long proc_start(int pid, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may contain spaces */
    if (!p || p[1] != ' ')
        return 0;
    p += 2;
    if (state)
        *state = *p;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return p ? strtoull(p, NULL, 10) : 0;
}

/* Dead: gone, a zombie, or its pid reused by a later process. */
static int proc_alive(int pid, unsigned long long start)
{
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    char st = '?';
    unsigned long long s = proc_start(pid, &st);
    if (s == 0)
        return proc_start(getpid(), NULL) == 0; /* no /proc at all: trust kill() */
    return st != 'Z' && st != 'X' && s == start;
}

/* What a rank publishes: one line, written to a temporary name and renamed into place. */
struct rec {
    int pid;
    unsigned long long start;
    unsigned long long nonce;
    int nranks;
    int dev;
    int color, key;
};

static int rec_write(const char *path, const struct rec *r)
{
    char tmp[PATH_MAX], line[256];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d.%llu", path, (int)getpid(), r->nonce) >=
        (int)sizeof tmp)
        return -1;
    int n = snprintf(line, sizeof line,
                     "cutrace-nccl 1 pid=%d start=%llu nonce=%llu nranks=%d dev=%d color=%d "
                     "key=%d\n",
                     r->pid, r->start, r->nonce, r->nranks, r->dev, r->color, r->key);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int ok = write(fd, line, (size_t)n) == n;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* 1: read, 0: absent, -1: unreadable or malformed. */
static int rec_read(const char *path, struct rec *r)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    memset(r, 0, sizeof *r);
    if (sscanf(buf, "cutrace-nccl 1 pid=%d start=%llu nonce=%llu nranks=%d dev=%d color=%d key=%d",
               &r->pid, &r->start, &r->nonce, &r->nranks, &r->dev, &r->color, &r->key) != 7)
        return -1;
    return 1;
}

static struct rec rec_self(uint64_t nonce)
{
    struct rec r;
    memset(&r, 0, sizeof r);
    r.pid = (int)getpid();
    r.start = proc_start(r.pid, NULL);
    r.nonce = nonce;
    return r;
}

static uint64_t make_nonce(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        v = ((uint64_t)getpid() << 32) ^ (uint64_t)(now_s() * 1e9);
    return v | 1; /* never 0 */
}

/*
 * Takes dir/lock (flock, released on close or death). The file is checked to
 * be still linked: the collector of stale directories removes a directory only
 * while holding its lock, so a lock on an unlinked file means "start over".
 * Returns the descriptor, -1 on error, -2 when the directory went away.
 */
static int dir_lock(const char *dir)
{
    char *path = path_join(dir, "lock");
    if (!path)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    free(path);
    if (fd < 0)
        return errno == ENOENT ? -2 : -1;
    struct stat st;
    if (flock(fd, LOCK_EX) != 0 || fstat(fd, &st) != 0) {
        close(fd);
        return -1;
    }
    if (st.st_nlink == 0) {
        close(fd);
        return -2;
    }
    return fd;
}

/*
 * Claims rank in dir for this process: ncclInvalidUsage when a live process
 * holds it (a record of a dead one is replaced), ncclSystemError on I/O errors.
 */
static ncclResult_t claim_rank(const char *dir, int rank, int nranks, CUdevice dev, uint64_t nonce,
                               const char *fn)
{
    char *path = path_join(dir, "rank-%d", rank);
    if (!path)
        return ncclSystemError;
    ncclResult_t res = ncclSystemError;
    for (int attempt = 0; attempt < 8; attempt++) {
        if (mkdir_p(dir) != 0) {
            WARN("%s: cannot create %s: %s", fn, dir, strerror(errno));
            break;
        }
        int fd = dir_lock(dir);
        if (fd == -2)
            continue;
        if (fd < 0) {
            WARN("%s: cannot lock %s: %s", fn, dir, strerror(errno));
            break;
        }
        struct rec old;
        int got = rec_read(path, &old);
        if (got == 1 && proc_alive(old.pid, old.start)) {
            WARN("%s: rank %d of %s is already taken by process %d", fn, rank, dir, old.pid);
            res = ncclInvalidUsage;
        } else {
            if (got != 0)
                unlink(path); /* left by a dead process, or torn */
            struct rec r = rec_self(nonce);
            r.nranks = nranks;
            r.dev = dev;
            if (rec_write(path, &r) == 0) {
                res = ncclSuccess;
            } else {
                WARN("%s: cannot write %s: %s", fn, path, strerror(errno));
            }
        }
        close(fd);
        break;
    }
    free(path);
    return res;
}

/* Withdraws our claim (a failed or abandoned init), leaving anyone else's alone. */
static void unclaim_rank(const char *dir, int rank, uint64_t nonce)
{
    char *path = path_join(dir, "rank-%d", rank);
    if (!path)
        return;
    int fd = dir_lock(dir);
    if (fd >= 0) {
        struct rec r;
        if (rec_read(path, &r) == 1 && r.nonce == nonce && r.pid == (int)getpid())
            unlink(path);
        close(fd);
    }
    free(path);
}

/*
 * Records under path (recursively): how many, and how many name a live
 * process. Used to collect rendezvous directories every user of which is dead.
 */
static void tree_census(const char *path, int depth, int *records, int *live)
{
    if (depth > 32)
        return;
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= (int)sizeof sub)
            continue;
        struct stat st;
        if (lstat(sub, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            tree_census(sub, depth + 1, records, live);
        } else if (strncmp(e->d_name, "rank-", 5) == 0) {
            struct rec r;
            if (rec_read(sub, &r) == 1) {
                (*records)++;
                if (proc_alive(r.pid, r.start))
                    (*live)++;
            }
        }
    }
    closedir(d);
}

/*
 * Once per process (at the first ncclGetUniqueId): removes rendezvous
 * directories of the base whose every recorded process is dead, and empty
 * ones older than an hour, so the default per-user directory does not grow.
 */
static void collect_stale(void)
{
    lock();
    int done = g_gc_done;
    g_gc_done = 1;
    unlock();
    if (done || !g_cfg.base[0])
        return;
    DIR *d = opendir(g_cfg.base);
    if (!d)
        return;
    struct dirent *e;
    time_t now = time(NULL);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "nccl-", 5) != 0)
            continue;
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s/%s", g_cfg.base, e->d_name) >= (int)sizeof sub)
            continue;
        struct stat st;
        if (lstat(sub, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        int fd = dir_lock(sub);
        if (fd < 0)
            continue;
        int records = 0, live = 0;
        tree_census(sub, 0, &records, &live);
        if ((records > 0 && live == 0) || (records == 0 && now - st.st_mtime > GC_EMPTY_AGE_S))
            rm_rf(sub, 0);
        close(fd);
    }
    closedir(d);
}

/* ------------------------------------------------------------------------ */
/* Communicators                                                              */
/* ------------------------------------------------------------------------ */

/* Registered in the list that makes handles checkable; state C_PENDING. */
static struct ncclComm *comm_new(CUdevice dev, CUcontext ctx, int blocking)
{
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->magic = COMM_MAGIC;
    c->state = C_PENDING;
    c->dev = dev;
    c->ctx = ctx;
    c->blocking = blocking;
    lock();
    c->next = g_comms;
    g_comms = c;
    unlock();
    return c;
}

/* A handle is valid only if this library made it, whatever state it is in now. */
static struct ncclComm *comm_find_locked(const struct ncclComm *p)
{
    for (struct ncclComm *c = g_comms; c; c = c->next)
        if (c == p)
            return c;
    return NULL;
}

/* Host-side resources; the driver's are freed by comm_free_device first. */
static void comm_free_host_locked(struct ncclComm *c)
{
    free(c->dir);
    free(c->bufs);
    free(c->ops);
    while (c->regs) {
        struct reg *r = c->regs;
        c->regs = r->next;
        free(r);
    }
    while (c->wins) {
        struct ncclWindow_vidmem *w = c->wins;
        c->wins = w->next;
        free(w);
    }
    c->dir = NULL;
    c->bufs = NULL;
    c->ops = NULL;
    c->nbufs = c->nops = 0;
}

static void comm_free_device(struct ncclComm *c)
{
    if (c->nbufs == 0)
        return;
    int pushed = push_ctx(c->ctx);
    for (int i = 0; i < c->nbufs; i++)
        dev_free(&c->bufs[i]);
    pop_ctx(pushed);
    c->nbufs = 0;
}

/* A communicator that was never handed out: unlinked and freed entirely. */
static void comm_discard(struct ncclComm *c)
{
    comm_free_device(c);
    lock();
    for (struct ncclComm **pp = &g_comms; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    comm_free_host_locked(c);
    unlock();
    free(c);
}

/* (nranks - 1) buffers of PEER_BUF_BYTES, in the communicator's context. */
static ncclResult_t comm_alloc_buffers(struct ncclComm *c)
{
    int n = c->share ? 0 : c->nranks - 1;
    if (n == 0)
        return ncclSuccess;
    struct dev_buf *bufs = calloc((size_t)n, sizeof *bufs);
    if (!bufs)
        return ncclSystemError;
    int cumem = use_cumem(c->dev);
    int pushed = push_ctx(c->ctx);
    ncclResult_t r = ncclSuccess;
    int done = 0;
    while (done < n && (r = dev_alloc(c->dev, PEER_BUF_BYTES, cumem, &bufs[done])) == ncclSuccess)
        done++;
    if (r != ncclSuccess) {
        while (done > 0)
            dev_free(&bufs[--done]);
        free(bufs);
    }
    pop_ctx(pushed);
    if (r != ncclSuccess)
        return r;
    c->bufs = bufs;
    c->nbufs = n;
    INFO("comm %p rank %d nRanks %d cudaDev %d: %d peer buffers of %zu bytes (%s)", (void *)c,
         c->rank, c->nranks, (int)c->dev, n, bufs[0].size, cumem ? "cuMemCreate" : "cuMemAlloc");
    return ncclSuccess;
}

enum { CHECK_ALLOW_PENDING = 1, CHECK_ALLOW_CLOSED = 2, CHECK_ALLOW_REVOKED = 4 };

static int job_acquire_locked(struct job *j);
static ncclResult_t job_drive(struct job *j, int block);

/*
 * Looks comm up and, when it is pending and its job is not left to a group,
 * gives the job one look (non-blocking communicators finish this way).
 * Returns its state then, or C_DEAD for a handle that is not (or no longer) a
 * communicator; *err receives the error of a failed one.
 */
static enum comm_state comm_poll(ncclComm_t comm, ncclResult_t *err)
{
    for (int tries = 0;; tries++) {
        lock();
        struct ncclComm *c = comm_find_locked(comm);
        if (!c || c->magic != COMM_MAGIC) {
            unlock();
            return C_DEAD;
        }
        enum comm_state st = c->state;
        *err = c->error;
        struct job *j = c->job;
        int mine = st == C_PENDING && j && !j->in_group && tries == 0 && job_acquire_locked(j);
        unlock();
        if (!mine)
            return st;
        job_drive(j, 0);
    }
}

/*
 * The state check every call on a communicator makes. A pending communicator
 * is ncclInProgress, as NCCL answers while it initialises.
 */
static ncclResult_t comm_check(ncclComm_t comm, const char *fn, int flags)
{
    if (!comm) {
        WARN("%s: comm argument is NULL", fn);
        return ncclInvalidArgument;
    }
    ncclResult_t err = ncclSuccess;
    enum comm_state st = comm_poll(comm, &err);
    switch (st) {
    case C_READY:
        return ncclSuccess;
    case C_PENDING:
        return (flags & CHECK_ALLOW_PENDING) ? ncclSuccess : ncclInProgress;
    case C_FAILED:
        return err;
    case C_FINALIZED:
        if (flags & CHECK_ALLOW_CLOSED)
            return ncclSuccess;
        WARN("%s: communicator %p is finalized", fn, (void *)comm);
        return ncclInvalidUsage;
    case C_REVOKED:
        if (flags & CHECK_ALLOW_REVOKED)
            return ncclSuccess;
        WARN("%s: communicator %p is revoked", fn, (void *)comm);
        return ncclInvalidUsage;
    case C_INHERITED:
        WARN("%s: communicator %p belongs to the parent process", fn, (void *)comm);
        return ncclInvalidUsage;
    case C_DEAD:
        break;
    }
    WARN("%s: invalid communicator %p (never created, or destroyed)", fn, (void *)comm);
    return ncclInvalidArgument;
}

/* Moves comm from one of the states in from_mask (bits of enum comm_state) to to. */
static int comm_transition(ncclComm_t comm, unsigned from_mask, enum comm_state to)
{
    lock();
    int ok = (from_mask >> comm->state) & 1u;
    if (ok)
        comm->state = to;
    unlock();
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Jobs: finishing a rendezvous                                               */
/* ------------------------------------------------------------------------ */

struct member {
    int parent_rank;
    int key;
};

static int member_cmp(const void *a, const void *b)
{
    const struct member *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->parent_rank < y->parent_rank ? -1 : x->parent_rank > y->parent_rank;
}

/*
 * One look at the records. ncclInProgress while some are missing; otherwise
 * the new communicator gets its rank and buffers.
 */
static ncclResult_t job_step(struct job *j)
{
    struct member *m = NULL;
    int nm = 0, mine = -1;
    if (j->kind == J_SPLIT && j->comm) {
        m = calloc((size_t)j->n, sizeof *m);
        if (!m)
            return ncclSystemError;
    }
    for (int i = 0; i < j->n; i++) {
        if (j->expect && !j->expect[i])
            continue;
        char *path = path_join(j->dir, "rank-%d", i);
        struct rec r;
        int got = path ? rec_read(path, &r) : -1;
        free(path);
        if (got != 1) { /* absent, or being replaced right now */
            free(m);
            return ncclInProgress;
        }
        if (j->kind == J_INIT && r.nranks != j->n) {
            WARN("%s: rank %d was initialised with nranks %d, this rank with %d", j->fn, i,
                 r.nranks, j->n);
            free(m);
            return ncclInvalidUsage;
        }
        if (m && r.color == j->color) {
            if (i == j->self)
                mine = nm;
            m[nm++] = (struct member){i, r.key};
        }
    }
    j->met = 1;
    struct ncclComm *c = j->comm;
    if (!c) /* a rank without color only had to take part */
        return ncclSuccess;
    if (j->kind == J_SPLIT) {
        if (mine < 0) { /* our own record says another color: someone rewrote it */
            WARN("%s: the record of rank %d in %s was changed", j->fn, j->self, j->dir);
            free(m);
            return ncclInternalError;
        }
        struct member me = m[mine];
        qsort(m, (size_t)nm, sizeof *m, member_cmp);
        for (int k = 0; k < nm; k++)
            if (m[k].parent_rank == me.parent_rank)
                c->rank = k;
        c->nranks = nm;
        free(m);
        char *dir = path_join(j->dir, "color-%d", j->color);
        if (!dir)
            return ncclSystemError;
        lock();
        free(c->dir);
        c->dir = dir;
        unlock();
    }
    ncclResult_t r = comm_alloc_buffers(c);
    if (r == ncclSuccess)
        INFO("comm %p rank %d nRanks %d cudaDev %d - Init COMPLETE", (void *)c, c->rank, c->nranks,
             (int)c->dev);
    return r;
}

/*
 * Records the outcome: the communicator's state, the claim, who frees the job.
 * A rank that failed before meeting the others withdraws its claim, so the
 * rank can be tried again; after meeting them it must not, or ranks still
 * looking for its record would wait for it in vain.
 */
static void job_settle(struct job *j, ncclResult_t r)
{
    if (r != ncclSuccess && j->kind == J_INIT && !j->met)
        unclaim_rank(j->dir, j->self, j->nonce);
    lock();
    struct ncclComm *c = j->comm;
    if (c) {
        c->job = NULL;
        c->state = r == ncclSuccess ? C_READY : C_FAILED;
        c->error = r;
    }
    int keep = j->in_group;
    if (keep) {
        j->done = 1;
        j->busy = 0;
    }
    unlock();
    if (!keep)
        job_free(j);
}

/* Takes j for running (under g_mu): 0 when someone else runs it or it is settled. */
static int job_acquire_locked(struct job *j)
{
    if (j->busy || j->done)
        return 0;
    j->busy = 1;
    return 1;
}

/*
 * Finishes an acquired j (block) or takes one look (!block). Returns its
 * outcome, or ncclInProgress. Once settled (not ncclInProgress) j may be
 * freed already.
 */
static ncclResult_t job_drive(struct job *j, int block)
{
    assert(j->busy);
    ncclResult_t r;
    long pause_us = 500;
    for (;;) {
        r = job_step(j);
        if (r != ncclInProgress)
            break;
        if (now_s() >= j->deadline) {
            WARN("%s: timed out after %.1f s waiting for the other ranks in %s", j->fn,
                 g_cfg.timeout, j->dir);
            r = ncclSystemError;
            break;
        }
        if (!block)
            break;
        struct timespec ts = {0, pause_us * 1000};
        nanosleep(&ts, NULL);
        pause_us = pause_us * 2 < 10000 ? pause_us * 2 : 10000;
    }
    if (r == ncclInProgress) {
        lock();
        j->busy = 0;
        unlock();
        return r;
    }
    job_settle(j, r);
    return r;
}

/* Room for one more job in the calling thread's group list. */
static int group_reserve(void)
{
    if (t_group.njobs < t_group.cap)
        return 0;
    int cap = t_group.cap ? t_group.cap * 2 : 8;
    struct job **p = realloc(t_group.jobs, (size_t)cap * sizeof *p);
    if (!p)
        return -1;
    t_group.jobs = p;
    t_group.cap = cap;
    return 0;
}

/*
 * What an init or split call does with the job it started: leave it to
 * ncclGroupEnd inside a group; one look for a non-blocking communicator
 * (ncclInProgress unless done); otherwise wait for it. The job is acquired
 * (or put in the group list) before its communicator shows it, so no other
 * thread can run it meanwhile. A failed blocking call creates nothing: the
 * communicator is discarded and *out stays NULL.
 */
static ncclResult_t job_start(struct job *j, ncclComm_t *out)
{
    struct ncclComm *c = j->comm;
    int grouped = t_group.depth > 0;
    if (grouped && group_reserve() != 0) {
        j->comm = NULL;
        job_free(j);
        if (c)
            comm_discard(c);
        return ncclSystemError;
    }
    lock();
    if (grouped)
        j->in_group = 1;
    else
        j->busy = 1;
    if (c)
        c->job = j;
    unlock();
    if (grouped) {
        t_group.jobs[t_group.njobs++] = j;
        if (out)
            *out = c;
        return ncclSuccess;
    }
    if (j->nonblocking) {
        if (out)
            *out = c;
        ncclResult_t r = job_drive(j, 0);
        if (!c && r == ncclInProgress) {
            /* No handle to poll it with: a colorless non-blocking split only publishes. */
            job_free(j);
            return ncclSuccess;
        }
        return r;
    }
    ncclResult_t r = job_drive(j, 1);
    assert(r != ncclInProgress);
    if (r != ncclSuccess && c)
        comm_discard(c);
    else if (out)
        *out = c;
    return r;
}

/* ------------------------------------------------------------------------ */
/* Version, errors, unique ids                                                */
/* ------------------------------------------------------------------------ */

ncclResult_t pncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
NCCL_ALIAS(ncclGetVersion);

/* The fake's own short texts, not NVIDIA's. */
const char *pncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled CUDA error";
    case ncclSystemError:
        return "system error (file system, timeout or resources)";
    case ncclInternalError:
        return "internal error";
    case ncclInvalidArgument:
        return "invalid argument";
    case ncclInvalidUsage:
        return "invalid usage";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "operation in progress";
    default:
        return "unknown result code";
    }
}
NCCL_ALIAS(ncclGetErrorString);

/* The text of the last warning in this process (NCCL keeps one for all communicators). */
const char *pncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return g_last_error;
}
NCCL_ALIAS(ncclGetLastError);

/* Nothing to reset: the debug settings are read once. */
void pncclResetDebugInit(void) {}
/* Spelt out: __typeof__ of a deprecated function would count as a use. */
void ncclResetDebugInit(void) __attribute__((weak, alias("pncclResetDebugInit")));

/*
 * 128 bytes: a magic and random bytes. The first ID_KEY_BYTES random bytes
 * name the rendezvous directory; the rest only make ids unguessable.
 */
ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
    lib_init();
    if (!uniqueId) {
        WARN("ncclGetUniqueId: uniqueId argument is NULL");
        return ncclInvalidArgument;
    }
    collect_stale();
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, ID_MAGIC, sizeof ID_MAGIC);
    size_t off = sizeof ID_MAGIC;
    while (off < sizeof uniqueId->internal) {
        ssize_t n = getrandom(uniqueId->internal + off, sizeof uniqueId->internal - off, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            WARN("ncclGetUniqueId: getrandom failed: %s", strerror(errno));
            return ncclSystemError;
        }
        off += (size_t)n;
    }
    return ncclSuccess;
}
NCCL_ALIAS(ncclGetUniqueId);

/* base/nccl-<hex of the key bytes>, or NULL when there is no base directory. */
static char *id_dir(const unsigned char *key)
{
    if (!g_cfg.base[0])
        return NULL;
    char hex[2 * ID_KEY_BYTES + 1];
    for (int i = 0; i < ID_KEY_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    return path_join(g_cfg.base, "nccl-%s", hex);
}

/* ------------------------------------------------------------------------ */
/* Init                                                                       */
/* ------------------------------------------------------------------------ */

/* NULL or an NCCL_CONFIG_INITIALIZER'd config; its blocking field, else the default. */
static ncclResult_t read_config(const ncclConfig_t *config, int inherit_blocking, int *blocking,
                                int *share, const char *fn)
{
    *blocking = inherit_blocking;
    if (share)
        *share = g_cfg.split_share;
    if (!config)
        return ncclSuccess;
    if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, cgaClusterSize)) {
        WARN("%s: config is not initialised with NCCL_CONFIG_INITIALIZER", fn);
        return ncclInvalidArgument;
    }
    if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 &&
        config->blocking != 1) {
        WARN("%s: config->blocking %d is not 0 or 1", fn, config->blocking);
        return ncclInvalidArgument;
    }
    if (config->blocking != NCCL_CONFIG_UNDEF_INT)
        *blocking = config->blocking;
    if (share && config->size >= offsetof(ncclConfig_t, trafficClass) &&
        config->splitShare != NCCL_CONFIG_UNDEF_INT)
        *share = config->splitShare == 1;
    return ncclSuccess;
}

/* Done at the first init of a process, with a context current. */
static void first_init(void)
{
    lock();
    int first = !g_first_init_done;
    g_first_init_done = 1;
    unlock();
    if (!first)
        return;
    INFO("cutrace fake NCCL version %d.%d.%d (%d)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
         NCCL_VERSION_CODE);
    if (g_cfg.cumem_host)
        host_numa_probe();
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                              const ncclConfig_t *config, const char *fn)
{
    lib_init();
    FAKE_BLOCK_POINT(fn);
    if (!out) {
        WARN("%s: comm argument is NULL", fn);
        return ncclInvalidArgument;
    }
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        WARN("%s: invalid rank requested: %d/%d", fn, rank, nranks);
        return ncclInvalidArgument;
    }
    if (!id || memcmp(id->internal, ID_MAGIC, sizeof ID_MAGIC) != 0) {
        WARN("%s: the unique id was not made by ncclGetUniqueId", fn);
        return ncclInvalidArgument;
    }
    int blocking;
    ncclResult_t r = read_config(config, g_cfg.blocking, &blocking, NULL, fn);
    if (r != ncclSuccess)
        return r;
    if ((r = driver_ready()) != ncclSuccess)
        return r;
    CUdevice dev;
    CUcontext ctx;
    if ((r = bind_context(&dev, &ctx)) != ncclSuccess)
        return r;
    first_init();
    char *dir = id_dir((const unsigned char *)id->internal + sizeof ID_MAGIC);
    if (!dir) {
        WARN("%s: no directory for the rendezvous", fn);
        return ncclSystemError;
    }
    struct job *j = calloc(1, sizeof *j);
    if (!j) {
        free(dir);
        return ncclSystemError;
    }
    *j = (struct job){.kind = J_INIT,
                      .dir = dir,
                      .n = nranks,
                      .self = rank,
                      .nonce = make_nonce(),
                      .deadline = now_s() + g_cfg.timeout,
                      .nonblocking = !blocking,
                      .fn = fn};
    r = claim_rank(dir, rank, nranks, dev, j->nonce, fn);
    if (r != ncclSuccess) {
        job_free(j);
        return r;
    }
    struct ncclComm *c = comm_new(dev, ctx, blocking);
    if (!c) {
        unclaim_rank(dir, rank, j->nonce);
        job_free(j);
        return ncclSystemError;
    }
    c->rank = rank;
    c->nranks = nranks;
    c->dir = strdup(dir);
    j->comm = c;
    INFO("%s: comm %p rank %d nranks %d cudaDev %d: rendezvous in %s", fn, (void *)c, rank, nranks,
         (int)dev, dir);
    return job_start(j, out);
}

ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return group_note(init_rank(comm, nranks, &commId, rank, NULL, "ncclCommInitRank"));
}
NCCL_ALIAS(ncclCommInitRank);

ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config)
{
    return group_note(init_rank(comm, nranks, &commId, rank, config, "ncclCommInitRankConfig"));
}
NCCL_ALIAS(ncclCommInitRankConfig);

/* The rendezvous uses the first id; the others only spread the load in the real library. */
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId *commIds, ncclConfig_t *config)
{
    lib_init();
    if (nId < 1 || !commIds) {
        WARN("ncclCommInitRankScalable: nId %d, commIds %p", nId, (void *)commIds);
        if (newcomm)
            *newcomm = NULL;
        return group_note(ncclInvalidArgument);
    }
    return group_note(
        init_rank(newcomm, nranks, &commIds[0], myrank, config, "ncclCommInitRankScalable"));
}
NCCL_ALIAS(ncclCommInitRankScalable);

/*
 * One process, ndev communicators, no files: their rendezvous directory (for
 * later splits) gets a random name and is only created by a split.
 */
ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    lib_init();
    const char *fn = "ncclCommInitAll";
    if (!comms || ndev < 1) {
        WARN("%s: comms %p, ndev %d", fn, (void *)comms, ndev);
        return group_note(ncclInvalidArgument);
    }
    for (int i = 0; i < ndev; i++)
        comms[i] = NULL;
    ncclResult_t r = driver_ready();
    if (r != ncclSuccess)
        return group_note(r);
    for (int i = 0; devlist && i < ndev; i++) {
        if (devlist[i] < 0 || devlist[i] >= g_ndev) {
            WARN("%s: invalid device %d (%d devices)", fn, devlist[i], g_ndev);
            return group_note(ncclInvalidArgument);
        }
        for (int k = 0; k < i; k++) {
            if (devlist[k] == devlist[i]) {
                WARN("%s: duplicate device %d in the device list", fn, devlist[i]);
                return group_note(ncclInvalidUsage);
            }
        }
    }
    if (!devlist && ndev > g_ndev) {
        WARN("%s: %d devices requested, %d present", fn, ndev, g_ndev);
        return group_note(ncclInvalidArgument);
    }
    unsigned char key[ID_KEY_BYTES];
    uint64_t n1 = make_nonce(), n2 = make_nonce();
    memcpy(key, &n1, sizeof n1);
    memcpy(key + sizeof n1, &n2, sizeof n2);
    char *dir = id_dir(key);
    for (int i = 0; i < ndev && r == ncclSuccess; i++) {
        CUdevice dev = devlist ? devlist[i] : i;
        CUcontext ctx;
        r = primary_ctx(dev, &ctx);
        if (r == ncclSuccess && i == 0) {
            int pushed = push_ctx(ctx);
            first_init();
            pop_ctx(pushed);
        }
        struct ncclComm *c = r == ncclSuccess ? comm_new(dev, ctx, g_cfg.blocking) : NULL;
        if (r == ncclSuccess && !c)
            r = ncclSystemError;
        if (r != ncclSuccess)
            break;
        c->rank = i;
        c->nranks = ndev;
        c->dir = dir ? strdup(dir) : NULL;
        r = comm_alloc_buffers(c);
        if (r != ncclSuccess) {
            comm_discard(c);
            break;
        }
        lock();
        c->state = C_READY;
        unlock();
        comms[i] = c;
        INFO("comm %p rank %d nRanks %d cudaDev %d - Init COMPLETE", (void *)c, i, ndev, (int)dev);
    }
    free(dir);
    if (r != ncclSuccess) {
        for (int i = 0; i < ndev; i++) {
            if (comms[i])
                comm_discard(comms[i]);
            comms[i] = NULL;
        }
    }
    return group_note(r);
}
NCCL_ALIAS(ncclCommInitAll);

/* ------------------------------------------------------------------------ */
/* Split and shrink                                                           */
/* ------------------------------------------------------------------------ */

/*
 * The collective part of split and shrink: publish (color, key) as record
 * parent-rank in dir/split-<n>, n counting this rank's splits of comm, so that
 * every rank's n-th split meets in the same place.
 */
static ncclResult_t split_start(struct ncclComm *parent, int color, int key, unsigned char *expect,
                                ncclComm_t *newcomm, const ncclConfig_t *config, const char *fn)
{
    int blocking, share;
    ncclResult_t r = read_config(config, parent->blocking, &blocking, &share, fn);
    if (r != ncclSuccess) {
        free(expect);
        return r;
    }
    lock();
    int seq = parent->nsplits++;
    char *pdir = parent->dir ? strdup(parent->dir) : NULL;
    int prank = parent->rank, pn = parent->nranks;
    CUdevice dev = parent->dev;
    CUcontext ctx = parent->ctx;
    unlock();
    char *dir = pdir ? path_join(pdir, "split-%d", seq) : NULL;
    free(pdir);
    if (!dir || mkdir_p(dir) != 0) {
        WARN("%s: cannot create the rendezvous directory %s", fn, dir ? dir : "(none)");
        free(dir);
        free(expect);
        return ncclSystemError;
    }
    struct job *j = calloc(1, sizeof *j);
    if (!j) {
        free(dir);
        free(expect);
        return ncclSystemError;
    }
    *j = (struct job){.kind = J_SPLIT,
                      .dir = dir,
                      .n = pn,
                      .self = prank,
                      .color = color,
                      .key = key,
                      .expect = expect,
                      .nonce = make_nonce(),
                      .deadline = now_s() + g_cfg.timeout,
                      .nonblocking = !blocking,
                      .fn = fn};
    struct rec rec = rec_self(j->nonce);
    rec.nranks = pn;
    rec.dev = dev;
    rec.color = color;
    rec.key = key;
    char *path = path_join(dir, "rank-%d", prank);
    if (!path || rec_write(path, &rec) != 0) {
        WARN("%s: cannot write %s", fn, path ? path : dir);
        free(path);
        job_free(j);
        return ncclSystemError;
    }
    free(path);
    if (color != NCCL_SPLIT_NOCOLOR) {
        j->comm = comm_new(dev, ctx, blocking);
        if (!j->comm) {
            job_free(j);
            return ncclSystemError;
        }
        j->comm->share = share;
    }
    return job_start(j, newcomm);
}

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config)
{
    lib_init();
    const char *fn = "ncclCommSplit";
    ncclResult_t r = comm_check(comm, fn, 0);
    if (r != ncclSuccess)
        return group_note(r);
    if (!newcomm) {
        WARN("%s: newcomm argument is NULL", fn);
        return group_note(ncclInvalidArgument);
    }
    *newcomm = NULL;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
        WARN("%s: color %d is negative and not NCCL_SPLIT_NOCOLOR", fn, color);
        return group_note(ncclInvalidArgument);
    }
    return group_note(split_start(comm, color, key, NULL, newcomm, config, fn));
}
NCCL_ALIAS(ncclCommSplit);

/*
 * A split that only the ranks not excluded take part in (the excluded ones may
 * be dead): one color, new ranks in parent-rank order.
 */
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                             ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    lib_init();
    const char *fn = "ncclCommShrink";
    ncclResult_t r = comm_check(comm, fn, CHECK_ALLOW_REVOKED);
    if (r != ncclSuccess)
        return group_note(r);
    if (!newcomm || excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList) ||
        (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)) {
        WARN("%s: invalid arguments", fn);
        return group_note(ncclInvalidArgument);
    }
    *newcomm = NULL;
    unsigned char *expect = malloc((size_t)comm->nranks);
    if (!expect)
        return group_note(ncclSystemError);
    memset(expect, 1, (size_t)comm->nranks);
    for (int i = 0; i < excludeRanksCount; i++) {
        int x = excludeRanksList[i];
        if (x < 0 || x >= comm->nranks || !expect[x] || x == comm->rank) {
            WARN("%s: cannot exclude rank %d", fn, x);
            free(expect);
            return group_note(ncclInvalidArgument);
        }
        expect[x] = 0;
    }
    return group_note(split_start(comm, 0, comm->rank, expect, newcomm, config, fn));
}
NCCL_ALIAS(ncclCommShrink);

/* ------------------------------------------------------------------------ */
/* Finalize, destroy, abort, revoke                                           */
/* ------------------------------------------------------------------------ */

ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    lib_init();
    ncclResult_t r = comm_check(comm, "ncclCommFinalize", CHECK_ALLOW_REVOKED);
    if (r != ncclSuccess)
        return group_note(r);
    if (!comm_transition(comm, 1u << C_READY | 1u << C_REVOKED, C_FINALIZED)) {
        WARN("ncclCommFinalize: communicator %p changed state meanwhile", (void *)comm);
        return group_note(ncclInvalidUsage);
    }
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommFinalize);

/*
 * Frees everything the communicator holds. A pending one gives up its claim;
 * if a group list still holds its job, the job is left there as an orphan.
 * The struct stays in the list as C_DEAD, so the dangling handle is
 * recognised (ncclInvalidArgument) and never handed out again.
 */
static ncclResult_t comm_destroy(ncclComm_t comm, const char *fn)
{
    lib_init();
    if (!comm)
        return ncclSuccess; /* as NCCL */
    lock();
    struct ncclComm *c = comm_find_locked(comm);
    if (!c || c->state == C_DEAD) {
        unlock();
        WARN("%s: invalid communicator %p (never created, or destroyed)", fn, (void *)comm);
        return ncclInvalidArgument;
    }
    struct job *j = c->job;
    if (j && j->busy) {
        unlock();
        WARN("%s: communicator %p is being initialised by another thread", fn, (void *)comm);
        return ncclInvalidUsage;
    }
    int inherited = c->state == C_INHERITED;
    c->job = NULL;
    c->state = C_DEAD;
    int free_job = 0;
    if (j) {
        if (j->in_group)
            j->orphan = 1;
        else
            free_job = 1;
        j->comm = NULL;
    }
    unlock();
    if (j && j->kind == J_INIT && !inherited)
        unclaim_rank(j->dir, j->self, j->nonce);
    if (free_job)
        job_free(j);
    if (!inherited)
        comm_free_device(c);
    lock();
    comm_free_host_locked(c);
    unlock();
    INFO("%s: comm %p destroyed", fn, (void *)comm);
    return ncclSuccess;
}

ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    return comm_destroy(comm, "ncclCommDestroy");
}
NCCL_ALIAS(ncclCommDestroy);

ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    return comm_destroy(comm, "ncclCommAbort");
}
NCCL_ALIAS(ncclCommAbort);

ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    lib_init();
    ncclResult_t r = comm_check(comm, "ncclCommRevoke", CHECK_ALLOW_REVOKED);
    if (r != ncclSuccess)
        return r;
    if (revokeFlags != NCCL_REVOKE_DEFAULT) {
        WARN("ncclCommRevoke: revokeFlags %d must be NCCL_REVOKE_DEFAULT", revokeFlags);
        return ncclInvalidArgument;
    }
    if (!comm_transition(comm, 1u << C_READY | 1u << C_REVOKED, C_REVOKED)) {
        WARN("ncclCommRevoke: communicator %p changed state meanwhile", (void *)comm);
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommRevoke);

/* ------------------------------------------------------------------------ */
/* Queries                                                                    */
/* ------------------------------------------------------------------------ */

/* The async error is the outcome of the init; a pending one is given one look. */
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    lib_init();
    const char *fn = "ncclCommGetAsyncError";
    if (!comm || !asyncError) {
        WARN("%s: comm %p, asyncError %p", fn, (void *)comm, (void *)asyncError);
        return ncclInvalidArgument;
    }
    ncclResult_t err = ncclSuccess;
    switch (comm_poll(comm, &err)) {
    case C_DEAD:
        WARN("%s: invalid communicator %p (never created, or destroyed)", fn, (void *)comm);
        return ncclInvalidArgument;
    case C_INHERITED:
        WARN("%s: communicator %p belongs to the parent process", fn, (void *)comm);
        return ncclInvalidUsage;
    case C_PENDING:
        *asyncError = ncclInProgress;
        break;
    case C_FAILED:
        *asyncError = err;
        break;
    default:
        *asyncError = ncclSuccess;
        break;
    }
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommGetAsyncError);

static ncclResult_t query(ncclComm_t comm, int *out, const char *fn, int what)
{
    lib_init();
    ncclResult_t r = comm_check(comm, fn, CHECK_ALLOW_CLOSED | CHECK_ALLOW_REVOKED);
    if (r != ncclSuccess)
        return r;
    if (!out) {
        WARN("%s: output argument is NULL", fn);
        return ncclInvalidArgument;
    }
    *out = what == 0 ? comm->nranks : what == 1 ? (int)comm->dev : comm->rank;
    return ncclSuccess;
}

ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    return query(comm, count, "ncclCommCount", 0);
}
NCCL_ALIAS(ncclCommCount);

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    return query(comm, device, "ncclCommCuDevice", 1);
}
NCCL_ALIAS(ncclCommCuDevice);

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    return query(comm, rank, "ncclCommUserRank", 2);
}
NCCL_ALIAS(ncclCommUserRank);

/* ------------------------------------------------------------------------ */
/* Reduction operators                                                        */
/* ------------------------------------------------------------------------ */

static int op_valid(struct ncclComm *c, ncclRedOp_t op)
{
    if ((int)op >= 0 && (int)op < ncclNumOps)
        return 1;
    int idx = (int)op - ncclNumOps;
    lock();
    int ok = idx >= 0 && idx < c->nops && c->ops[idx];
    unlock();
    return ok;
}

/* Custom operators get the lowest free id from ncclNumOps up, per communicator. */
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm)
{
    lib_init();
    const char *fn = "ncclRedOpCreatePreMulSum";
    ncclResult_t r = comm_check(comm, fn, 0);
    if (r != ncclSuccess)
        return r;
    if (!op || !scalar || (int)datatype < 0 || (int)datatype >= ncclNumTypes ||
        (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)) {
        WARN("%s: invalid arguments", fn);
        return ncclInvalidArgument;
    }
    lock();
    int idx = 0;
    while (idx < comm->nops && comm->ops[idx])
        idx++;
    if (idx == comm->nops) {
        int n = comm->nops ? comm->nops * 2 : 8;
        unsigned char *p = realloc(comm->ops, (size_t)n);
        if (!p) {
            unlock();
            return ncclSystemError;
        }
        memset(p + comm->nops, 0, (size_t)(n - comm->nops));
        comm->ops = p;
        comm->nops = n;
    }
    comm->ops[idx] = 1;
    unlock();
    *op = (ncclRedOp_t)(ncclNumOps + idx);
    return ncclSuccess;
}
NCCL_ALIAS(ncclRedOpCreatePreMulSum);

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    lib_init();
    const char *fn = "ncclRedOpDestroy";
    ncclResult_t r = comm_check(comm, fn, CHECK_ALLOW_CLOSED | CHECK_ALLOW_REVOKED);
    if (r != ncclSuccess)
        return r;
    int idx = (int)op - ncclNumOps;
    lock();
    int ok = idx >= 0 && idx < comm->nops && comm->ops[idx];
    if (ok)
        comm->ops[idx] = 0;
    unlock();
    if (!ok) {
        WARN("%s: operator %d is %s", fn, (int)op,
             (int)op >= 0 && (int)op < ncclNumOps ? "built in" : "not a custom operator of comm");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}
NCCL_ALIAS(ncclRedOpDestroy);

/* ------------------------------------------------------------------------ */
/* Collectives and point-to-point                                             */
/* ------------------------------------------------------------------------ */

/* Which buffers must not be NULL when count > 0 (root-only ones checked on the root). */
enum {
    NEED_SEND = 1,
    NEED_RECV = 2,
    ROOT_SEND = 4, /* send buffer needed on the root only */
    ROOT_RECV = 8, /* receive buffer needed on the root only */
    HAS_ROOT = 16,
    HAS_PEER = 32,
    HAS_OP = 64,
};

/*
 * The argument checks NCCL makes before enqueuing; then nothing happens, since
 * device memory is only simulated. Inside a group a pending communicator is
 * fine: its operations would wait for ncclGroupEnd.
 */
static ncclResult_t coll_check(const char *fn, int what, const void *sendbuff, const void *recvbuff,
                               size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
                               ncclComm_t comm)
{
    lib_init();
    FAKE_BLOCK_POINT(fn);
    ncclResult_t r = comm_check(comm, fn, t_group.depth > 0 ? CHECK_ALLOW_PENDING : 0);
    if (r != ncclSuccess)
        return group_note(r);
    if ((int)datatype < 0 || (int)datatype >= ncclNumTypes) {
        WARN("%s: invalid data type %d", fn, (int)datatype);
        return group_note(ncclInvalidArgument);
    }
    if ((what & HAS_OP) && !op_valid(comm, op)) {
        WARN("%s: invalid reduction operation %d", fn, (int)op);
        return group_note(ncclInvalidArgument);
    }
    lock();
    int nranks = comm->nranks, rank = comm->rank,
        known = comm->state != C_PENDING || !comm->job || comm->job->kind == J_INIT;
    unlock();
    if ((what & (HAS_ROOT | HAS_PEER)) && known && (root < 0 || root >= nranks)) {
        WARN("%s: invalid %s %d (nranks %d)", fn, (what & HAS_ROOT) ? "root" : "peer", root,
             nranks);
        return group_note(ncclInvalidArgument);
    }
    int on_root = (what & HAS_ROOT) && root == rank;
    if (count > 0) {
        int need_send = (what & NEED_SEND) || ((what & ROOT_SEND) && on_root);
        int need_recv = (what & NEED_RECV) || ((what & ROOT_RECV) && on_root);
        if ((need_send && !sendbuff) || (need_recv && !recvbuff)) {
            WARN("%s: %s buffer is NULL with count %zu", fn,
                 need_send && !sendbuff ? "send" : "receive", count);
            return group_note(ncclInvalidArgument);
        }
    }
    return ncclSuccess;
}

ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclAllReduce", NEED_SEND | NEED_RECV | HAS_OP, sendbuff, recvbuff, count,
                      datatype, op, 0, comm);
}
NCCL_ALIAS(ncclAllReduce);

ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclBroadcast", ROOT_SEND | NEED_RECV | HAS_ROOT, sendbuff, recvbuff, count,
                      datatype, ncclSum, root, comm);
}
NCCL_ALIAS(ncclBroadcast);

/* In place: one buffer, needed on every rank. */
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclBcast", NEED_SEND | NEED_RECV | HAS_ROOT, buff, buff, count, datatype,
                      ncclSum, root, comm);
}
NCCL_ALIAS(ncclBcast);

ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclReduce", NEED_SEND | ROOT_RECV | HAS_ROOT | HAS_OP, sendbuff, recvbuff,
                      count, datatype, op, root, comm);
}
NCCL_ALIAS(ncclReduce);

ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclAllGather", NEED_SEND | NEED_RECV, sendbuff, recvbuff, sendcount,
                      datatype, ncclSum, 0, comm);
}
NCCL_ALIAS(ncclAllGather);

ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclReduceScatter", NEED_SEND | NEED_RECV | HAS_OP, sendbuff, recvbuff,
                      recvcount, datatype, op, 0, comm);
}
NCCL_ALIAS(ncclReduceScatter);

ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclAlltoAll", NEED_SEND | NEED_RECV, sendbuff, recvbuff, count, datatype,
                      ncclSum, 0, comm);
}
NCCL_ALIAS(ncclAlltoAll);

ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclGather", NEED_SEND | ROOT_RECV | HAS_ROOT, sendbuff, recvbuff, count,
                      datatype, ncclSum, root, comm);
}
NCCL_ALIAS(ncclGather);

ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclScatter", ROOT_SEND | NEED_RECV | HAS_ROOT, sendbuff, recvbuff, count,
                      datatype, ncclSum, root, comm);
}
NCCL_ALIAS(ncclScatter);

ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclSend", NEED_SEND | HAS_PEER, sendbuff, NULL, count, datatype, ncclSum,
                      peer, comm);
}
NCCL_ALIAS(ncclSend);

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return coll_check("ncclRecv", NEED_RECV | HAS_PEER, NULL, recvbuff, count, datatype, ncclSum,
                      peer, comm);
}
NCCL_ALIAS(ncclRecv);

/* ------------------------------------------------------------------------ */
/* Groups                                                                     */
/* ------------------------------------------------------------------------ */

ncclResult_t pncclGroupStart(void)
{
    lib_init();
    if (t_group.depth == 0)
        t_group.err = ncclSuccess;
    t_group.depth++;
    return ncclSuccess;
}
NCCL_ALIAS(ncclGroupStart);

/*
 * The outermost end finishes what the group started: blocking jobs are
 * waited for; non-blocking ones get one look and are left to polling
 * (ncclInProgress). Returns the first error of the group.
 */
static ncclResult_t group_end(const char *fn)
{
    lib_init();
    if (t_group.depth == 0) {
        WARN("%s: not in a group (ncclGroupStart was not called)", fn);
        return ncclInvalidUsage;
    }
    if (--t_group.depth > 0)
        return ncclSuccess;
    struct job **jobs = t_group.jobs;
    int njobs = t_group.njobs;
    ncclResult_t res = t_group.err;
    t_group.jobs = NULL;
    t_group.njobs = t_group.cap = 0;
    t_group.err = ncclSuccess;
    int in_progress = 0;
    for (int i = 0; i < njobs; i++) {
        struct job *j = jobs[i];
        lock();
        int skip = j->orphan || j->done;
        int nonblocking = j->nonblocking && j->comm;
        if (!skip) {
            /* A non-blocking job is handed to its communicator, to be polled. */
            if (nonblocking)
                j->in_group = 0;
            else /* the wait starts now, as NCCL's does at the end of the group */
                j->deadline = now_s() + g_cfg.timeout;
            int mine = job_acquire_locked(j);
            assert(mine); /* nobody runs a job a group list holds */
            (void)mine;
        }
        unlock();
        if (skip) {
            job_free(j);
            continue;
        }
        ncclResult_t r = job_drive(j, !nonblocking);
        if (nonblocking && r == ncclInProgress)
            in_progress = 1;
        if (!nonblocking)
            job_free(j); /* still ours: settled with in_group set */
        if (r != ncclSuccess && r != ncclInProgress && res == ncclSuccess)
            res = r;
    }
    free(jobs);
    if (res == ncclSuccess && in_progress)
        res = ncclInProgress;
    return res;
}

ncclResult_t pncclGroupEnd(void)
{
    FAKE_BLOCK_POINT("ncclGroupEnd");
    return group_end("ncclGroupEnd");
}
NCCL_ALIAS(ncclGroupEnd);

/* Nothing runs on a simulated device, so the estimate is 0 and the group ends as usual. */
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    lib_init();
    if (!simInfo || simInfo->magic != 0x74685283) {
        WARN("ncclGroupSimulateEnd: simInfo is not initialised with NCCL_SIM_INFO_INITIALIZER");
        return ncclInvalidArgument;
    }
    ncclResult_t r = group_end("ncclGroupSimulateEnd");
    if (r == ncclSuccess || r == ncclInProgress)
        simInfo->estimatedTime = 0.0f;
    return r;
}
NCCL_ALIAS(ncclGroupSimulateEnd);

/* ------------------------------------------------------------------------ */
/* Memory                                                                     */
/* ------------------------------------------------------------------------ */

/*
 * Device memory for NCCL's user-buffer registration: through cuMemCreate &
 * co. (rounded up to the granularity), or cuMemAlloc with
 * NCCL_CUMEM_ENABLE=0, on the current context's device.
 */
ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    lib_init();
    if (!ptr) {
        WARN("ncclMemAlloc: ptr argument is NULL");
        return ncclInvalidArgument;
    }
    *ptr = NULL;
    if (size == 0)
        return ncclSuccess;
    ncclResult_t r = driver_ready();
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    if (r == ncclSuccess)
        r = bind_context(&dev, &ctx);
    struct memalloc *m = NULL;
    if (r == ncclSuccess && !(m = calloc(1, sizeof *m)))
        r = ncclSystemError;
    if (r == ncclSuccess)
        r = dev_alloc(dev, size, use_cumem(dev), &m->buf);
    if (r != ncclSuccess) {
        free(m);
        return r;
    }
    m->ctx = ctx;
    lock();
    m->next = g_memallocs;
    g_memallocs = m;
    unlock();
    *ptr = (void *)(uintptr_t)m->buf.va;
    return ncclSuccess;
}
NCCL_ALIAS(ncclMemAlloc);

ncclResult_t pncclMemFree(void *ptr)
{
    lib_init();
    if (!ptr)
        return ncclSuccess;
    lock();
    struct memalloc *m = NULL;
    for (struct memalloc **pp = &g_memallocs; *pp; pp = &(*pp)->next) {
        if ((*pp)->buf.va == (CUdeviceptr)(uintptr_t)ptr) {
            m = *pp;
            *pp = m->next;
            break;
        }
    }
    unlock();
    if (!m) {
        WARN("ncclMemFree: %p was not allocated by ncclMemAlloc", ptr);
        return ncclInvalidArgument;
    }
    int pushed = m->buf.vmm ? 0 : push_ctx(m->ctx);
    dev_free(&m->buf);
    pop_ctx(pushed);
    free(m);
    return ncclSuccess;
}
NCCL_ALIAS(ncclMemFree);

/* ------------------------------------------------------------------------ */
/* Buffer registration and windows                                            */
/* ------------------------------------------------------------------------ */

ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    lib_init();
    const char *fn = "ncclCommRegister";
    ncclResult_t r = comm_check(comm, fn, 0);
    if (r != ncclSuccess)
        return r;
    if (!buff || size == 0 || !handle) {
        WARN("%s: buff %p, size %zu, handle %p", fn, buff, size, (void *)handle);
        return ncclInvalidArgument;
    }
    struct reg *g = calloc(1, sizeof *g);
    if (!g)
        return ncclSystemError;
    *g = (struct reg){.magic = REG_MAGIC, .buff = buff, .size = size};
    lock();
    g->next = comm->regs;
    comm->regs = g;
    unlock();
    *handle = g;
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommRegister);

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    lib_init();
    const char *fn = "ncclCommDeregister";
    ncclResult_t r = comm_check(comm, fn, CHECK_ALLOW_CLOSED | CHECK_ALLOW_REVOKED);
    if (r != ncclSuccess)
        return r;
    struct reg *found = NULL;
    lock();
    for (struct reg **pp = &comm->regs; *pp; pp = &(*pp)->next) {
        if (*pp == handle) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    unlock();
    if (!found) {
        WARN("%s: %p is not a registration of this communicator", fn, handle);
        return ncclInvalidArgument;
    }
    assert(found->magic == REG_MAGIC);
    free(found);
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommDeregister);

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                     int winFlags)
{
    lib_init();
    const char *fn = "ncclCommWindowRegister";
    ncclResult_t r = comm_check(comm, fn, 0);
    if (r != ncclSuccess)
        return r;
    if (!buff || size == 0 || !win || (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)) {
        WARN("%s: buff %p, size %zu, win %p, flags %#x", fn, buff, size, (void *)win,
             (unsigned)winFlags);
        return ncclInvalidArgument;
    }
    struct ncclWindow_vidmem *w = calloc(1, sizeof *w);
    if (!w)
        return ncclSystemError;
    *w = (struct ncclWindow_vidmem){
        .magic = WIN_MAGIC, .buff = buff, .size = size, .flags = winFlags};
    lock();
    w->next = comm->wins;
    comm->wins = w;
    unlock();
    *win = w;
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommWindowRegister);

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    lib_init();
    const char *fn = "ncclCommWindowDeregister";
    ncclResult_t r = comm_check(comm, fn, CHECK_ALLOW_CLOSED | CHECK_ALLOW_REVOKED);
    if (r != ncclSuccess)
        return r;
    struct ncclWindow_vidmem *found = NULL;
    lock();
    for (struct ncclWindow_vidmem **pp = &comm->wins; *pp; pp = &(*pp)->next) {
        if (*pp == win) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    unlock();
    if (!found) {
        WARN("%s: %p is not a window of this communicator", fn, (void *)win);
        return ncclInvalidArgument;
    }
    assert(found->magic == WIN_MAGIC);
    free(found);
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommWindowDeregister);
