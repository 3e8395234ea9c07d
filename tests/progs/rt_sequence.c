/*
 * rt_sequence.c - a known sequence of CUDA runtime calls, some failing.
 *
 * The integration test runs it with and without libcutrace.so: stdout and
 * the exit code must not differ, and the trace must hold exactly the calls
 * listed in the expectation file (argv[1]): one line per traced call,
 * "api result size ptr", in call order, plus "meminfo free total" lines.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *expect;
static int step;

static int note(const char *api, cudaError_t rc, size_t size, const void *ptr)
{
    fprintf(expect, "%s %d %zu %llx\n", api, (int)rc, size, (unsigned long long)(uintptr_t)ptr);
    printf("step %d: %s -> %d\n", ++step, api, (int)rc);
    return (int)rc;
}

/* The call runs first; size and pointer are read after it returned. */
#define NOTE(api, call, size, ptr)                                                                 \
    do {                                                                                           \
        cudaError_t rc_ = (call);                                                                  \
        note(api, rc_, size, ptr);                                                                 \
    } while (0)

static void meminfo(void)
{
    size_t free_b = 0, total_b = 0;
    cudaError_t rc = cudaMemGetInfo(&free_b, &total_b);
    note("cudaMemGetInfo", rc, 0, NULL);
    fprintf(expect, "meminfo %zu %zu\n", free_b, total_b);
}

int main(int argc, char **argv)
{
    expect = fopen(argc > 1 ? argv[1] : "/dev/null", "w");
    if (!expect)
        return 99;
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *h = NULL, *m = NULL, *p = NULL;
    void *x = NULL, *y = NULL;
    size_t pitch = 0;

    meminfo();
    NOTE("cudaMalloc", cudaMalloc(&a, 8 << 20), 8 << 20, a);
    NOTE("cudaMalloc", cudaMalloc(&b, (size_t)1 << 50), (size_t)1 << 50, NULL);
    meminfo();
    NOTE("cudaSetDevice", cudaSetDevice(1), 0, NULL);
    NOTE("cudaMalloc", cudaMalloc(&c, 4 << 20), 4 << 20, c);
    NOTE("cudaSetDevice", cudaSetDevice(99), 0, NULL);
    NOTE("cudaSetDevice", cudaSetDevice(0), 0, NULL);
    NOTE("cudaFree", cudaFree(a), 0, a);
    NOTE("cudaFree", cudaFree((void *)0x1234), 0, (void *)0x1234);
    NOTE("cudaMallocHost", cudaMallocHost(&h, 4096), 4096, h);
    NOTE("cudaFreeHost", cudaFreeHost(h), 0, h);
    NOTE("cudaHostAlloc", cudaHostAlloc(&h, 8192, cudaHostAllocPortable), 8192, h);
    NOTE("cudaFreeHost", cudaFreeHost(h), 0, h);
    NOTE("cudaMallocManaged", cudaMallocManaged(&m, 1 << 20, cudaMemAttachGlobal), 1 << 20, m);
    NOTE("cudaFree", cudaFree(m), 0, m);
    NOTE("cudaMallocPitch", cudaMallocPitch(&p, &pitch, 1000, 10), pitch * 10, p);
    NOTE("cudaFree", cudaFree(p), 0, p);
    struct cudaPitchedPtr pp = {0};
    NOTE("cudaMalloc3D", cudaMalloc3D(&pp, (struct cudaExtent){1000, 10, 3}), pp.pitch * 10 * 3,
         pp.ptr);
    NOTE("cudaFree", cudaFree(pp.ptr), 0, pp.ptr);

    cudaStream_t s = NULL;
    if (cudaStreamCreate(&s) != cudaSuccess)
        return 98;
    NOTE("cudaMallocAsync", cudaMallocAsync(&x, 2 << 20, s), 2 << 20, x);
    NOTE("cudaFreeAsync", cudaFreeAsync(x, s), 0, x);
    cudaMemPool_t pool = NULL;
    if (cudaDeviceGetDefaultMemPool(&pool, 0) != cudaSuccess)
        return 97;
    NOTE("cudaMallocFromPoolAsync", cudaMallocFromPoolAsync(&y, 2 << 20, pool, s), 2 << 20, y);
    NOTE("cudaFreeAsync", cudaFreeAsync(y, s), 0, y);

    NOTE("cudaMalloc", cudaMalloc(&d, 4 << 20), 4 << 20, d);
    cudaIpcMemHandle_t handle;
    NOTE("cudaIpcGetMemHandle", cudaIpcGetMemHandle(&handle, d), 0, d);

    cudaGraph_t g = NULL;
    cudaGraphExec_t e = NULL;
    NOTE("cudaStreamBeginCapture", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), 0, NULL);
    NOTE("cudaStreamEndCapture", cudaStreamEndCapture(s, &g), 0, g);
    NOTE("cudaGraphInstantiate", cudaGraphInstantiate(&e, g, 0), 0, e);
    NOTE("cudaGraphLaunch", cudaGraphLaunch(e, s), 0, e);
    NOTE("cudaStreamBeginCapture", cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), 0, NULL);

    NOTE("cudaSetDevice", cudaSetDevice(1), 0, NULL);
    NOTE("cudaDeviceReset", cudaDeviceReset(), 0, NULL);
    NOTE("cudaSetDevice", cudaSetDevice(0), 0, NULL);
    meminfo();
    fclose(expect);
    printf("done after %d steps\n", step);
    return 3;
}
