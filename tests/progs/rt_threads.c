/*
 * rt_threads.c - THREADS threads each make N malloc/free pairs at once.
 *
 * Thread-local order is visible in the trace: the i-th allocation of every
 * thread asks for 256 * (i + 1) bytes.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int per_thread;
static pthread_barrier_t go;

static void *work(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&go);
    for (int i = 0; i < per_thread; i++) {
        void *p;
        if (cudaMalloc(&p, 256 * (size_t)(i + 1)) != cudaSuccess || cudaFree(p) != cudaSuccess)
            exit(3);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int threads = atoi(argv[1]);
    per_thread = atoi(argv[2]);
    if (threads < 1 || threads > 256)
        return 2;
    pthread_t t[256];
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("%d threads x %d pairs\n", threads, per_thread);
    return 0;
}
