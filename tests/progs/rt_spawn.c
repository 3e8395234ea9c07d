/*
 * rt_spawn.c - children made with posix_spawn and vfork, as launchers do.
 *
 *   rt_spawn RT_EXIT: allocate, run "RT_EXIT return 3" with posix_spawn and
 *   "RT_EXIT exit 2" with vfork + execv, wait for both, free.
 */
#include <cuda_runtime_api.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    void *p;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess)
        return 3;
    char *spawned_argv[] = {argv[1], "return", "3", NULL};
    pid_t a;
    if (posix_spawn(&a, argv[1], NULL, NULL, spawned_argv, environ) != 0)
        return 4;
    pid_t b = vfork();
    if (b == 0) {
        char *vforked_argv[] = {argv[1], "exit", "2", NULL};
        execv(argv[1], vforked_argv);
        _exit(127);
    }
    int sa = 0, sb = 0;
    waitpid(a, &sa, 0);
    waitpid(b, &sb, 0);
    printf("posix_spawn child %d, vfork child %d\n", WEXITSTATUS(sa), WEXITSTATUS(sb));
    return cudaFree(p) == cudaSuccess && WEXITSTATUS(sa) == 0 && WEXITSTATUS(sb) == 0 ? 0 : 5;
}
