/*
 * stk_stress.c - stack capture under signals and forks: nothing may deadlock
 * or crash, and every process must still record stacks.
 *
 *   stk_stress THREADS FORKS
 *
 * THREADS threads allocate and free from recursive call chains of varying
 * depth (so new stacks keep appearing and are sent while others are
 * looked up) while a signal thread hits every worker with SIGUSR1 at a high
 * rate (the handler only counts) and an interval timer sends SIGALRM to the
 * process; meanwhile the main thread forks FORKS times, and each child
 * allocates from child_alloc and leaves with _exit. Prints the number of
 * failed children (0) and exits 0, or 4 when a child failed.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 32

static volatile int stop;
static volatile sig_atomic_t hits;
static pthread_t workers[MAX_THREADS];
static int nworkers;

static void on_signal(int sig)
{
    (void)sig;
    hits++;
}

__attribute__((noinline)) static int churn_at(int depth, unsigned seed)
{
    if (depth > 0) {
        int rc = churn_at(depth - 1, seed * 1103515245u + 12345u);
        __asm__ volatile("" ::: "memory"); /* no tail call: every level keeps its frame */
        return rc;
    }
    void *p;
    int rc = cudaMalloc(&p, 4096 + (seed % 64) * 256);
    if (rc == cudaSuccess)
        rc = cudaFree(p);
    return rc;
}

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; !stop; i++)
        if (churn_at((int)((seed + i) % 40), seed + i) != cudaSuccess)
            abort();
    return NULL;
}

static void *pester(void *arg)
{
    (void)arg;
    struct timespec gap = {0, 20 * 1000};
    while (!stop) {
        for (int i = 0; i < nworkers; i++)
            pthread_kill(workers[i], SIGUSR1);
        nanosleep(&gap, NULL);
    }
    return NULL;
}

__attribute__((noinline)) static int child_alloc(void)
{
    void *p;
    int rc = cudaMalloc(&p, 1 << 20);
    __asm__ volatile("" ::: "memory");
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    nworkers = atoi(argv[1]);
    int forks = atoi(argv[2]);
    if (nworkers < 1 || nworkers > MAX_THREADS)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
    void *warm;
    if (cudaMalloc(&warm, 4096) != cudaSuccess)
        return 3;
    for (int i = 0; i < nworkers; i++)
        pthread_create(&workers[i], NULL, churn, (void *)(uintptr_t)(i * 7919 + 1));
    pthread_t signaller;
    pthread_create(&signaller, NULL, pester, NULL);
    struct itimerval every = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &every, NULL);
    int failed = 0;
    for (int i = 0; i < forks; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            struct itimerval off = {{0, 0}, {0, 0}};
            setitimer(ITIMER_REAL, &off, NULL);
            _exit(child_alloc() == cudaSuccess ? 0 : 1);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
            ; /* EINTR from SIGALRM */
        if (!WIFEXITED(status) || WEXITSTATUS(status))
            failed++;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    stop = 1;
    pthread_join(signaller, NULL);
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i], NULL);
    printf("children failed: %d\n", failed);
    return failed ? 4 : 0;
}
