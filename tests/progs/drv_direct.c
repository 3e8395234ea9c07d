/*
 * drv_direct.c - a program that links the driver itself and calls it by
 * name, as CUDA driver-API programs do, plus one lookup of the per-thread
 * default-stream variant through cuGetProcAddress and a dlsym of a symbol the
 * driver lacks.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "%s: %d\n", #call, (int)rc_);                                          \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    size_t free_bytes, total;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuMemAlloc(&p, 6 << 20));
    CHECK(cuMemGetInfo(&free_bytes, &total));

    /* The per-thread default-stream variant, chosen by the flag. */
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    CHECK(cuGetProcAddress("cuMemAllocAsync", &fn, 12000,
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status));
    CUdeviceptr q;
    CHECK(((CUresult(*)(CUdeviceptr *, size_t, CUstream))fn)(&q, 2 << 20, NULL));
    CHECK(cuMemFreeAsync(q, NULL));
    CHECK(cuMemFree(p));
    CHECK(cuDevicePrimaryCtxRelease(dev));

    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    printf("missing symbol: %s\n", h && !dlsym(h, "cuNoSuchFunction") ? "NULL" : "found?");
    return 0;
}
