/*
 * rt_fork.c - a traced process forks; the child makes CUDA calls of its own.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    void *a = NULL;
    if (cudaMalloc(&a, 1 << 20))
        return 2;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        void *b = NULL;
        size_t f, t;
        int rc = cudaMalloc(&b, 2 << 20) || cudaMemGetInfo(&f, &t) || cudaFree(b);
        return rc ? 3 : 0;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("child %s\n", WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "failed");
    return cudaFree(a) ? 4 : 0;
}
