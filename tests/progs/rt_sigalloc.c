/*
 * rt_sigalloc.c - a SIGALRM handler that allocates while the main thread is
 * in the middle of CUDA calls.
 *
 * An interval timer raises SIGALRM every 200 us. The main thread keeps it
 * blocked and allocates and frees 1 MiB in a loop; the sig_window shim
 * (preloaded after the tracer) lets the signal in inside each cudaMalloc
 * and cudaFree, where the handler makes one cudaMalloc of 2 MiB, HANDLER
 * in all, and keeps them. The main thread stops once the handler is done,
 * keeps one last block of LAST MiB and asks cudaMemGetInfo: what is live at
 * the end is then also the peak (a free counts from when it started, so
 * the 1 MiB a handler call interrupted the freeing of is not).
 * One alarm is raised before the loop, so the first handler call always
 * interrupts the process's first CUDA call, while the runtime cannot yet
 * be asked which device is current.
 * stdout is the same every run; how many pairs the main thread made
 * depends on timing and goes to the file argv[1] (the ground truth).
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#define HANDLER    429
#define MAX_ROUNDS 10000000
#define LAST       64
#define MIB        (1ull << 20)

static volatile sig_atomic_t handled, failed, in_handler;

/*
 * The sig_window shim unblocks SIGALRM inside every cudaMalloc, the
 * handler's own too, so a second alarm could run the handler again between
 * its check and its count and make one allocation more than HANDLER (seen
 * under load: 431). A handler already running lets the alarm pass.
 */
static void on_alarm(int sig)
{
    (void)sig;
    if (in_handler)
        return;
    in_handler = 1;
    int saved = errno;
    void *p;
    if (handled < HANDLER) {
        if (cudaMalloc(&p, 2 * MIB) == cudaSuccess)
            handled++;
        else
            failed = 1;
    }
    errno = saved;
    in_handler = 0;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    sigprocmask(SIG_BLOCK, &alarm, NULL);
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &every, NULL);

    raise(SIGALRM); /* pending until the first cudaMalloc lets it in */
    long rounds = 0;
    while (handled < HANDLER && !failed && rounds < MAX_ROUNDS) {
        void *p;
        if (cudaMalloc(&p, MIB) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return 3;
        rounds++;
    }
    setitimer(ITIMER_REAL, &off, NULL);
    if (handled < HANDLER)
        return 4;
    void *last;
    size_t free_bytes, total_bytes; /* a moment at the end, for the timeline */
    if (cudaMalloc(&last, LAST * MIB) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
        return 3;
    FILE *truth = fopen(argv[1], "w");
    if (!truth)
        return 5;
    fprintf(truth, "%ld %d %llu\n", rounds + 1, (int)handled,
            ((unsigned long long)handled * 2 + LAST) * MIB);
    fclose(truth);
    printf("the handler made %d allocations of 2 MiB; the main thread freed all of its own"
           " but the last, of %d MiB\n",
           (int)handled, LAST);
    return 0;
}
