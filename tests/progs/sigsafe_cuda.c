/*
 * sigsafe_cuda.c - an LD_PRELOAD stand-in for cudaMalloc and cudaFree that
 * may be called from a signal handler at any moment: no lock, no
 * allocation, no other call. The fake runtime (like the real one) takes a
 * lock in every call, so a handler calling it while its own thread is inside
 * it deadlocks with or without cutrace; with this shim after libcutrace.so
 * in LD_PRELOAD, whatever blocks is the tracer's doing. Pointers are unique
 * and never reused; cudaFree accepts any.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>

static uintptr_t next_ptr = (uintptr_t)1 << 44;

__attribute__((visibility("default"))) cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    if (!devPtr)
        return cudaErrorInvalidValue;
    size_t rounded = (size + 255) & ~(size_t)255;
    *devPtr = (void *)__atomic_fetch_add(&next_ptr, rounded ? rounded : 256, __ATOMIC_RELAXED);
    return cudaSuccess;
}

__attribute__((visibility("default"))) cudaError_t cudaFree(void *devPtr)
{
    (void)devPtr;
    return cudaSuccess;
}
