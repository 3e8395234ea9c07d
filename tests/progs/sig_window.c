/*
 * sig_window.c - a shim preloaded after libcutrace.so that lets pending
 * signals in while the program is inside cudaMalloc and cudaFree.
 *
 * A program whose signal handler calls CUDA would deadlock on the fake
 * stack if the signal landed while the fake driver holds its lock (so might
 * a real one); this shim gives the signal a place inside the call where the
 * CUDA stack holds nothing: the program keeps SIGALRM blocked, and each
 * cudaMalloc or cudaFree unblocks it for a moment before doing its work, so
 * a pending SIGALRM is handled there - inside the traced call, in the middle
 * of it as far as the program and the tracer can tell. Not while a handler
 * runs (no window inside a window). Forwards to the next definition
 * (dlsym RTLD_NEXT): libcudart.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>

static __thread int in_window;

static void open_window(void)
{
    if (in_window)
        return;
    in_window = 1;
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &alarm, NULL);
    pthread_sigmask(SIG_BLOCK, &alarm, NULL);
    in_window = 0;
}

__attribute__((visibility("default"))) cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    __typeof__(&cudaMalloc) next = (__typeof__(&cudaMalloc))dlsym(RTLD_NEXT, "cudaMalloc");
    open_window();
    return next ? next(devPtr, size) : cudaErrorInitializationError;
}

__attribute__((visibility("default"))) cudaError_t cudaFree(void *devPtr)
{
    __typeof__(&cudaFree) next = (__typeof__(&cudaFree))dlsym(RTLD_NEXT, "cudaFree");
    open_window();
    return next ? next(devPtr) : cudaErrorInitializationError;
}
