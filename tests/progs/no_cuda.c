/*
 * no_cuda.c - linked against the CUDA runtime but never calls it, like a
 * server's tokenizer process: it must leave no trace file.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 5) /* never true: keeps the link to libcudart real */
        return cudaFree(NULL);
    printf("hello without CUDA\n");
    return 0;
}
