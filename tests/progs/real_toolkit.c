/*
 * real_toolkit.c - the toolkit's real libcudart.so.13 and libnccl.so.2, on a
 * machine without a driver. Under the preload the program must see exactly
 * the same results (error 35 from the runtime, NCCL's version and unique id,
 * a failing ncclCommInitRank) as without.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>

int main(void)
{
    int version = 0;
    ncclResult_t nrc = ncclGetVersion(&version);
    ncclUniqueId id;
    ncclResult_t idrc = ncclGetUniqueId(&id);
    ncclComm_t comm = NULL;
    ncclResult_t initrc = ncclCommInitRank(&comm, 1, id, 0);
    void *p = NULL;
    size_t free_b = 0, total_b = 0;
    cudaError_t a = cudaMalloc(&p, 1 << 20);
    cudaError_t b = cudaMemGetInfo(&free_b, &total_b);
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    printf("nccl %d %d\nncclGetUniqueId %d\nncclCommInitRank %d\n", (int)nrc, version, (int)idrc,
           (int)initrc);
    printf("cudaMalloc %d\ncudaMemGetInfo %d\nruntime %d\n", (int)a, (int)b, rt);
    return a == cudaSuccess ? 0 : 7;
}
