/*
 * shim_count.c - another LD_PRELOAD shim, like torch_memory_saver: it
 * defines cudaMalloc, counts the calls, and forwards them to the next
 * definition found with dlsym(RTLD_NEXT). Writes the count to
 * $SHIM_COUNT_FILE at exit. cutrace must keep it working whether it is
 * preloaded before or after it.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int calls;

__attribute__((visibility("default"))) cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    __typeof__(&cudaMalloc) next = (__typeof__(&cudaMalloc))dlsym(RTLD_NEXT, "cudaMalloc");
    calls++;
    return next ? next(devPtr, size) : cudaErrorInitializationError;
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("SHIM_COUNT_FILE");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "%d\n", calls);
        fclose(f);
    }
}
