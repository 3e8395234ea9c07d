/*
 * sf_late.c - libsf_late.so: a library the program links whose destructor
 * makes CUDA calls. The dynamic loader runs the destructors of a program's
 * own libraries after the preloaded libcutrace's (it finalizes in load
 * order: the program, the preloads, then the program's libraries), so these
 * are calls made after the tracer's final flush, as a server's allocator
 * freeing its cache from a library destructor makes them.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

void sf_late_arm(int calls);

static int armed;

__attribute__((visibility("default"))) void sf_late_arm(int calls)
{
    armed = calls;
}

__attribute__((destructor)) static void sf_late_fini(void)
{
    for (int i = 0; i < armed; i++) {
        void *p;
        if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
            fputs("late call failed\n", stderr);
    }
}
