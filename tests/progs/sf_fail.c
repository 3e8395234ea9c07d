/*
 * sf_fail.c - libsf_fail.so, preloaded after libcutrace.so, makes the
 * function SF_FAIL names fail as the system would, to reach the tracer's
 * fallbacks without a broken machine:
 *
 *   SF_FAIL=posix_fallocate  fails with ENOSPC, as on a disk that filled up
 *                            right after the trace database was made: no
 *                            crash buffer fits at any size
 *   SF_FAIL=lock             whole-file locks fail with ENOLCK (flock, and
 *                            fcntl F_SETLK/F_SETLKW of the whole file, which
 *                            is what the tracer takes on its ring; SQLite
 *                            locks byte ranges only, so it is unaffected), as
 *                            on a file system without them: the crash buffer
 *                            falls back to memory
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
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
    if (failing("lock")) {
        errno = ENOLCK;
        return -1;
    }
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
    return real(fd, operation);
}

static int fcntl_as(const char *name, int fd, int cmd, void *arg)
{
    if (failing("lock") && (cmd == F_SETLK || cmd == F_SETLKW)) {
        const struct flock *l = arg;
        if (l->l_start == 0 && l->l_len == 0) {
            errno = ENOLCK;
            return -1;
        }
    }
    int (*real)(int, int, ...) = (int (*)(int, int, ...))dlsym(RTLD_NEXT, name);
    return real(fd, cmd, arg);
}

/* Every fcntl command takes at most one argument, an int or a pointer: passed on as is. */
__attribute__((visibility("default"))) int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_as("fcntl", fd, cmd, arg);
}

__attribute__((visibility("default"))) int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_as("fcntl64", fd, cmd, arg);
}
