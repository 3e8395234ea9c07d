/*
 * rt_signals.c - N allocations, then death by the way argv[1] names:
 * abort, segv, sigterm, sigint (all uncaught), or handler (the program's own
 * SIGTERM handler reports and leaves with _exit).
 */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* volatile: the compiler may not prove the store below faults. */
static int *volatile nowhere;

static void on_term(int sig)
{
    (void)sig;
    static const char msg[] = "handled SIGTERM\n";
    ssize_t ignored = write(1, msg, sizeof msg - 1);
    (void)ignored;
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int n = atoi(argv[2]);
    for (int i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess)
            return 3;
    }
    printf("made %d allocations\n", n);
    fflush(stdout);
    const char *how = argv[1];
    if (strcmp(how, "abort") == 0)
        abort();
    if (strcmp(how, "segv") == 0)
        *nowhere = 1;
    if (strcmp(how, "sigterm") == 0)
        raise(SIGTERM);
    if (strcmp(how, "sigint") == 0)
        raise(SIGINT);
    if (strcmp(how, "handler") == 0) {
        signal(SIGTERM, on_term);
        raise(SIGTERM);
    }
    return 4;
}
