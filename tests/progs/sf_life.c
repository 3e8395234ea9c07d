/*
 * sf_life.c - the start and the end of a traced process, for
 * test_startfinish.c. `sf_life MODE N` makes N cudaMalloc calls, then:
 *
 *   plain           returns 0 (3 if a call failed: under a tiny file-size
 *                   limit the fake driver's own state file may be refused)
 *   late            arms libsf_late.so to make N cudaMalloc+cudaFree pairs
 *                   in its destructor, after libcutrace's, and returns 0
 *   exec-fail-kill  execv of a missing file (must fail with ENOENT), N more
 *                   calls, then SIGKILL to itself: the trace must not say
 *                   it exec'd and must lose none of the 2N calls
 *   exec-untraced   execve of /bin/true with an environment without
 *                   LD_PRELOAD: the new image is not traced, so its trace is
 *                   completed by `cutrace recover`
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sf_late_arm(int calls);

static int allocs(int n)
{
    for (int i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess)
            return 3;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int n = atoi(argv[2]);
    int rc = allocs(n);
    printf("%d calls: %d\n", n, rc);
    if (rc)
        return rc;
    const char *mode = argv[1];
    if (strcmp(mode, "late") == 0) {
        sf_late_arm(n);
        return 0;
    }
    if (strcmp(mode, "exec-fail-kill") == 0) {
        char *args[] = {"nope", NULL};
        int erc = execv("/nonexistent/nope", args);
        int e = errno;
        if (erc != -1 || e != ENOENT)
            return 5;
        rc = allocs(n);
        printf("after the failed exec, %d calls: %d\n", n, rc);
        fflush(stdout);
        raise(SIGKILL);
        return 6;
    }
    if (strcmp(mode, "exec-untraced") == 0) {
        fflush(stdout);
        char *args[] = {"true", NULL};
        char *env[] = {"PATH=/usr/bin:/bin", NULL};
        execve("/bin/true", args, env);
        return 4;
    }
    return strcmp(mode, "plain") == 0 ? 0 : 2;
}
