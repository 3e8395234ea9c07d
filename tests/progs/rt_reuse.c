/*
 * rt_reuse.c - threads that hand each other device addresses.
 *
 * The fake driver gives out the lowest free addresses first, so when
 * THREADS threads allocate and free in tight loops, a block one thread just
 * freed goes to another thread's cudaMalloc, which often started before that
 * free did. Each thread frees only what it allocated itself, right after
 * allocating it: every cudaFree ends the same thread's cudaMalloc just
 * before it, and an allocation followed by another cudaMalloc stays live.
 * Phases, with all threads at a barrier between them:
 *   1. ROUNDS pairs of cudaMalloc and cudaFree of varying small sizes;
 *   2. one big block each (BIG_MIB + thread MiB), held until every thread
 *      has its own: the peak of the run, then freed;
 *   3. ROUNDS allocations again, each freed at once except every
 *      KEEP_EVERY-th, which stays live (amid the other threads' frees).
 * Then the main thread asks cudaMemGetInfo, so that the timeline has a
 * moment at the end. Prints the ground truth: allocations, frees, live
 * bytes at the end and the peak.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 64
#define KEEP_EVERY  50
#define BIG_MIB     64
#define MIB         (1ull << 20)

static int rounds;
static pthread_barrier_t all_here;

/* The i-th small size of thread t: 256 bytes to 1 MiB. */
static size_t small_size(int t, int i)
{
    return (size_t)256 << ((unsigned)(t + i) % 13);
}

static void check(cudaError_t e)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "cuda error %d\n", (int)e);
        exit(3);
    }
}

static bool kept(int phase, int i)
{
    return phase == 3 && i % KEEP_EVERY == 0;
}

static void churn(int t, int phase)
{
    for (int i = 0; i < rounds; i++) {
        void *p;
        check(cudaMalloc(&p, small_size(t, i)));
        if (!kept(phase, i))
            check(cudaFree(p));
    }
}

static void *work(void *arg)
{
    int t = (int)(intptr_t)arg;
    pthread_barrier_wait(&all_here);
    churn(t, 1);
    pthread_barrier_wait(&all_here);
    void *big;
    check(cudaMalloc(&big, (BIG_MIB + (size_t)t) * MIB));
    pthread_barrier_wait(&all_here);
    check(cudaFree(big));
    pthread_barrier_wait(&all_here);
    churn(t, 3);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int threads = atoi(argv[1]);
    rounds = atoi(argv[2]);
    if (threads < 1 || threads > MAX_THREADS || rounds < 1)
        return 2;
    pthread_t tid[MAX_THREADS];
    pthread_barrier_init(&all_here, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++)
        pthread_create(&tid[t], NULL, work, (void *)(intptr_t)t);
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    size_t free_bytes, total_bytes;
    check(cudaMemGetInfo(&free_bytes, &total_bytes));

    unsigned long long live = 0, peak = 0;
    int allocations = threads * (2 * rounds + 1), frees = allocations;
    for (int t = 0; t < threads; t++) {
        for (int i = 0; i < rounds; i++)
            if (kept(3, i)) {
                live += small_size(t, i);
                frees--;
            }
        peak += (BIG_MIB + (unsigned long long)t) * MIB;
    }
    printf("allocations %d frees %d live_bytes %llu peak_bytes %llu\n", allocations, frees, live,
           peak);
    return 0;
}
