/*
 * cuda_helper.c - a shared library that calls the CUDA runtime through its
 * own PLT, as a Python extension (torch's libtorch_cuda.so) does; loaded with
 * ctypes by mp_spawn.py in a multiprocessing "spawn" child.
 */
#include <cuda_runtime_api.h>

int helper_allocs(int n);

__attribute__((visibility("default"))) int helper_allocs(int n)
{
    for (int i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return 1;
    }
    return 0;
}
