/*
 * raise_in_fallocate.c - an LD_PRELOAD shim that raises SIGUSR1 on the
 * calling thread the first time posix_fallocate is called, then does the
 * real call. Only libcutrace.so calls posix_fallocate in the test programs:
 * to reserve its ring, while it creates the process's trace (inside the
 * first CUDA call, holding its start lock). So the program's handler runs
 * exactly there, with no delay or hook in the product.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>

static int raised;

static int raise_once_then(const char *name, int fd, off_t offset, off_t len)
{
    if (!__atomic_exchange_n(&raised, 1, __ATOMIC_RELAXED))
        raise(SIGUSR1);
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
