/*
 * rt_pause.c - one call, wait for GO_FILE to appear, then N more calls.
 *
 * Lets a test change the world between the two halves (remove the trace
 * directory, lock the trace file) and watch the tracer cope.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess)
        return 3;
    for (int i = 0; access(argv[1], F_OK) != 0; i++) {
        if (i > 4000)
            return 4;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int n = atoi(argv[2]);
    for (int i = 0; i < n; i++) {
        if (cudaFree(p) != cudaSuccess || cudaMalloc(&p, 4096) != cudaSuccess)
            return 5;
    }
    printf("done after %d more pairs\n", n);
    return 0;
}
