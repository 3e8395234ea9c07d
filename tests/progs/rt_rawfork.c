/*
 * rt_rawfork.c - a child made by the fork system call itself, so that no
 * pthread_atfork handler runs (some runtimes and sandboxes fork that way).
 *
 *   rt_rawfork wait N     N pairs, fork; the child makes N pairs and exits;
 *                         the parent reports how the child ended, makes N
 *                         more pairs and exits with the child's status
 *   rt_rawfork orphan N   N pairs, fork; the child leaves stdout and stderr
 *                         and waits to be killed, without a CUDA call; the
 *                         parent prints "child PID" and waits to be killed
 *
 * The parent waits 100 ms before forking so that the tracer's writer thread
 * is asleep (a raw fork copies whatever locks other threads hold, malloc's
 * included; that hazard is the program's, traced or not).
 */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int pairs(int n)
{
    for (int i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return -1;
    }
    return 0;
}

static pid_t raw_fork(void)
{
#ifdef SYS_fork
    return (pid_t)syscall(SYS_fork);
#else
    return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int orphan = strcmp(argv[1], "orphan") == 0;
    int n = atoi(argv[2]);
    if (pairs(n) != 0)
        return 3;
    fflush(stdout);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    pid_t child = raw_fork();
    if (child < 0)
        return 4;
    if (child == 0) {
        if (orphan) {
            int null = open("/dev/null", O_RDWR);
            dup2(null, 1);
            dup2(null, 2);
            for (;;)
                pause();
        }
        exit(pairs(n) == 0 ? 0 : 7);
    }
    if (orphan) {
        printf("child %d\n", (int)child);
        fflush(stdout);
        for (;;)
            pause();
    }
    int status;
    if (waitpid(child, &status, 0) != child)
        return 5;
    if (WIFEXITED(status))
        printf("child exited %d\n", WEXITSTATUS(status));
    else
        printf("child killed by signal %d\n", WTERMSIG(status));
    if (pairs(n) != 0)
        return 6;
    printf("parent made %d pairs, then %d more\n", n, n);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 8;
}
