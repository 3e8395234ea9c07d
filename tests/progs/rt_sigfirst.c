/*
 * rt_sigfirst.c - a SIGUSR1 handler that makes CUDA calls, delivered while
 * the process's first CUDA call is in progress: run traced with
 * libraise_in_fallocate.so (and libsigsafe_cuda.so) preloaded, the signal
 * comes while libcutrace.so creates the trace. Untraced nothing raises it
 * there, so the program raises it itself after that call: either way the
 * handler runs once and the output is the same.
 *
 *   rt_sigfirst PAIRS   first cudaMalloc, the handler's pair, PAIRS more pairs
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t handled, handler_failed;

static void on_usr1(int sig)
{
    (void)sig;
    int saved = errno;
    void *p;
    if (cudaMalloc(&p, 512) != cudaSuccess || cudaFree(p) != cudaSuccess)
        handler_failed = 1;
    handled++;
    errno = saved;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int pairs = atoi(argv[1]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess)
        return 3;
    if (!handled)
        raise(SIGUSR1);
    for (int i = 0; i < pairs; i++)
        if (cudaFree(p) != cudaSuccess || cudaMalloc(&p, 4096) != cudaSuccess)
            return 4;
    printf("handled %d signal(s), %d more pairs\n", (int)handled, pairs);
    return handler_failed ? 5 : 0;
}
