/*
 * hook_process.c - the ways a process ends or replaces itself.
 *
 * A normal exit reaches the session's destructor, but _exit(), _Exit() and
 * quick_exit() skip destructors, and exec replaces the image before any of
 * them run. These hooks commit everything recorded so far (the session's
 * "finish") and then do exactly what the program asked. An exec may fail:
 * its trace is completed only once it has succeeded, by the new image or by
 * `cutrace recover` (execfold.h), and after a failure it goes on. They
 * record no event: they are not CUDA calls.
 *
 * The exit status reaches the trace (meta exit_status) where a hook sees it:
 * exit() itself (whose destructors end the session) and the three above. A
 * return from main calls exit() inside libc, where no hook sees it, so that
 * end keeps no status.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../core/hook.h"
#include "../core/session.h"

extern char **environ;

/* Lifecycle functions come from libc: RTLD_NEXT always finds them. */
#define LIBC_REAL(fn) __typeof__(&fn) real = (__typeof__(&fn))dlsym(RTLD_NEXT, #fn)

static _Noreturn void exit_now(void (*real)(int), int status)
{
    if (real)
        real(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

CT_EXPORT void exit(int status)
{
    ct_session_note_exit_status(status);
    LIBC_REAL(exit);
    exit_now(real, status);
}

CT_EXPORT void _exit(int status)
{
    ct_session_note_exit_status(status);
    ct_session_finish("_exit");
    LIBC_REAL(_exit);
    exit_now(real, status);
}

CT_EXPORT void _Exit(int status)
{
    ct_session_note_exit_status(status);
    ct_session_finish("_exit");
    LIBC_REAL(_Exit);
    exit_now(real, status);
}

CT_EXPORT void quick_exit(int status)
{
    ct_session_note_exit_status(status);
    ct_session_finish("_exit");
    LIBC_REAL(quick_exit);
    exit_now(real, status);
}

/* After a failed exec the program goes on, and so does its trace. */
static int exec_failed(int rc)
{
    int saved = errno;
    ct_session_resume();
    errno = saved;
    return rc;
}

CT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    LIBC_REAL(execve);
    ct_session_before_exec(envp);
    return exec_failed(real ? real(path, argv, envp) : (errno = ENOSYS, -1));
}

CT_EXPORT int execv(const char *path, char *const argv[])
{
    LIBC_REAL(execv);
    ct_session_before_exec(environ);
    return exec_failed(real ? real(path, argv) : (errno = ENOSYS, -1));
}

CT_EXPORT int execvp(const char *file, char *const argv[])
{
    LIBC_REAL(execvp);
    ct_session_before_exec(environ);
    return exec_failed(real ? real(file, argv) : (errno = ENOSYS, -1));
}

CT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    LIBC_REAL(execvpe);
    ct_session_before_exec(envp);
    return exec_failed(real ? real(file, argv, envp) : (errno = ENOSYS, -1));
}

CT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    LIBC_REAL(fexecve);
    ct_session_before_exec(envp);
    return exec_failed(real ? real(fd, argv, envp) : (errno = ENOSYS, -1));
}

CT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                       int flags)
{
    LIBC_REAL(execveat);
    ct_session_before_exec(envp);
    return exec_failed(real ? real(dirfd, path, argv, envp, flags) : (errno = ENOSYS, -1));
}

/*
 * The list forms (execl, execlp, execle) gather their arguments into an argv
 * as libc itself does, then go through the vector form's hook.
 */
enum { ARGV_ON_STACK = 256 };

static char **gather_argv(const char *arg0, va_list ap, char **stack_argv, char ***envp_out)
{
    va_list count;
    va_copy(count, ap);
    size_t n = 1;
    while (va_arg(count, const char *))
        n++;
    va_end(count);
    char **argv = n + 1 <= ARGV_ON_STACK ? stack_argv : malloc((n + 1) * sizeof *argv);
    if (!argv)
        return NULL;
    argv[0] = (char *)arg0;
    for (size_t i = 1; i <= n; i++)
        argv[i] = va_arg(ap, char *);
    if (envp_out)
        *envp_out = va_arg(ap, char **);
    return argv;
}

#define EXEC_LIST(call, want_envp)                                                                 \
    char *stack_argv[ARGV_ON_STACK];                                                               \
    char **envp = NULL;                                                                            \
    va_list ap;                                                                                    \
    va_start(ap, arg);                                                                             \
    char **argv = gather_argv(arg, ap, stack_argv, (want_envp) ? &envp : NULL);                    \
    va_end(ap);                                                                                    \
    if (!argv) {                                                                                   \
        errno = ENOMEM;                                                                            \
        return -1;                                                                                 \
    }                                                                                              \
    int rc = call;                                                                                 \
    if (argv != stack_argv) {                                                                      \
        int saved = errno;                                                                         \
        free(argv);                                                                                \
        errno = saved;                                                                             \
    }                                                                                              \
    return rc;

CT_EXPORT int execl(const char *path, const char *arg, ...){EXEC_LIST(execv(path, argv), 0)}

CT_EXPORT int execlp(const char *file, const char *arg, ...){EXEC_LIST(execvp(file, argv), 0)}

CT_EXPORT int execle(const char *path, const char *arg, ...)
{
    EXEC_LIST(execve(path, argv, envp), 1)
}
