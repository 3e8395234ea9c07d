/*
 * rt_exit.c - make N allocations, then leave in the way argv[1] names:
 * return, exit, _exit, _Exit, exec (of /bin/true), execl, exec-fail.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int n = atoi(argv[2]);
    for (int i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 1 << 20))
            return 3;
    }
    const char *how = argv[1];
    if (strcmp(how, "exit") == 0)
        exit(0);
    if (strcmp(how, "_exit") == 0)
        _exit(0);
    if (strcmp(how, "_Exit") == 0)
        _Exit(0);
    if (strcmp(how, "exec") == 0) {
        char *args[] = {"true", NULL};
        execv("/bin/true", args);
        return 4;
    }
    if (strcmp(how, "execl") == 0) {
        execl("/bin/true", "true", (char *)NULL);
        return 4;
    }
    if (strcmp(how, "exec-fail") == 0) {
        char *args[] = {"nope", NULL};
        int rc = execv("/nonexistent/nope", args);
        int e = errno;
        void *p;
        /* The process goes on after a failed exec, and so does its trace. */
        if (rc != -1 || e != ENOENT || cudaMalloc(&p, 1 << 20))
            return 5;
        printf("exec failed with ENOENT as expected\n");
        return 0;
    }
    return 0;
}
