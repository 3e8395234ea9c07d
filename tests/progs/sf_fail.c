/*
 * sf_fail.c - libsf_fail.so, preloaded after libcutrace.so, makes the
 * function SF_FAIL names fail as the system would, to reach the tracer's
 * fallbacks without a broken machine:
 *
 *   SF_FAIL=posix_fallocate  fails with ENOSPC, as on a disk that filled up
 *                            right after the trace database was made: no
 *                            crash buffer fits at any size
 *   SF_FAIL=flock            fails with ENOLCK, as on a file system without
 *                            locks: the crash buffer falls back to memory
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

static int failing(const char *name)
{
    const char *which = getenv("SF_FAIL");
    return which && strcmp(which, name) == 0;
}

__attribute__((visibility("default"))) int posix_fallocate(int fd, off_t offset, off_t len)
{
    if (failing("posix_fallocate"))
        return ENOSPC;
    int (*real)(int, off_t, off_t) =
        (int (*)(int, off_t, off_t))dlsym(RTLD_NEXT, "posix_fallocate");
    return real(fd, offset, len);
}

__attribute__((visibility("default"))) int flock(int fd, int operation)
{
    if (failing("flock")) {
        errno = ENOLCK;
        return -1;
    }
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
    return real(fd, operation);
}
