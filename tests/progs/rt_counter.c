/*
 * rt_counter.c - CUDA calls until killed, counting each one that returned.
 *
 *   rt_counter COUNTER_FILE PAUSE_US
 *
 * After every call returns, the 8-byte counter in COUNTER_FILE (mapped
 * shared, so the test reads it after a SIGKILL) is incremented. The trace of
 * a killed run must hold at least that many calls. PAUSE_US = 0 makes heavy
 * bursts that fill the tracer's ring.
 */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int fd = open(argv[1], O_RDWR);
    if (fd < 0)
        return 3;
    volatile uint64_t *counter =
        mmap(NULL, sizeof *counter, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (counter == MAP_FAILED)
        return 4;
    long pause_us = atol(argv[2]);
    for (;;) {
        void *p;
        size_t f, t;
        if (cudaMalloc(&p, 4096) != cudaSuccess)
            return 5;
        (*counter)++;
        if (cudaFree(p) != cudaSuccess)
            return 6;
        (*counter)++;
        if (cudaMemGetInfo(&f, &t) != cudaSuccess)
            return 7;
        (*counter)++;
        if (pause_us)
            usleep((useconds_t)pause_us);
    }
}
