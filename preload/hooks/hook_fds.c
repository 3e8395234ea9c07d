/*
 * hook_fds.c - the descriptor calls that concern libunwind's validation pipe
 * (core/unwpipe.h): pipe() and pipe2(), answered with cutrace's own pipe for
 * libunwind's array only, and the calls by which a program closes or
 * replaces a descriptor it names (close, close_range, closefrom, dup2,
 * dup3), which first take that number out of libunwind's hands. Every call
 * then goes to the next definition unchanged; nothing is recorded (they are
 * not CUDA calls). Calls that make a new descriptor (open, dup, fcntl
 * F_DUPFD...) take the lowest free number and so can never take the pipe's
 * while it is open: they are left alone.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../core/hook.h"
#include "../core/unwpipe.h"

static struct {
    int (*pipe)(int fds[2]);
    int (*pipe2)(int fds[2], int flags);
    int (*close)(int fd);
    int (*close_range)(unsigned first, unsigned last, int flags);
    void (*closefrom)(int lowfd);
    int (*dup2)(int fd, int fd2);
    int (*dup3)(int fd, int fd2, int flags);
} next;

/* Resolved before the program runs: these calls may come from a signal
 * handler or a forked child, where the dynamic loader's lock must not be
 * taken. Until then (another library's constructor), the system call
 * itself, as libc makes it. */
__attribute__((constructor)) static void hook_fds_load(void)
{
    if (!ct_real_dlsym)
        ct_dlsym_init();
    if (!ct_real_dlsym)
        return;
    next.pipe = (int (*)(int *))ct_real_dlsym(RTLD_NEXT, "pipe");
    next.pipe2 = (int (*)(int *, int))ct_real_dlsym(RTLD_NEXT, "pipe2");
    next.close = (int (*)(int))ct_real_dlsym(RTLD_NEXT, "close");
    next.close_range = (int (*)(unsigned, unsigned, int))ct_real_dlsym(RTLD_NEXT, "close_range");
    next.closefrom = (void (*)(int))ct_real_dlsym(RTLD_NEXT, "closefrom");
    next.dup2 = (int (*)(int, int))ct_real_dlsym(RTLD_NEXT, "dup2");
    next.dup3 = (int (*)(int, int, int))ct_real_dlsym(RTLD_NEXT, "dup3");
}

CT_EXPORT int pipe(int fds[2])
{
    if (ct_unwpipe_claims(fds))
        return ct_unwpipe_give(fds);
    return next.pipe ? next.pipe(fds) : (int)syscall(SYS_pipe2, fds, 0);
}

CT_EXPORT int pipe2(int fds[2], int flags)
{
    if (ct_unwpipe_claims(fds))
        return ct_unwpipe_give(fds);
    return next.pipe2 ? next.pipe2(fds, flags) : (int)syscall(SYS_pipe2, fds, flags);
}

CT_EXPORT int close(int fd)
{
    if (fd >= 0)
        ct_unwpipe_closing((unsigned)fd, (unsigned)fd);
    return next.close ? next.close(fd) : (int)syscall(SYS_close, fd);
}

CT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    ct_unwpipe_closing(first, last);
    return next.close_range ? next.close_range(first, last, flags)
                            : (int)syscall(SYS_close_range, first, last, flags);
}

CT_EXPORT void closefrom(int lowfd)
{
    if (lowfd >= 0)
        ct_unwpipe_closing((unsigned)lowfd, UINT_MAX);
    if (next.closefrom)
        next.closefrom(lowfd);
    else
        syscall(SYS_close_range, lowfd, UINT_MAX, 0);
}

CT_EXPORT int dup2(int fd, int fd2)
{
    if (fd2 >= 0 && fd2 != fd)
        ct_unwpipe_closing((unsigned)fd2, (unsigned)fd2);
    if (next.dup2)
        return next.dup2(fd, fd2);
    if (fd == fd2)
        return fcntl(fd, F_GETFD) < 0 ? -1 : fd;
    return (int)syscall(SYS_dup3, fd, fd2, 0);
}

CT_EXPORT int dup3(int fd, int fd2, int flags)
{
    if (fd2 >= 0 && fd2 != fd)
        ct_unwpipe_closing((unsigned)fd2, (unsigned)fd2);
    return next.dup3 ? next.dup3(fd, fd2, flags) : (int)syscall(SYS_dup3, fd, fd2, flags);
}
