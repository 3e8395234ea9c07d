/*
 * rt_sigcalls.c - CUDA calls from a signal handler while threads make CUDA
 * calls of their own: signal handlers that allocate are rare, but a tracer
 * must not turn one into a hang.
 *
 *   rt_sigcalls THREADS PAIRS SIGNALS HANDLER_PAIRS
 *
 * THREADS threads each make PAIRS cudaMalloc/cudaFree pairs. Meanwhile the
 * main thread sends SIGNALS SIGUSR1s, in turn to each of them, one at a
 * time (the next once the last was handled); the handler makes
 * HANDLER_PAIRS pairs. With more handler calls than the tracer's ring has
 * slots, a handler that interrupts its thread inside the tracer's push
 * fills the ring behind it. Prints what it called, the same every run.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long handler_pairs;
static long handled;        /* atomic */
static long handler_failed; /* atomic */
static pthread_barrier_t started, signals_sent;

static void on_usr1(int sig)
{
    (void)sig;
    int saved = errno;
    for (long i = 0; i < handler_pairs; i++) {
        void *p;
        if (cudaMalloc(&p, 256) != cudaSuccess || cudaFree(p) != cudaSuccess)
            __atomic_fetch_add(&handler_failed, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&handled, 1, __ATOMIC_RELEASE);
    errno = saved;
}

struct worker {
    pthread_t thread;
    long pairs;
    long failed;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    /* The thread's first call happens before any signal. */
    if (cudaSetDevice(0) != cudaSuccess)
        w->failed++;
    pthread_barrier_wait(&started);
    for (long i = 0; i < w->pairs; i++) {
        void *p;
        if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
            w->failed++;
    }
    pthread_barrier_wait(&signals_sent);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    int threads = atoi(argv[1]);
    long pairs = atol(argv[2]);
    long signals = atol(argv[3]);
    handler_pairs = atol(argv[4]);
    if (threads < 1 || threads > 64)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);

    struct worker workers[64];
    pthread_barrier_init(&started, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&signals_sent, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        workers[i] = (struct worker){.pairs = pairs};
        pthread_create(&workers[i].thread, NULL, work, &workers[i]);
    }
    pthread_barrier_wait(&started);
    for (long s = 0; s < signals; s++) {
        pthread_kill(workers[s % threads].thread, SIGUSR1);
        while (__atomic_load_n(&handled, __ATOMIC_ACQUIRE) <= s)
            sched_yield();
    }
    pthread_barrier_wait(&signals_sent);
    long failed = handler_failed;
    for (int i = 0; i < threads; i++) {
        pthread_join(workers[i].thread, NULL);
        failed += workers[i].failed;
    }
    printf("%d threads made %ld calls; %ld handlers made %ld calls; %ld failed\n", threads,
           2 * pairs * threads, handled, 2 * handler_pairs * signals, failed);
    return failed ? 1 : 0;
}
