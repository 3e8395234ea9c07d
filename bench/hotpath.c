/*
 * hotpath.c - time per CUDA call, to compare untraced and traced runs.
 *
 *   hotpath burst THREADS CALLS_PER_THREAD [DEPTH]
 *   hotpath sustained THREADS CALLS_PER_THREAD [DEPTH]
 *   hotpath sync THREADS CALLS_PER_THREAD [DEPTH]
 *   hotpath meminfo THREADS CALLS_PER_THREAD [DEPTH]
 *
 * Each thread alternates cudaMalloc(4 KiB)/cudaFree/cudaMemGetInfo on the
 * fake GPU stack (calls that cost tens of ns there, so the tracer's share is
 * large). "burst" times bursts of 300 calls per thread with a pause after
 * each, so the writer keeps up and only the hot path is measured;
 * "sustained" calls without pause, so a traced run is bound by how fast the
 * writer can commit. DEPTH (default 0) makes each thread call from that many
 * frames deeper, as calls of a real program are (the cost of a call stack
 * grows with its depth). Prints "<ns per call> <calls> <first call ms>",
 * the last being the time of the process's first CUDA call (where a tracer
 * starts). bench/bench.py and bench/run.sh compare traced with untraced runs.
 *
 * "sync" and "meminfo" are bursts of one call only: cudaStreamSynchronize
 * (a blocking call: the tracer takes an entered mark for it, and for the
 * driver's cuStreamSynchronize inside it) and cudaMemGetInfo (a call of the
 * same shape on the fake stack, a runtime call over one driver call, that
 * takes none). Their added costs differ by what the marks cost.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    BURST = 300
}; /* a multiple of 3: malloc, free, meminfo; 16 threads x 300 x 2 records fit the ring */

static long calls_per_thread;
static int bursty, depth;
enum call_mix { MIX_MEMORY, MIX_SYNC, MIX_MEMINFO };
static enum call_mix mix;
static pthread_barrier_t burst_start, burst_end;
static double busy_s;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Not inlined, and named: callgrind counts the instructions inside it alone
 * (--toggle-collect=hot_calls), the calls and their hooks, not the writer. */
__attribute__((noinline)) void hot_calls(long n);
__attribute__((noinline)) void hot_calls(long n)
{
    size_t f, t;
    for (long i = 0; i < n; i += 3) {
        void *p;
        bool ok;
        if (mix == MIX_SYNC)
            ok = cudaStreamSynchronize(NULL) == cudaSuccess &&
                 cudaStreamSynchronize(NULL) == cudaSuccess &&
                 cudaStreamSynchronize(NULL) == cudaSuccess;
        else if (mix == MIX_MEMINFO)
            ok = cudaMemGetInfo(&f, &t) == cudaSuccess && cudaMemGetInfo(&f, &t) == cudaSuccess &&
                 cudaMemGetInfo(&f, &t) == cudaSuccess;
        else
            ok = cudaMalloc(&p, 4096) == cudaSuccess && cudaFree(p) == cudaSuccess &&
                 cudaMemGetInfo(&f, &t) == cudaSuccess;
        if (!ok)
            exit(3);
    }
}

static void *work_calls(void *arg);

/* The process's first CUDA call, where the tracer starts (--toggle-collect=first_call). */
__attribute__((noinline)) int first_call(void);
__attribute__((noinline)) int first_call(void)
{
    size_t f, t;
    return cudaMemGetInfo(&f, &t) == cudaSuccess ? 0 : 1;
}

/* Recursion that keeps every frame (no tail call), so the stack is `depth` deeper. */
__attribute__((noinline)) static void *work_at(void *arg, int level)
{
    if (level > 0) {
        void *r = work_at(arg, level - 1);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    return work_calls(arg);
}

static void *work(void *arg)
{
    return work_at(arg, depth);
}

static void *work_calls(void *arg)
{
    int leader = arg != NULL;
    if (!bursty) {
        hot_calls(calls_per_thread);
        return NULL;
    }
    for (long done = 0; done < calls_per_thread; done += BURST) {
        pthread_barrier_wait(&burst_start);
        double t0 = now_s();
        hot_calls(BURST);
        pthread_barrier_wait(&burst_end);
        if (leader) {
            busy_s += now_s() - t0;
            struct timespec pause = {0, 30 * 1000 * 1000}; /* the writer drains */
            nanosleep(&pause, NULL);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5)
        return 2;
    depth = argc == 5 ? atoi(argv[4]) : 0;
    if (depth < 0 || depth > 200)
        return 2;
    mix = strcmp(argv[1], "sync") == 0      ? MIX_SYNC
          : strcmp(argv[1], "meminfo") == 0 ? MIX_MEMINFO
                                            : MIX_MEMORY;
    bursty = strcmp(argv[1], "sustained") != 0;
    int threads = atoi(argv[2]);
    calls_per_thread = atol(argv[3]) / BURST * BURST;
    if (threads < 1 || threads > 256 || calls_per_thread < BURST)
        return 2;
    double first0 = now_s();
    if (first_call() != 0) /* creates the context (and the trace) outside the timing */
        return 3;
    double first_ms = (now_s() - first0) * 1e3;
    pthread_barrier_init(&burst_start, NULL, (unsigned)threads);
    pthread_barrier_init(&burst_end, NULL, (unsigned)threads);
    pthread_t tids[256];
    double t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&tids[i], NULL, work, i == 0 ? (void *)1 : NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    double elapsed = bursty ? busy_s : now_s() - t0;
    /* Under valgrind the writer runs many times slower than here, longer than
     * the tracer's flush at exit waits for it: the bench lets it finish
     * first, so that the trace holds every record it counts. */
    const char *linger = getenv("BENCH_LINGER_MS");
    if (linger) {
        long ms = atol(linger);
        struct timespec pause = {ms / 1000, ms % 1000 * 1000000};
        nanosleep(&pause, NULL);
    }
    long total = calls_per_thread * threads;
    printf("%.1f %ld %.3f\n", elapsed * 1e9 / (double)total * threads, total, first_ms);
    return 0;
}
