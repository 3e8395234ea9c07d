/*
 * real_toolkit.c - the toolkit's real libcudart.so.13 and libnccl.so.2, on a
 * machine without a driver. Under the preload the program must see exactly
 * the same results (error 35 from the runtime, NCCL's version) as without.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>

int main(void)
{
    int version = 0;
    ncclResult_t nrc = ncclGetVersion(&version);
    void *p = NULL;
    size_t free_b = 0, total_b = 0;
    cudaError_t a = cudaMalloc(&p, 1 << 20);
    cudaError_t b = cudaMemGetInfo(&free_b, &total_b);
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    printf("nccl %d %d\ncudaMalloc %d\ncudaMemGetInfo %d\nruntime %d\n", (int)nrc, version, (int)a,
           (int)b, rt);
    return a == cudaSuccess ? 0 : 7;
}
