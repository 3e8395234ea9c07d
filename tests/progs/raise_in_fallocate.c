/*
 * raise_in_fallocate.c - an LD_PRELOAD shim that sends SIGUSR1 to the
 * program's main thread the first time posix_fallocate is called, then does
 * the real call. Only libcutrace.so calls posix_fallocate in the test
 * programs: to reserve its ring, while it creates the process's trace. It
 * does so on a thread of its own that blocks every signal, while the thread
 * that made the first CUDA call waits for it holding the start lock: the
 * signal goes to that waiting thread (the main thread, in rt_sigfirst), so
 * the program's handler runs exactly there, with no delay or hook in the
 * product.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>

static int raised;
static pthread_t main_thread;

__attribute__((constructor)) static void note_main_thread(void)
{
    main_thread = pthread_self();
}

static int raise_once_then(const char *name, int fd, off_t offset, off_t len)
{
    if (!__atomic_exchange_n(&raised, 1, __ATOMIC_RELAXED))
        pthread_kill(main_thread, SIGUSR1);
    int (*next)(int, off_t, off_t) = (int (*)(int, off_t, off_t))dlsym(RTLD_NEXT, name);
    return next ? next(fd, offset, len) : EOPNOTSUPP;
}

__attribute__((visibility("default"))) int posix_fallocate(int fd, off_t offset, off_t len)
{
    return raise_once_then("posix_fallocate", fd, offset, len);
}

__attribute__((visibility("default"))) int posix_fallocate64(int fd, off_t offset, off_t len)
{
    return raise_once_then("posix_fallocate64", fd, offset, len);
}
