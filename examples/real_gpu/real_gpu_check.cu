/*
 * real_gpu_check.cu - the CUDA memory and NCCL roads cutrace traces, taken
 * once each on a real GPU (device 0), for tests/gpu/run.sh.
 *
 *   real_gpu_check            run every section, one result line each
 *   real_gpu_check --ipc-child FD      (internal: the IPC importer, see below)
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
 *   ipc       cudaMalloc 64 MiB, cudaIpcGetMemHandle; a second process (this
 *             program again, fork+exec, the handle through a pipe) opens it
 *             with cudaIpcOpenMemHandle, checks and overwrites the bytes and
 *             closes it; the exporter checks what the importer wrote
 *   nccl      a one-rank communicator (ncclGetUniqueId, ncclCommInitRank),
 *             cudaMemGetInfo with NCCL's buffers live, an eager ncclAllReduce,
 *             then a kernel and an ncclAllReduce captured into a CUDA graph
 *             (cudaStreamBeginCapture/EndCapture, cudaGraphInstantiate)
 *             replayed 3 times with cudaGraphLaunch; ncclCommFinalize/Destroy
 *   end       cudaMemGetInfo once everything is freed
 *
 * The allocations are large (GiB) on purpose: a road the tracer missed would
 * leave gigabytes "unexplained" at the next cudaMemGetInfo, which the test
 * bounds to the size of a CUDA context.
 *
 * Output is deterministic (results, sizes and yes/no facts; no pointers, no
 * timings, no free-memory numbers), so a traced run must print exactly what an
 * untraced one prints, on a GPU and without a driver alike (then every section
 * fails with the same error). Exit status: 0 when every section passed, 1 when
 * any failed, 2 for a usage error.
 *
 * Build: examples/real_gpu/build.sh OUTPUT (nvcc, -cudart shared: the runtime
 * must be the shared libcudart for its calls to be interposed).
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <errno.h>
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
#define NCCL_COUNT    (1 << 20) /* floats */

/* The free bytes after the context was made: later sections compare with it. */
static size_t baseline_free;
static int failures;

/* One line per section, then one per failure detail. */
static void fail(const char *section, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: FAILED ", section);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
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

static const char *yes_no(bool b)
{
    return b ? "yes" : "no";
}

/* ---- context ---- */

static bool section_context(void)
{
    const char *s = "context";
    size_t free_b = 0, total_b = 0;
    struct cudaDeviceProp prop;
    CK(s, cudaSetDevice(0));
    CK(s, cudaFree(0)); /* makes the primary context now */
    CK(s, cudaMemGetInfo(&free_b, &total_b));
    CK(s, cudaGetDeviceProperties(&prop, 0));
    baseline_free = free_b;
    printf("context: ok, total matches the device's memory: %s\n",
           yes_no(total_b == prop.totalGlobalMem));
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
    CK(s, cudaMemset(p, 0, 2 * GIB));
    CK(s, cudaDeviceSynchronize());
    CK(s, cudaMemGetInfo(&free_b, &total_b));
    printf("malloc: ok, 2 GiB, free dropped by at least that much: %s\n",
           yes_no(baseline_free >= free_b + 2 * GIB));
    ok = true;
out:
    if (p && cudaFree(p) != cudaSuccess && ok) {
        fail(s, "cudaFree");
        ok = false;
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
    CK(s, cudaMemsetAsync(p, 0, 2 * GIB, stream));
    CK(s, cudaStreamSynchronize(stream));
    CK(s, cudaMemGetInfo(&free_b, &total_b));
    dropped_default = baseline_free >= free_b + 2 * GIB;
    CK(s, cudaFreeAsync(p, stream));
    p = NULL;
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
    CK(s, cudaMemsetAsync(q, 0, GIB, stream));
    CK(s, cudaStreamSynchronize(stream));
    CK(s, cudaMemGetInfo(&free_b, &total_b));
    dropped_own = baseline_free >= free_b + GIB;
    CK(s, cudaFreeAsync(q, stream));
    q = NULL;
    CK(s, cudaStreamSynchronize(stream));
    printf("async: ok, 2 GiB from the default pool, 1 GiB from a pool of its own, free dropped by "
           "at least that much: %s, %s\n",
           yes_no(dropped_default), yes_no(dropped_own));
    ok = true;
out:
    if (p)
        cudaFreeAsync(p, stream);
    if (q)
        cudaFreeAsync(q, stream);
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
    bool created = false, reserved = false, mapped = false, ok = false;
    unsigned char check[16];
    bool readable = false;

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
    CKD(s, p_reserve(&va, size, 0, 0, 0));
    reserved = true;
    CKD(s, p_map(va, size, 0, handle, 0));
    mapped = true;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CKD(s, p_set_access(va, size, &access, 1));
    CK(s, cudaMemset((void *)va, 0x11, size));
    CK(s,
       cudaMemcpy(check, (void *)(va + size - sizeof check), sizeof check, cudaMemcpyDeviceToHost));
    readable = check[0] == 0x11 && check[sizeof check - 1] == 0x11;
    CK(s, cudaMemGetInfo(&free_b, &total_b));
    if (!readable) {
        fail(s, "the mapped memory did not read back what was written");
        goto out;
    }
    printf("vmm: ok, 2 GiB mapped, written and read back, free dropped by at least that much: %s\n",
           yes_no(baseline_free >= free_b + 2 * GIB));
    ok = true;
out:
    if (mapped && p_unmap(va, size) != CUDA_SUCCESS && ok) {
        fail(s, "cuMemUnmap");
        ok = false;
    }
    if (created && p_release(handle) != CUDA_SUCCESS && ok) {
        fail(s, "cuMemRelease");
        ok = false;
    }
    if (reserved && p_address_free(va, size) != CUDA_SUCCESS && ok) {
        fail(s, "cuMemAddressFree");
        ok = false;
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
    int rc = 1;
    while (got < sizeof handle) {
        ssize_t n = read(fd, (char *)&handle + got, sizeof handle - got);
        if (n <= 0) {
            fail(s, "reading the handle: %s", n == 0 ? "end of file" : strerror(errno));
            return 1;
        }
        got += (size_t)n;
    }
    close(fd);
    host = (unsigned char *)malloc(IPC_CHECKED);
    if (!host)
        return 1;
    CK(s, cudaSetDevice(0));
    CK(s, cudaIpcOpenMemHandle(&peer, handle, cudaIpcMemLazyEnablePeerAccess));
    CK(s, cudaMemcpy(host, peer, IPC_CHECKED, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < IPC_CHECKED; i++)
        seen = seen && host[i] == EXPORTED_BYTE;
    CK(s, cudaMemset(peer, IMPORTED_BYTE, IPC_CHECKED));
    CK(s, cudaDeviceSynchronize());
    CK(s, cudaIpcCloseMemHandle(peer));
    peer = NULL;
    if (!seen) {
        fail(s, "the exporter's buffer did not hold what it wrote");
        goto out;
    }
    printf("ipc child: ok, opened the exporter's buffer, read what it wrote, wrote back\n");
    rc = 0;
out:
    if (peer)
        cudaIpcCloseMemHandle(peer);
    free(host);
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
    bool written = true, ok = false;

    CK(s, cudaMalloc(&p, IPC_BYTES));
    CK(s, cudaMemset(p, EXPORTED_BYTE, IPC_BYTES));
    CK(s, cudaDeviceSynchronize());
    CK(s, cudaIpcGetMemHandle(&handle, p));
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
        goto out;
    }
    CK(s, cudaMemcpy(host, p, IPC_CHECKED, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < IPC_CHECKED; i++)
        written = written && host[i] == IMPORTED_BYTE;
    if (!written) {
        fail(s, "the importer's bytes are not in the buffer");
        goto out;
    }
    printf("ipc: ok, 64 MiB exported, opened by another process, its bytes arrived\n");
    ok = true;
out:
    if (fds[0] >= 0)
        close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
    if (child > 0)
        waitpid(child, &status, 0);
    if (p)
        cudaFree(p);
    return ok;
}

/* ---- NCCL, eager and in a CUDA graph ---- */

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

static bool section_nccl(void)
{
    const char *s = "nccl";
    int version = 0;
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    cudaStream_t stream = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    float *buf = NULL, *base = NULL, *got = NULL;
    size_t bytes = NCCL_COUNT * sizeof(float), free_b = 0, total_b = 0;
    bool eager = false, replayed = false, ok = false;

    CKN(s, ncclGetVersion(&version));
    CKN(s, ncclGetUniqueId(&id)); /* host only: works before any device is chosen */
    CK(s, cudaSetDevice(0));
    CKN(s, ncclCommInitRank(&comm, 1, id, 0));
    CK(s, cudaMemGetInfo(&free_b, &total_b)); /* NCCL's own buffers live here */
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
    CK(s, cudaMemcpy(buf, base, bytes, cudaMemcpyHostToDevice));

    /* One rank: a sum over one rank leaves the values as they are. */
    CKN(s, ncclAllReduce(buf, buf, NCCL_COUNT, ncclFloat, ncclSum, comm, stream));
    CK(s, cudaStreamSynchronize(stream));
    CK(s, cudaMemcpy(got, buf, bytes, cudaMemcpyDeviceToHost));
    eager = all_equal(got, base, 0.0f, NCCL_COUNT);

    /* Captured: each replay adds one, then reduces. */
    CK(s, cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    add_one<<<(NCCL_COUNT + 255) / 256, 256, 0, stream>>>(buf, NCCL_COUNT);
    {
        cudaError_t launch = cudaGetLastError();
        ncclResult_t reduce = ncclAllReduce(buf, buf, NCCL_COUNT, ncclFloat, ncclSum, comm, stream);
        cudaError_t end = cudaStreamEndCapture(stream, &graph);
        if (launch != cudaSuccess || reduce != ncclSuccess || end != cudaSuccess) {
            fail(s, "capture: kernel %s, ncclAllReduce %s, cudaStreamEndCapture %s",
                 cudaGetErrorName(launch), ncclGetErrorString(reduce), cudaGetErrorName(end));
            goto out;
        }
    }
    CK(s, cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < REPLAYS; r++)
        CK(s, cudaGraphLaunch(exec, stream));
    CK(s, cudaStreamSynchronize(stream));
    CK(s, cudaMemcpy(got, buf, bytes, cudaMemcpyDeviceToHost));
    replayed = all_equal(got, base, (float)REPLAYS, NCCL_COUNT);
    if (!eager || !replayed) {
        fail(s, "wrong values: eager allreduce %s, after %d graph replays %s",
             eager ? "right" : "wrong", REPLAYS, replayed ? "right" : "wrong");
        goto out;
    }
    printf("nccl: ok, version %d, one-rank allreduce correct, a graph with a kernel and an "
           "allreduce replayed %d times correct\n",
           version, REPLAYS);
    ok = true;
out:
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    if (comm) {
        ncclResult_t fin = ncclCommFinalize(comm);
        ncclResult_t des = ncclCommDestroy(comm);
        if ((fin != ncclSuccess || des != ncclSuccess) && ok) {
            fail(s, "ncclCommFinalize %d, ncclCommDestroy %d", (int)fin, (int)des);
            ok = false;
        }
    }
    if (buf)
        cudaFree(buf);
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
    CK(s, cudaMemGetInfo(&free_b, &total_b));
    printf("end: ok, everything freed\n");
    return true;
out:
    return false;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--ipc-child") == 0)
        return ipc_child(atoi(argv[2]));
    if (argc != 1) {
        fprintf(stderr, "usage: real_gpu_check\n");
        return 2;
    }
    static bool (*const sections[])(void) = {section_context, section_malloc, section_async,
                                             section_vmm,     section_ipc,    section_nccl,
                                             section_end};
    const int count = (int)(sizeof sections / sizeof *sections);
    int passed = 0;
    for (int i = 0; i < count; i++) {
        passed += sections[i]() ? 1 : 0;
        fflush(stdout);
    }
    printf("result: %d of %d sections ok\n", passed, count);
    return passed == count && failures == 0 ? 0 : 1;
}
