/*
 * fake_probe.c - a second process for the fake CUDA stack's tests.
 *
 * Cross-process behaviour (shared accounting, IPC, reclaiming a killed rank,
 * CUDA_VISIBLE_DEVICES, a missing driver) can only be checked from another
 * process with its own environment. test_fake_stack fork+execs this program,
 * which links only against libcudart (like an application) and reports what
 * it saw as "key=value" words on stdout, one flushed line per step, so the
 * test can act between steps (e.g. SIGKILL it while it holds memory).
 *
 *   fake_probe meminfo
 *   fake_probe alloc DEV BYTES wait|hang|exit
 *   fake_probe ipc-export BYTES            (prints the handle, waits for EOF)
 *   fake_probe ipc-open HEXHANDLE
 *   fake_probe vmm-import FD
 *   fake_probe devices
 *   fake_probe nodriver
 *   fake_probe exercise
 */
#define CUDA_ENABLE_DEPRECATED 1 /* cudaGetDriverEntryPoint is deprecated in 13.0 */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *entry(const char *name)
{
    void *p = NULL;
    enum cudaDriverEntryPointQueryResult st;
    if (cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &st) != cudaSuccess || !p) {
        printf("entry_missing=%s\n", name);
        exit(3);
    }
    return p;
}

static void line_meminfo(const char *prefix)
{
    size_t f = 0, t = 0;
    cudaError_t e = cudaMemGetInfo(&f, &t);
    printf("%s_rc=%d %s_free=%zu %s_total=%zu\n", prefix, (int)e, prefix, f, prefix, t);
    fflush(stdout);
}

/* Blocks until the test closes our stdin. */
static void wait_for_eof(void)
{
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
}

static int cmd_alloc(int dev, size_t bytes, const char *mode)
{
    cudaError_t e = cudaSetDevice(dev);
    void *p = NULL;
    if (e == cudaSuccess)
        e = cudaMalloc(&p, bytes);
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    printf("rc=%d ptr=%p free=%zu total=%zu\n", (int)e, p, f, t);
    fflush(stdout);
    if (strcmp(mode, "hang") == 0) {
        for (;;)
            pause();
    }
    if (strcmp(mode, "wait") == 0) {
        wait_for_eof();
        printf("free_rc=%d\n", (int)cudaFree(p));
    }
    /* "exit": leave it to the driver's exit-time cleanup. */
    return 0;
}

static int cmd_ipc_export(size_t bytes)
{
    void *p = NULL;
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess)
        e = cudaIpcGetMemHandle(&h, p);
    printf("rc=%d ptr=%p handle=", (int)e, p);
    for (size_t i = 0; e == cudaSuccess && i < sizeof h.reserved; i++)
        printf("%02x", (unsigned char)h.reserved[i]);
    printf("\n");
    fflush(stdout);
    wait_for_eof();
    return 0;
}

static int cmd_ipc_open(const char *hex)
{
    cudaIpcMemHandle_t h;
    memset(&h, 0, sizeof h);
    for (size_t i = 0; i < sizeof h.reserved && hex[2 * i] && hex[2 * i + 1]; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        h.reserved[i] = (char)v;
    }
    cudaSetDevice(0);
    line_meminfo("before");
    void *p = NULL, *p2 = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    printf("open_rc=%d ptr=%p\n", (int)e, p);
    fflush(stdout);
    if (e != cudaSuccess)
        return 0;
    line_meminfo("after");
    __typeof__(&cuMemGetAddressRange_v2) range = entry("cuMemGetAddressRange");
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = range(&base, &size, (uintptr_t)p + 1);
    printf("range_rc=%d base=0x%llx size=%zu\n", (int)r, (unsigned long long)base, size);
    e = cudaIpcOpenMemHandle(&p2, h, cudaIpcMemLazyEnablePeerAccess);
    printf("reopen_rc=%d same=%d\n", (int)e, p2 == p);
    printf("close1_rc=%d\n", (int)cudaIpcCloseMemHandle(p));
    printf("close2_rc=%d\n", (int)cudaIpcCloseMemHandle(p));
    printf("close3_rc=%d\n", (int)cudaIpcCloseMemHandle(p));
    fflush(stdout);
    return 0;
}

static int cmd_vmm_import(int fd)
{
    cudaSetDevice(0);
    line_meminfo("before");
    __typeof__(&cuMemImportFromShareableHandle) import = entry("cuMemImportFromShareableHandle");
    __typeof__(&cuMemRelease) release = entry("cuMemRelease");
    CUmemGenericAllocationHandle h = 0;
    CUresult r = import(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    printf("import_rc=%d\n", (int)r);
    line_meminfo("after");
    if (r == CUDA_SUCCESS)
        printf("release_rc=%d\n", (int)release(h));
    fflush(stdout);
    return 0;
}

static int cmd_devices(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    printf("count_rc=%d count=%d\n", (int)e, n);
    if (e != cudaSuccess)
        return 0;
    __typeof__(&cuDeviceGetPCIBusId) bus = entry("cuDeviceGetPCIBusId");
    __typeof__(&cuDeviceGetUuid_v2) uuid = entry("cuDeviceGetUuid");
    __typeof__(&cuDeviceGetName) name = entry("cuDeviceGetName");
    for (int d = 0; d < n; d++) {
        char b[32] = "", nm[128] = "";
        CUuuid u;
        bus(b, sizeof b, d);
        uuid(&u, d);
        name(nm, sizeof nm, d);
        printf("dev%d_bus=%s dev%d_uuid=", d, b, d);
        for (size_t i = 0; i < sizeof u.bytes; i++)
            printf("%02x", (unsigned char)u.bytes[i]);
        printf("\ndev%d_name=%s\n", d, nm);
    }
    fflush(stdout);
    return 0;
}

/* With no libcuda.so.1 to load, every runtime call fails the same way. */
static int cmd_nodriver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        printf("driver_found=1\n");
        return 0;
    }
    int n = -1, v = -1;
    void *p = NULL;
    size_t f, t;
    cudaError_t e = cudaGetDeviceCount(&n);
    printf("count_rc=%d count=%d\n", (int)e, n);
    printf("malloc_rc=%d\n", (int)cudaMalloc(&p, 1024));
    printf("meminfo_rc=%d\n", (int)cudaMemGetInfo(&f, &t));
    printf("setdevice_rc=%d\n", (int)cudaSetDevice(0));
    printf("last_rc=%d\n", (int)cudaGetLastError());
    e = cudaDriverGetVersion(&v);
    printf("drv_rc=%d drv=%d\n", (int)e, v);
    fflush(stdout);
    return 0;
}

/* A bit of everything, for the test that watches how symbols are bound. */
static int cmd_exercise(void)
{
    void *p = NULL, *h = NULL, *m = NULL;
    size_t pitch, f, t;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    cudaIpcMemHandle_t ih;
    int bad = 0;
    bad |= cudaSetDevice(0) != cudaSuccess;
    bad |= cudaMalloc(&p, 1 << 20) != cudaSuccess;
    bad |= cudaIpcGetMemHandle(&ih, p) != cudaSuccess;
    bad |= cudaFree(p) != cudaSuccess;
    bad |= cudaMallocPitch(&p, &pitch, 100, 100) != cudaSuccess;
    bad |= cudaFree(p) != cudaSuccess;
    bad |= cudaMallocHost(&h, 4096) != cudaSuccess;
    bad |= cudaFreeHost(h) != cudaSuccess;
    bad |= cudaMallocManaged(&m, 4096, cudaMemAttachGlobal) != cudaSuccess;
    bad |= cudaMemset(m, 1, 4096) != cudaSuccess;
    bad |= cudaFree(m) != cudaSuccess;
    bad |= cudaStreamCreate(&s) != cudaSuccess;
    bad |= cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaSuccess;
    bad |= cudaMallocAsync(&p, 4096, s) != cudaSuccess;
    bad |= cudaFreeAsync(p, s) != cudaSuccess;
    bad |= cudaStreamEndCapture(s, &g) != cudaSuccess;
    bad |= cudaGraphInstantiate(&x, g, 0) != cudaSuccess;
    bad |= cudaGraphLaunch(x, s) != cudaSuccess;
    bad |= cudaStreamSynchronize(s) != cudaSuccess;
    bad |= cudaGraphExecDestroy(x) != cudaSuccess;
    bad |= cudaGraphDestroy(g) != cudaSuccess;
    bad |= cudaStreamDestroy(s) != cudaSuccess;
    bad |= cudaMemGetInfo(&f, &t) != cudaSuccess;
    bad |= cudaDeviceSynchronize() != cudaSuccess;
    bad |= cudaDeviceReset() != cudaSuccess;
    printf("exercise_ok=%d\n", !bad);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "meminfo") == 0) {
        line_meminfo("mem");
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "alloc") == 0)
        return cmd_alloc(atoi(argv[2]), strtoull(argv[3], NULL, 0), argv[4]);
    if (argc == 3 && strcmp(argv[1], "ipc-export") == 0)
        return cmd_ipc_export(strtoull(argv[2], NULL, 0));
    if (argc == 3 && strcmp(argv[1], "ipc-open") == 0)
        return cmd_ipc_open(argv[2]);
    if (argc == 3 && strcmp(argv[1], "vmm-import") == 0)
        return cmd_vmm_import(atoi(argv[2]));
    if (argc == 2 && strcmp(argv[1], "devices") == 0)
        return cmd_devices();
    if (argc == 2 && strcmp(argv[1], "nodriver") == 0)
        return cmd_nodriver();
    if (argc == 2 && strcmp(argv[1], "exercise") == 0)
        return cmd_exercise();
    fprintf(stderr, "usage: see the header of fake_probe.c\n");
    return 2;
}
