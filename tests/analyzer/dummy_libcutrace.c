/*
 * dummy_libcutrace.c - a stand-in for libcutrace.so in `cutrace run` tests.
 *
 * Like the real tracer it is loaded through LD_PRELOAD and writes one file
 * per process into $CUTRACE_DIR (named <host>-<pid>-<n>.db, empty: the
 * tests only count files), which shows that the library was preloaded and
 * that CUTRACE_DIR reached the program.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void dummy_tracer_start(void)
{
    const char *dir = getenv("CUTRACE_DIR");
    if (!dir || !*dir)
        return;
    char path[4096];
    snprintf(path, sizeof(path), "%s/dummy-%ld-1.db", dir, (long)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}
