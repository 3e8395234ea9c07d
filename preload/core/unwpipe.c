/*
 * unwpipe.c - libunwind's memory-validation pipe on cutrace's own high
 * descriptors (unwpipe.h).
 *
 * Why not take libunwind's pipe away altogether: libunwind.so.8 is its
 * local-only build, where unw_create_addr_space returns NULL and
 * unw_init_remote -UNW_EINVAL, so there is no way to give it other memory
 * accessors; and its set-up opens the pipe whatever cursor comes first.
 *
 * Why the array is cleared only when the program closes one of its numbers,
 * not before every capture (which would check the pipe before each use for
 * free): libunwind's reopen is not thread-safe. A thread whose read failed
 * closes whatever the array holds by the time it gets there, which may be
 * the pipe another thread's reopen just put there; with the array cleared at
 * every capture, concurrent captures did exactly that all the time, each
 * time remaking the pipe on the lowest free numbers for an instant.
 */
#include "unwpipe.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The pipe sits just below min(RLIMIT_NOFILE, HIGH_TOP): where a program's
 * own numbers (always the lowest free) come last. The cap keeps the kernel's
 * descriptor table, which grows to the highest number open and is copied at
 * every fork, small under a raised limit, and stays above select()'s 1024.
 * Below MIN_TOP there is no room that is not the program's.
 */
#define HIGH_TOP 4096
#define MIN_TOP  64

static int *lib_array; /* atomic: libunwind's array, once adopted */
static __thread const void *watch_base __attribute__((tls_model("initial-exec")));

static struct {
    int rd, wr; /* -1: none */
    dev_t dev;
    ino_t ino;
} own = {-1, -1, 0, 0};
static int own_busy;   /* atomic try-lock around `own`: nobody ever waits for it */
static bool have_pipe; /* atomic: the last hand-out found or made one */

/* A fork from a signal handler that interrupted a give leaves the child alone. */
static void unbusy_child(void)
{
    __atomic_store_n(&own_busy, 0, __ATOMIC_RELAXED);
}

void ct_unwpipe_watch(const void *lib_base)
{
    static bool registered;
    if (!registered)
        pthread_atfork(NULL, NULL, unbusy_child);
    registered = true;
    watch_base = lib_base;
}

bool ct_unwpipe_unwatch(void)
{
    watch_base = NULL;
    return __atomic_load_n(&lib_array, __ATOMIC_ACQUIRE) != NULL;
}

bool ct_unwpipe_claims(const int *fds)
{
    if (!fds)
        return false;
    int *known = __atomic_load_n(&lib_array, __ATOMIC_ACQUIRE);
    if (known)
        return fds == known;
    if (!watch_base)
        return false;
    /* Only during the set-up (our constructor): dladdr's lock is ours already. */
    Dl_info info;
    return dladdr(fds, &info) && info.dli_fbase == watch_base;
}

static bool is_own_end(int fd)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_dev == own.dev &&
           st.st_ino == own.ino;
}

/* The lowest number the pipe may take, or -1 when there is no room. */
static int high_floor(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    rlim_t top = rl.rlim_cur < HIGH_TOP ? rl.rlim_cur : HIGH_TOP;
    return top < MIN_TOP ? -1 : (int)top - 2;
}

/*
 * A new pipe, moved high. Of the old one, what is still ours is closed; a
 * number that is no longer our pipe is the program's now and is left alone.
 * The new pipe holds the lowest free numbers for two system calls (it cannot
 * be made elsewhere): at set-up, in the constructor, before the program runs;
 * later only after the program closed ours.
 */
static bool recreate(void)
{
    if (is_own_end(own.rd))
        close(own.rd);
    if (is_own_end(own.wr))
        close(own.wr);
    own.rd = own.wr = -1;
    int floor = high_floor();
    if (floor < 0)
        return false;
    int low[2];
    /* Our own descriptors: not through another shim's pipe2. */
    if (syscall(SYS_pipe2, low, O_CLOEXEC | O_NONBLOCK) != 0)
        return false;
    int rd = fcntl(low[0], F_DUPFD_CLOEXEC, floor);
    int wr = rd >= 0 ? fcntl(low[1], F_DUPFD_CLOEXEC, floor) : -1;
    close(low[0]);
    close(low[1]);
    struct stat st;
    if (wr < 0 || fstat(rd, &st) != 0) {
        if (rd >= 0)
            close(rd);
        if (wr >= 0)
            close(wr);
        return false;
    }
    own.rd = rd;
    own.wr = wr;
    own.dev = st.st_dev;
    own.ino = st.st_ino;
    return true;
}

int ct_unwpipe_give(int fds[2])
{
    int saved = errno;
    /* Another thread is at it: this unwind fails (its caller falls back). */
    if (__atomic_exchange_n(&own_busy, 1, __ATOMIC_ACQUIRE)) {
        errno = EMFILE;
        return -1;
    }
    int *expected = NULL;
    __atomic_compare_exchange_n(&lib_array, &expected, fds, false, __ATOMIC_RELEASE,
                                __ATOMIC_RELAXED);
    bool ok = (is_own_end(own.rd) && is_own_end(own.wr)) || recreate();
    if (ok) {
        fds[0] = own.rd;
        fds[1] = own.wr;
    }
    __atomic_store_n(&have_pipe, ok, __ATOMIC_RELAXED);
    __atomic_store_n(&own_busy, 0, __ATOMIC_RELEASE);
    errno = ok ? saved : EMFILE;
    return ok ? 0 : -1;
}

bool ct_unwpipe_ready(void)
{
    return __atomic_load_n(&lib_array, __ATOMIC_RELAXED) &&
           __atomic_load_n(&have_pipe, __ATOMIC_RELAXED);
}

static bool holds(unsigned lo, unsigned hi, int fd)
{
    return fd >= 0 && (unsigned)fd >= lo && (unsigned)fd <= hi;
}

void ct_unwpipe_closing(unsigned lo, unsigned hi)
{
    int *a = __atomic_load_n(&lib_array, __ATOMIC_ACQUIRE);
    if (!a)
        return;
    /* Plain int stores for libunwind, which reads the array without atomics. */
    if (holds(lo, hi, __atomic_load_n(&a[0], __ATOMIC_RELAXED)) ||
        holds(lo, hi, __atomic_load_n(&a[1], __ATOMIC_RELAXED))) {
        __atomic_store_n(&a[0], -1, __ATOMIC_RELAXED);
        __atomic_store_n(&a[1], -1, __ATOMIC_RELAXED);
    }
}
