/*
 * real_gpu_check.cu - the CUDA memory and NCCL roads cutrace traces, taken
 * once each on a real GPU (device 0), for tests/gpu/run.sh.
 *
 *   real_gpu_check [--facts PATH]      run every section, one result line each
 *   real_gpu_check --ipc-child FD [--facts PATH]
 *                                      (internal: the IPC importer, see below)
 *
 * Sections, each independent (a failing one is reported and the next runs,
 * so that one device session shows every failure at once):
 *
 *   context   cudaSetDevice, cudaFree(0), cudaMemGetInfo: the CUDA context alone
 *   malloc    cudaMalloc of 2 GiB, cudaMemGetInfo while it lives, cudaFree
 *   async     cudaMallocAsync (default pool) of 2 GiB, cudaMallocFromPoolAsync
 *             (a pool of its own) of 1 GiB, cudaFreeAsync, cudaMemGetInfo while
 *             each lives
 *   vmm       cuMemCreate 2 GiB, cuMemAddressReserve, cuMemMap, cuMemSetAccess,
 *             cudaMemGetInfo, cuMemUnmap, cuMemRelease, cuMemAddressFree; the
 *             driver functions come from cudaGetDriverEntryPointByVersion, as
 *             PyTorch's expandable segments get them, so the program needs no
 *             libcuda at link time and starts (and fails cleanly) without a
 *             driver
 *   pinned    pinned host memory: cudaHostAlloc 64 MiB and cudaMallocHost
 *             16 MiB, a copy host -> device -> host through them
 *             (cudaMemcpyAsync), cudaMemGetInfo while they live, cudaFreeHost
 *   ipc       cudaMalloc 64 MiB, cudaIpcGetMemHandle; a second process (this
 *             program again, fork+exec, the handle through a pipe) opens it
 *             with cudaIpcOpenMemHandle, checks and overwrites the bytes and
 *             closes it; the exporter checks what the importer wrote
 *   ncclmem   ncclMemAlloc of 1 GiB, cudaMemGetInfo while it lives, ncclMemFree
 *   nccl      a one-rank communicator (ncclGetUniqueId, ncclCommInitRank),
 *             cudaMemGetInfo with NCCL's buffers live, an eager ncclAllReduce,
 *             then a kernel and an ncclAllReduce captured into a CUDA graph in
 *             cudaStreamCaptureModeGlobal (what SGLang and vLLM capture in),
 *             and again in cudaStreamCaptureModeThreadLocal, each replayed 3
 *             times with cudaGraphLaunch; ncclCommFinalize/Destroy
 *   end       cudaMemGetInfo once everything is freed
 *
 * The allocations are large (GiB) on purpose: a road the tracer missed would
 * leave gigabytes "unexplained" at the next cudaMemGetInfo, which the test
 * bounds to the size of a CUDA context. Every section also checks that free
 * memory dropped by at least what it allocated; that failing fails it.
 *
 * A data check that fails (bytes read back, reduced values) fails its
 * section but never skips the section's later calls, so the trace holds every
 * call even where the data is wrong (on the fake stack of the dry run, copies
 * from device memory move no bytes and kernels do nothing). A failed API call
 * ends its section (the rest is cleanup).
 *
 * Output is deterministic (results, sizes and yes/no facts; no pointers, no
 * timings, no free-memory numbers), so a traced run must print exactly what an
 * untraced one prints, on a GPU and without a driver alike (then every section
 * fails with the same error). Exit status: 0 when every section passed, 1 when
 * any failed, 2 for a usage error.
 *
 * --facts PATH appends the program's ground truth to PATH, one JSON object per
 * line (one write(2) each, O_APPEND, so the IPC child appends to the same
 * file): "prog": "cuda", "pid", "event", "section", and per event
 *   mem_get_info    after every successful cudaMemGetInfo: "free", "total" (as
 *                   returned), "held" (device bytes the program holds: the
 *                   sizes of its live cudaMalloc, cudaMallocAsync,
 *                   cudaMallocFromPoolAsync, cuMemCreate and ncclMemAlloc
 *                   allocations; NCCL's own buffers and pinned memory not
 *                   included), "host_held" (pinned host bytes it holds)
 *   pinned          "ptr", "size", "api" of each pinned host allocation
 *   ipc_export      "handle_hex" (the 64-byte handle, 128 hex digits), "size"
 *   ipc_open        "handle_hex" (written by the importing process)
 *   nccl_mem_alloc  "ptr", "size"
 *   graph           "mode" ("global" | "thread_local"), "replays"
 *   section         "name", "ok", "detail" (the first failure, or "ok"), one
 *                   at each section's end
 *
 * Time on an H200 (estimate): about 3 s untraced, 5-10 s traced. Most of it
 * is the CUDA context (0.3-0.5 s, twice: the IPC child makes its own) and
 * ncclCommInitRank (0.5-1.5 s); the 2 GiB allocations and memsets take
 * milliseconds each, pinning 80 MiB some tens of milliseconds. The build
 * (build.sh, nvcc for sm_90) takes 5-10 s more.
 *
 * Build: examples/real_gpu/build.sh OUTPUT (nvcc, -cudart shared: the runtime
 * must be the shared libcudart for its calls to be interposed).
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)

#define IPC_BYTES     (64 * MIB)
#define IPC_CHECKED   4096 /* bytes the importer reads back and overwrites */
#define EXPORTED_BYTE 0x5a
#define IMPORTED_BYTE 0xa5
#define REPLAYS       3
#define NCCL_COUNT    (1 << 20)  /* floats */
#define PINNED_BYTES  (64 * MIB) /* cudaHostAlloc */
#define HOST_BYTES    (16 * MIB) /* cudaMallocHost, and the size of the copy */
#define NCCL_MEM      GIB

/* The free bytes after the context was made: later sections compare with it. */
static size_t baseline_free;
static int failures;

/* What this process holds (see the header): the facts' "held" and "host_held". */
static unsigned long long held, host_held;

/* The section running, and its first failure: the section fact's "detail". */
static const char *current_section = "";
static int section_failures;
static char section_detail[256];

static int facts_fd = -1;
static const char *facts_path;

/* ---- facts ---- */

/* Appends text to a JSON string (quotes, backslashes and controls escaped). */
static void json_str(char *buf, size_t cap, size_t *len, const char *text)
{
    for (const char *p = text; *p && *len + 8 < cap; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            *len += (size_t)snprintf(buf + *len, cap - *len, "\\%c", c);
        else if (c < 0x20)
            *len += (size_t)snprintf(buf + *len, cap - *len, "\\u%04x", c);
        else
            buf[(*len)++] = (char)c;
    }
    buf[*len] = '\0';
}

/*
 * One fact: {"prog": "cuda", "pid": N, "event": EVENT, "section": S, FIELDS}
 * where fields is a printf format of the remaining `"key": value` pairs
 * (without a leading comma; may be empty). One write(2), so lines from the
 * two processes never interleave.
 */
__attribute__((format(printf, 2, 3))) static void fact(const char *event, const char *fields, ...)
{
    if (facts_fd < 0)
        return;
    char line[1024];
    size_t len = 0;
    len += (size_t)snprintf(line, sizeof line, "{\"prog\": \"cuda\", \"pid\": %d, \"event\": \"",
                            (int)getpid());
    json_str(line, sizeof line, &len, event);
    len += (size_t)snprintf(line + len, sizeof line - len, "\", \"section\": \"");
    json_str(line, sizeof line, &len, current_section);
    len += (size_t)snprintf(line + len, sizeof line - len, "\"");
    if (fields[0]) {
        va_list ap;
        va_start(ap, fields);
        len += (size_t)snprintf(line + len, sizeof line - len, ", ");
        len += (size_t)vsnprintf(line + len, sizeof line - len, fields, ap);
        va_end(ap);
    }
    if (len + 2 >= sizeof line)
        len = sizeof line - 3; /* never: every fact is short */
    line[len++] = '}';
    line[len++] = '\n';
    while (write(facts_fd, line, len) < 0 && errno == EINTR) {
    }
}

static void hex64(char out[129], const void *bytes)
{
    const unsigned char *b = (const unsigned char *)bytes;
    for (int i = 0; i < 64; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static unsigned long long ptr_value(const void *p)
{
    return (unsigned long long)(uintptr_t)p;
}

/* ---- failures ---- */

/* One line per failure detail; the first one of a section is its fact's detail. */
static void fail(const char *section, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: FAILED ", section);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (section_failures++ == 0) {
        va_start(ap, fmt);
        vsnprintf(section_detail, sizeof section_detail, fmt, ap);
        va_end(ap);
    }
    failures++;
}

/* Evaluates a runtime call; on error reports it and jumps to `out`. */
#define CK(section, call)                                                                          \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fail(section, "%s: %s (%d)", #call, cudaGetErrorName(err_), (int)err_);                \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

#define CKD(section, call)                                                                         \
    do {                                                                                           \
        CUresult err_ = (call);                                                                    \
        if (err_ != CUDA_SUCCESS) {                                                                \
            fail(section, "%s: CUresult %d", #call, (int)err_);                                    \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

#define CKN(section, call)                                                                         \
    do {                                                                                           \
        ncclResult_t err_ = (call);                                                                \
        if (err_ != ncclSuccess) {                                                                 \
            fail(section, "%s: %s (%d)", #call, ncclGetErrorString(err_), (int)err_);              \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* cudaMemGetInfo, and its fact right after it. */
static cudaError_t mem_get_info(size_t *free_b, size_t *total_b)
{
    cudaError_t err = cudaMemGetInfo(free_b, total_b);
    if (err == cudaSuccess)
        fact("mem_get_info", "\"free\": %zu, \"total\": %zu, \"held\": %llu, \"host_held\": %llu",
             *free_b, *total_b, held, host_held);
    return err;
}

/* Fails the section unless free memory is at least `bytes` below the baseline. */
static bool dropped(const char *section, size_t free_b, unsigned long long bytes, const char *what)
{
    bool ok = baseline_free >= free_b + bytes;
    if (!ok)
        fail(section, "free dropped by less than the %s", what);
    return ok;
}

/* ---- context ---- */

static bool section_context(void)
{
    const char *s = "context";
    size_t free_b = 0, total_b = 0;
    struct cudaDeviceProp prop;
    CK(s, cudaSetDevice(0));
    CK(s, cudaFree(0)); /* makes the primary context now */
    CK(s, mem_get_info(&free_b, &total_b));
    CK(s, cudaGetDeviceProperties(&prop, 0));
    baseline_free = free_b;
    if (total_b != prop.totalGlobalMem) {
        fail(s, "cudaMemGetInfo's total is not the device's memory");
        goto out;
    }
    printf("context: ok, total matches the device's memory\n");
    return true;
out:
    return false;
}

/* ---- cudaMalloc ---- */

static bool section_malloc(void)
{
    const char *s = "malloc";
    void *p = NULL;
    size_t free_b = 0, total_b = 0;
    bool ok = false;
    CK(s, cudaMalloc(&p, 2 * GIB));
    held += 2 * GIB;
    CK(s, cudaMemset(p, 0, 2 * GIB));
    CK(s, cudaDeviceSynchronize());
    CK(s, mem_get_info(&free_b, &total_b));
    if (dropped(s, free_b, 2 * GIB, "2 GiB allocated"))
        printf("malloc: ok, 2 GiB, free dropped by at least that much\n");
    ok = true;
out:
    if (p) {
        if (cudaFree(p) == cudaSuccess)
            held -= 2 * GIB;
        else {
            fail(s, "cudaFree");
            ok = false;
        }
    }
    return ok;
}

/* ---- stream-ordered allocation ---- */

static bool section_async(void)
{
    const char *s = "async";
    cudaStream_t stream = NULL;
    cudaMemPool_t default_pool = NULL, own_pool = NULL;
    struct cudaMemPoolProps props;
    void *p = NULL, *q = NULL;
    size_t free_b = 0, total_b = 0;
    bool dropped_default = false, dropped_own = false, ok = false;

    CK(s, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(s, cudaMallocAsync(&p, 2 * GIB, stream));
    held += 2 * GIB;
    CK(s, cudaMemsetAsync(p, 0, 2 * GIB, stream));
    CK(s, cudaStreamSynchronize(stream));
    CK(s, mem_get_info(&free_b, &total_b));
    dropped_default = dropped(s, free_b, 2 * GIB, "2 GiB from the default pool");
    CK(s, cudaFreeAsync(p, stream));
    p = NULL;
    held -= 2 * GIB;
    CK(s, cudaStreamSynchronize(stream));
    /* The default pool's release threshold is 0, but trim to be sure that
     * the next measurements do not see memory it still keeps. */
    CK(s, cudaDeviceGetDefaultMemPool(&default_pool, 0));
    CK(s, cudaMemPoolTrimTo(default_pool, 0));

    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CK(s, cudaMemPoolCreate(&own_pool, &props));
    CK(s, cudaMallocFromPoolAsync(&q, GIB, own_pool, stream));
    held += GIB;
    CK(s, cudaMemsetAsync(q, 0, GIB, stream));
    CK(s, cudaStreamSynchronize(stream));
    CK(s, mem_get_info(&free_b, &total_b));
    dropped_own = dropped(s, free_b, GIB, "1 GiB from a pool of its own");
    CK(s, cudaFreeAsync(q, stream));
    q = NULL;
    held -= GIB;
    CK(s, cudaStreamSynchronize(stream));
    if (dropped_default && dropped_own)
        printf("async: ok, 2 GiB from the default pool, 1 GiB from a pool of its own, free "
               "dropped by at least that much\n");
    ok = true;
out:
    if (p && cudaFreeAsync(p, stream) == cudaSuccess)
        held -= 2 * GIB;
    if (q && cudaFreeAsync(q, stream) == cudaSuccess)
        held -= GIB;
    if (stream) {
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    if (own_pool)
        cudaMemPoolDestroy(own_pool);
    return ok;
}

/* ---- virtual memory management (driver API) ---- */

static PFN_cuMemGetAllocationGranularity_v10020 p_granularity;
static PFN_cuMemCreate_v10020 p_create;
static PFN_cuMemAddressReserve_v10020 p_reserve;
static PFN_cuMemMap_v10020 p_map;
static PFN_cuMemSetAccess_v10020 p_set_access;
static PFN_cuMemUnmap_v10020 p_unmap;
static PFN_cuMemRelease_v10020 p_release;
static PFN_cuMemAddressFree_v10020 p_address_free;

/* Looks a driver function up the way PyTorch does (CUDA 12.0 ABI). */
static cudaError_t driver_entry(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t err = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &found);
    if (err == cudaSuccess && found != cudaDriverEntryPointSuccess)
        err = cudaErrorSymbolNotFound;
    return err;
}

static bool section_vmm(void)
{
    const char *s = "vmm";
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr va = 0;
    size_t granularity = 0, size = 0, free_b = 0, total_b = 0;
    bool created = false, reserved = false, mapped = false, ok = false, good = true;
    unsigned char check[16];

    CK(s, driver_entry("cuMemGetAllocationGranularity", (void **)&p_granularity));
    CK(s, driver_entry("cuMemCreate", (void **)&p_create));
    CK(s, driver_entry("cuMemAddressReserve", (void **)&p_reserve));
    CK(s, driver_entry("cuMemMap", (void **)&p_map));
    CK(s, driver_entry("cuMemSetAccess", (void **)&p_set_access));
    CK(s, driver_entry("cuMemUnmap", (void **)&p_unmap));
    CK(s, driver_entry("cuMemRelease", (void **)&p_release));
    CK(s, driver_entry("cuMemAddressFree", (void **)&p_address_free));

    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CKD(s, p_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    size = (2 * GIB + granularity - 1) / granularity * granularity;
    CKD(s, p_create(&handle, size, &prop, 0));
    created = true;
    held += size;
    CKD(s, p_reserve(&va, size, 0, 0, 0));
    reserved = true;
    CKD(s, p_map(va, size, 0, handle, 0));
    mapped = true;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CKD(s, p_set_access(va, size, &access, 1));
    CK(s, cudaMemset((void *)va, 0x11, size));
    memset(check, 0, sizeof check);
    CK(s,
       cudaMemcpy(check, (void *)(va + size - sizeof check), sizeof check, cudaMemcpyDeviceToHost));
    if (check[0] != 0x11 || check[sizeof check - 1] != 0x11) {
        fail(s, "the mapped memory did not read back what was written");
        good = false;
    }
    CK(s, mem_get_info(&free_b, &total_b));
    good = dropped(s, free_b, size, "2 GiB mapped") && good;
    if (good)
        printf("vmm: ok, 2 GiB mapped, written and read back, free dropped by at least that "
               "much\n");
    ok = true;
out:
    if (mapped && p_unmap(va, size) != CUDA_SUCCESS && ok) {
        fail(s, "cuMemUnmap");
        ok = false;
    }
    if (created) {
        if (p_release(handle) == CUDA_SUCCESS)
            held -= size;
        else if (ok) {
            fail(s, "cuMemRelease");
            ok = false;
        }
    }
    if (reserved && p_address_free(va, size) != CUDA_SUCCESS && ok) {
        fail(s, "cuMemAddressFree");
        ok = false;
    }
    return ok;
}

/* ---- pinned host memory ---- */

static bool section_pinned(void)
{
    const char *s = "pinned";
    unsigned char *pinned = NULL, *host = NULL;
    void *dev = NULL;
    cudaStream_t stream = NULL;
    size_t free_b = 0, total_b = 0;
    bool ok = false, same = true;

    CK(s, cudaHostAlloc((void **)&pinned, PINNED_BYTES, cudaHostAllocDefault));
    host_held += PINNED_BYTES;
    fact("pinned", "\"api\": \"cudaHostAlloc\", \"ptr\": %llu, \"size\": %llu", ptr_value(pinned),
         PINNED_BYTES);
    CK(s, cudaMallocHost((void **)&host, HOST_BYTES));
    host_held += HOST_BYTES;
    fact("pinned", "\"api\": \"cudaMallocHost\", \"ptr\": %llu, \"size\": %llu", ptr_value(host),
         HOST_BYTES);
    CK(s, cudaMalloc(&dev, HOST_BYTES));
    held += HOST_BYTES;
    for (size_t i = 0; i < HOST_BYTES; i++)
        pinned[i] = (unsigned char)(i * 7 + 3);
    memset(host, 0, HOST_BYTES);
    CK(s, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(s, cudaMemcpyAsync(dev, pinned, HOST_BYTES, cudaMemcpyHostToDevice, stream));
    CK(s, cudaMemcpyAsync(host, dev, HOST_BYTES, cudaMemcpyDeviceToHost, stream));
    CK(s, cudaStreamSynchronize(stream));
    for (size_t i = 0; i < HOST_BYTES; i++)
        same = same && host[i] == pinned[i];
    if (!same)
        fail(s, "the bytes copied through the device did not come back");
    CK(s, mem_get_info(&free_b, &total_b));
    if (same)
        printf("pinned: ok, 64 MiB cudaHostAlloc and 16 MiB cudaMallocHost, 16 MiB copied through "
               "the device and back\n");
    ok = true;
out:
    if (stream)
        cudaStreamDestroy(stream);
    if (dev && cudaFree(dev) == cudaSuccess)
        held -= HOST_BYTES;
    if (host) {
        if (cudaFreeHost(host) == cudaSuccess)
            host_held -= HOST_BYTES;
        else if (ok) {
            fail(s, "cudaFreeHost of the cudaMallocHost memory");
            ok = false;
        }
    }
    if (pinned) {
        if (cudaFreeHost(pinned) == cudaSuccess)
            host_held -= PINNED_BYTES;
        else if (ok) {
            fail(s, "cudaFreeHost of the cudaHostAlloc memory");
            ok = false;
        }
    }
    return ok;
}

/* ---- CUDA IPC between two processes ---- */

/* The importer: opens the exporter's buffer, checks it, overwrites the start. */
static int ipc_child(int fd)
{
    const char *s = "ipc child";
    cudaIpcMemHandle_t handle;
    unsigned char *host = NULL;
    void *peer = NULL;
    size_t got = 0;
    bool seen = true;
    char hex[129];
    int rc = 1;
    current_section = s;
    while (got < sizeof handle) {
        ssize_t n = read(fd, (char *)&handle + got, sizeof handle - got);
        if (n <= 0) {
            fail(s, "reading the handle: %s", n == 0 ? "end of file" : strerror(errno));
            goto out;
        }
        got += (size_t)n;
    }
    close(fd);
    host = (unsigned char *)malloc(IPC_CHECKED);
    if (!host) {
        fail(s, "out of host memory");
        goto out;
    }
    memset(host, 0, IPC_CHECKED);
    CK(s, cudaSetDevice(0));
    CK(s, cudaIpcOpenMemHandle(&peer, handle, cudaIpcMemLazyEnablePeerAccess));
    hex64(hex, &handle);
    fact("ipc_open", "\"handle_hex\": \"%s\"", hex);
    CK(s, cudaMemcpy(host, peer, IPC_CHECKED, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < IPC_CHECKED; i++)
        seen = seen && host[i] == EXPORTED_BYTE;
    if (!seen)
        fail(s, "the exporter's buffer did not hold what it wrote");
    CK(s, cudaMemset(peer, IMPORTED_BYTE, IPC_CHECKED));
    CK(s, cudaDeviceSynchronize());
    CK(s, cudaIpcCloseMemHandle(peer));
    peer = NULL;
    if (seen) {
        printf("ipc child: ok, opened the exporter's buffer, read what it wrote, wrote back\n");
        rc = 0;
    }
out:
    if (peer)
        cudaIpcCloseMemHandle(peer);
    free(host);
    char detail[600];
    size_t len = 0;
    detail[0] = '\0';
    json_str(detail, sizeof detail, &len, rc == 0 ? "ok" : section_detail);
    fact("section", "\"name\": \"%s\", \"ok\": %s, \"detail\": \"%s\"", s,
         rc == 0 ? "true" : "false", detail);
    fflush(stdout);
    return rc;
}

static bool section_ipc(void)
{
    const char *s = "ipc";
    void *p = NULL;
    cudaIpcMemHandle_t handle;
    unsigned char host[IPC_CHECKED];
    int fds[2] = {-1, -1};
    pid_t child = -1;
    int status = 0;
    char hex[129];
    bool good = true, written = true, ok = false;

    CK(s, cudaMalloc(&p, IPC_BYTES));
    held += IPC_BYTES;
    CK(s, cudaMemset(p, EXPORTED_BYTE, IPC_BYTES));
    CK(s, cudaDeviceSynchronize());
    CK(s, cudaIpcGetMemHandle(&handle, p));
    hex64(hex, &handle);
    fact("ipc_export", "\"handle_hex\": \"%s\", \"size\": %llu", hex, IPC_BYTES);
    /* The handle goes into the pipe before the fork (64 bytes fit its
     * buffer), so no write can meet a reader that already died. */
    if (pipe(fds) != 0) {
        fail(s, "pipe: %s", strerror(errno));
        goto out;
    }
    if (write(fds[1], &handle, sizeof handle) != (ssize_t)sizeof handle) {
        fail(s, "writing the handle: %s", strerror(errno));
        goto out;
    }
    close(fds[1]);
    fds[1] = -1;
    fflush(stdout); /* the child writes to the same stdout */
    child = fork();
    if (child < 0) {
        fail(s, "fork: %s", strerror(errno));
        goto out;
    }
    if (child == 0) {
        /* A forked child may not use CUDA: exec a fresh image of this program. */
        char fd_arg[16];
        snprintf(fd_arg, sizeof fd_arg, "%d", fds[0]);
        if (facts_path)
            execl("/proc/self/exe", "real_gpu_check", "--ipc-child", fd_arg, "--facts", facts_path,
                  (char *)NULL);
        else
            execl("/proc/self/exe", "real_gpu_check", "--ipc-child", fd_arg, (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    fds[0] = -1;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    child = -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fail(s, "the importing process failed (status %d)", status);
        good = false;
    }
    memset(host, 0, sizeof host);
    CK(s, cudaMemcpy(host, p, IPC_CHECKED, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < IPC_CHECKED; i++)
        written = written && host[i] == IMPORTED_BYTE;
    if (!written) {
        fail(s, "the importer's bytes are not in the buffer");
        good = false;
    }
    if (good)
        printf("ipc: ok, 64 MiB exported, opened by another process, its bytes arrived\n");
    ok = true;
out:
    if (fds[0] >= 0)
        close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
    if (child > 0)
        waitpid(child, &status, 0);
    if (p && cudaFree(p) == cudaSuccess)
        held -= IPC_BYTES;
    return ok;
}

/* ---- ncclMemAlloc ---- */

static bool section_ncclmem(void)
{
    const char *s = "ncclmem";
    void *p = NULL;
    size_t free_b = 0, total_b = 0;
    bool ok = false;
    CK(s, cudaSetDevice(0));
    CKN(s, ncclMemAlloc(&p, NCCL_MEM));
    held += NCCL_MEM;
    fact("nccl_mem_alloc", "\"ptr\": %llu, \"size\": %llu", ptr_value(p), NCCL_MEM);
    CK(s, cudaMemset(p, 0, NCCL_MEM));
    CK(s, cudaDeviceSynchronize());
    CK(s, mem_get_info(&free_b, &total_b));
    if (dropped(s, free_b, NCCL_MEM, "1 GiB allocated"))
        printf("ncclmem: ok, 1 GiB from ncclMemAlloc, free dropped by at least that much\n");
    ok = true;
out:
    if (p) {
        ncclResult_t r = ncclMemFree(p);
        if (r == ncclSuccess)
            held -= NCCL_MEM;
        else if (ok) {
            fail(s, "ncclMemFree: %s (%d)", ncclGetErrorString(r), (int)r);
            ok = false;
        }
    }
    return ok;
}

/* ---- NCCL, eager and in CUDA graphs ---- */

__global__ void add_one(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}

static bool all_equal(const float *got, const float *base, float plus, int n)
{
    for (int i = 0; i < n; i++)
        if (got[i] != base[i] + plus)
            return false;
    return true;
}

/*
 * Captures a kernel and an allreduce on `stream` in `mode`, replays the graph
 * REPLAYS times, and checks that every value grew by REPLAYS more than
 * `before` replays had left. An API failure returns it (the caller jumps to
 * its cleanup); wrong values are only reported, in *right.
 */
static cudaError_t capture_and_replay(const char *s, enum cudaStreamCaptureMode mode,
                                      const char *mode_name, ncclComm_t comm, cudaStream_t stream,
                                      float *buf, const float *base, float *got, int before,
                                      bool *right)
{
    size_t bytes = NCCL_COUNT * sizeof(float);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t err = cudaStreamBeginCapture(stream, mode);
    if (err != cudaSuccess) {
        fail(s, "cudaStreamBeginCapture (%s): %s (%d)", mode_name, cudaGetErrorName(err), (int)err);
        return err;
    }
    add_one<<<(NCCL_COUNT + 255) / 256, 256, 0, stream>>>(buf, NCCL_COUNT);
    cudaError_t launch = cudaGetLastError();
    ncclResult_t reduce = ncclAllReduce(buf, buf, NCCL_COUNT, ncclFloat, ncclSum, comm, stream);
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (launch != cudaSuccess || reduce != ncclSuccess || end != cudaSuccess) {
        fail(s, "capture (%s): kernel %s, ncclAllReduce %s, cudaStreamEndCapture %s", mode_name,
             cudaGetErrorName(launch), ncclGetErrorString(reduce), cudaGetErrorName(end));
        err = end != cudaSuccess ? end : launch != cudaSuccess ? launch : cudaErrorUnknown;
        goto out;
    }
    err = cudaGraphInstantiate(&exec, graph, 0);
    for (int r = 0; err == cudaSuccess && r < REPLAYS; r++)
        err = cudaGraphLaunch(exec, stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    if (err == cudaSuccess)
        err = cudaMemcpy(got, buf, bytes, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) {
        fail(s, "replaying the %s graph: %s (%d)", mode_name, cudaGetErrorName(err), (int)err);
        goto out;
    }
    fact("graph", "\"mode\": \"%s\", \"replays\": %d", mode_name, REPLAYS);
    *right = all_equal(got, base, (float)(before + REPLAYS), NCCL_COUNT);
out:
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    return err;
}

static bool section_nccl(void)
{
    const char *s = "nccl";
    int version = 0;
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    cudaStream_t stream = NULL;
    float *buf = NULL, *base = NULL, *got = NULL;
    size_t bytes = NCCL_COUNT * sizeof(float), free_b = 0, total_b = 0;
    bool eager = false, global = false, local = false, ok = false;

    CKN(s, ncclGetVersion(&version));
    CKN(s, ncclGetUniqueId(&id)); /* host only: works before any device is chosen */
    CK(s, cudaSetDevice(0));
    CKN(s, ncclCommInitRank(&comm, 1, id, 0));
    CK(s, mem_get_info(&free_b, &total_b)); /* NCCL's own buffers live here */
    CK(s, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    base = (float *)malloc(bytes);
    got = (float *)malloc(bytes);
    if (!base || !got) {
        fail(s, "out of host memory");
        goto out;
    }
    for (int i = 0; i < NCCL_COUNT; i++)
        base[i] = (float)(i % 13);
    CK(s, cudaMalloc(&buf, bytes));
    held += bytes;
    CK(s, cudaMemcpy(buf, base, bytes, cudaMemcpyHostToDevice));

    /* One rank: a sum over one rank leaves the values as they are. */
    CKN(s, ncclAllReduce(buf, buf, NCCL_COUNT, ncclFloat, ncclSum, comm, stream));
    CK(s, cudaStreamSynchronize(stream));
    memset(got, 0, bytes);
    CK(s, cudaMemcpy(got, buf, bytes, cudaMemcpyDeviceToHost));
    eager = all_equal(got, base, 0.0f, NCCL_COUNT);

    /* Captured: each replay adds one, then reduces. Global mode first (the
     * servers' mode), then thread-local on the same buffer. */
    CK(s, capture_and_replay(s, cudaStreamCaptureModeGlobal, "global", comm, stream, buf, base, got,
                             0, &global));
    CK(s, capture_and_replay(s, cudaStreamCaptureModeThreadLocal, "thread_local", comm, stream, buf,
                             base, got, REPLAYS, &local));
    if (!eager || !global || !local)
        fail(s,
             "wrong values: eager allreduce %s, after %d global-mode graph replays %s, after %d "
             "thread-local ones %s",
             eager ? "right" : "wrong", REPLAYS, global ? "right" : "wrong", REPLAYS,
             local ? "right" : "wrong");
    else
        printf("nccl: ok, version %d, one-rank allreduce correct, graphs with a kernel and an "
               "allreduce captured in global and thread-local mode, each replayed %d times, "
               "correct\n",
               version, REPLAYS);
    ok = true;
out:
    if (comm) {
        ncclResult_t fin = ncclCommFinalize(comm);
        ncclResult_t des = ncclCommDestroy(comm);
        if ((fin != ncclSuccess || des != ncclSuccess) && ok) {
            fail(s, "ncclCommFinalize %d, ncclCommDestroy %d", (int)fin, (int)des);
            ok = false;
        }
    }
    if (buf && cudaFree(buf) == cudaSuccess)
        held -= bytes;
    if (stream)
        cudaStreamDestroy(stream);
    free(base);
    free(got);
    return ok;
}

/* ---- the end ---- */

static bool section_end(void)
{
    const char *s = "end";
    size_t free_b = 0, total_b = 0;
    CK(s, mem_get_info(&free_b, &total_b));
    if (held != 0 || host_held != 0) {
        fail(s, "not everything was freed");
        goto out;
    }
    printf("end: ok, everything freed\n");
    return true;
out:
    return false;
}

/* ---- main ---- */

struct section {
    const char *name;
    bool (*run)(void);
};

static int usage(void)
{
    fprintf(stderr, "usage: real_gpu_check [--facts PATH]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int child_fd = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--facts") == 0 && i + 1 < argc)
            facts_path = argv[++i];
        else if (strcmp(argv[i], "--ipc-child") == 0 && i + 1 < argc)
            child_fd = atoi(argv[++i]);
        else
            return usage();
    }
    if (facts_path) {
        facts_fd = open(facts_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (facts_fd < 0) {
            fprintf(stderr, "real_gpu_check: %s: %s\n", facts_path, strerror(errno));
            return 2;
        }
    }
    if (child_fd >= 0)
        return ipc_child(child_fd);

    static const struct section sections[] = {
        {"context", section_context}, {"malloc", section_malloc}, {"async", section_async},
        {"vmm", section_vmm},         {"pinned", section_pinned}, {"ipc", section_ipc},
        {"ncclmem", section_ncclmem}, {"nccl", section_nccl},     {"end", section_end},
    };
    const int count = (int)(sizeof sections / sizeof *sections);
    int passed = 0;
    for (int i = 0; i < count; i++) {
        current_section = sections[i].name;
        section_failures = 0;
        section_detail[0] = '\0';
        bool ok = sections[i].run() && section_failures == 0;
        passed += ok ? 1 : 0;
        char detail[600];
        size_t len = 0;
        detail[0] = '\0';
        json_str(detail, sizeof detail, &len, ok ? "ok" : section_detail);
        fact("section", "\"name\": \"%s\", \"ok\": %s, \"detail\": \"%s\"", sections[i].name,
             ok ? "true" : "false", detail);
        fflush(stdout);
    }
    printf("result: %d of %d sections ok\n", passed, count);
    return passed == count && failures == 0 ? 0 : 1;
}
