/*
 * rt_forkstress.c - threads inside CUDA calls while another thread forks.
 *
 * rt_forkstress THREADS FORKS: THREADS threads loop over cudaMalloc/cudaFree
 * while the main thread forks FORKS times; each child makes one allocation
 * and leaves with _exit. Nothing may deadlock.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int stop;

static void *churn(void *arg)
{
    (void)arg;
    while (!stop) {
        void *p;
        if (cudaMalloc(&p, 4096) == cudaSuccess)
            cudaFree(p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int threads = atoi(argv[1]), forks = atoi(argv[2]);
    pthread_t t[64];
    if (threads > 64)
        threads = 64;
    void *warm;
    if (cudaMalloc(&warm, 4096))
        return 3;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    int failed = 0;
    for (int i = 0; i < forks; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            void *p;
            _exit(cudaMalloc(&p, 1 << 20) == cudaSuccess ? 0 : 1);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
            failed++;
    }
    stop = 1;
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("forks failed: %d\n", failed);
    return failed ? 4 : 0;
}
