/*
 * sqlfiles.c - SQLite's open, unlink, stat, lstat and access, confined to the
 * trace directory's descriptor.
 *
 * The calls are replaced once, for the whole of the tracer's SQLite (it is
 * linked in statically with hidden symbols, so the program's own SQLite is
 * not touched), and only a path of the form <trace directory>/<name> is
 * handled here. SQLite asks for O_NOFOLLOW itself; it is added anyway, as is
 * the owner check, so that the guarantee does not rest on what one SQLite
 * version happens to do.
 */
#include "sqlfiles.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

typedef int (*open_fn)(const char *, int, int);
typedef int (*unlink_fn)(const char *);
typedef int (*stat_fn)(const char *, struct stat *);
typedef int (*access_fn)(const char *, int);

enum { CALL_OPEN, CALL_UNLINK, CALL_STAT, CALL_LSTAT, CALL_ACCESS, CALL_COUNT };
static sqlite3_syscall_ptr real[CALL_COUNT]; /* SQLite's own, for paths elsewhere */

/* The first confine's, set before the calls are installed and never again. */
static const struct ct_sqlfiles_dir *trace_dir;

static const struct ct_sqlfiles_dir *dir_ops(void)
{
    return __atomic_load_n(&trace_dir, __ATOMIC_ACQUIRE);
}

/* The trace directory's descriptor for path, or -1: errno EXDEV means "not ours, pass it on". */
static int dir_of(const char *path, const char **name)
{
    return path ? dir_ops()->at(path, name) : (errno = EXDEV, -1);
}

/* ct_sqlfiles_redirect's names; "" when none. */
static char redirect_from[256], redirect_to[256];

void ct_sqlfiles_redirect(const char *from, const char *to)
{
    assert((from == NULL) == (to == NULL));
    assert(!from || (strlen(from) < sizeof redirect_from && strlen(to) < sizeof redirect_to &&
                     !strchr(from, '/') && !strchr(to, '/')));
    snprintf(redirect_from, sizeof redirect_from, "%s", from ? from : "");
    snprintf(redirect_to, sizeof redirect_to, "%s", to ? to : "");
}

static int confined_open(const char *path, int flags, int mode)
{
    const char *name;
    int dir = dir_of(path, &name);
    if (dir < 0)
        return errno == EXDEV ? ((open_fn)real[CALL_OPEN])(path, flags, mode) : -1;
    if (redirect_from[0] && strcmp(name, redirect_from) == 0)
        name = redirect_to;
    if (strcmp(name, ".") == 0) {
        /* SQLite opens the directory to fsync a new journal's name into it. */
        if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_CREAT)) {
            errno = EISDIR;
            return -1;
        }
        return fcntl(dir, F_DUPFD_CLOEXEC, 3);
    }
    int fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode & 0600);
    if (fd >= 0 && !dir_ops()->owns(fd)) {
        close(fd); /* opened, never read or written */
        errno = EACCES;
        return -1;
    }
    return fd;
}

static int confined_unlink(const char *path)
{
    const char *name;
    int dir = dir_of(path, &name);
    if (dir < 0)
        return errno == EXDEV ? ((unlink_fn)real[CALL_UNLINK])(path) : -1;
    struct stat st;
    if (strcmp(name, ".") == 0) {
        errno = EISDIR;
        return -1;
    }
    /* Only the tracer's own names are removed (root may remove anyone's). */
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid != geteuid()) {
        errno = EACCES;
        return -1;
    }
    return unlinkat(dir, name, 0);
}

/* stat and lstat alike: a symlink in the directory is reported, never looked through. */
static int confined_stat_at(const char *path, struct stat *st, stat_fn elsewhere)
{
    const char *name;
    int dir = dir_of(path, &name);
    if (dir < 0)
        return errno == EXDEV ? elsewhere(path, st) : -1;
    if (strcmp(name, ".") == 0)
        return fstat(dir, st);
    return fstatat(dir, name, st, AT_SYMLINK_NOFOLLOW);
}

static int confined_stat(const char *path, struct stat *st)
{
    return confined_stat_at(path, st, (stat_fn)real[CALL_STAT]);
}

static int confined_lstat(const char *path, struct stat *st)
{
    return confined_stat_at(path, st, (stat_fn)real[CALL_LSTAT]);
}

static int confined_access(const char *path, int mode)
{
    const char *name;
    int dir = dir_of(path, &name);
    if (dir < 0)
        return errno == EXDEV ? ((access_fn)real[CALL_ACCESS])(path, mode) : -1;
    return faccessat(dir, name, mode, 0);
}

static const struct {
    const char *name;
    sqlite3_syscall_ptr confined;
} CALLS[CALL_COUNT] = {
    [CALL_OPEN] = {"open", (sqlite3_syscall_ptr)confined_open},
    [CALL_UNLINK] = {"unlink", (sqlite3_syscall_ptr)confined_unlink},
    [CALL_STAT] = {"stat", (sqlite3_syscall_ptr)confined_stat},
    [CALL_LSTAT] = {"lstat", (sqlite3_syscall_ptr)confined_lstat},
    [CALL_ACCESS] = {"access", (sqlite3_syscall_ptr)confined_access},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *failure; /* NULL once installed */

static void install(void)
{
    failure = "the tracer's SQLite has no unix VFS with replaceable system calls";
    sqlite3_vfs *vfs = sqlite3_vfs_find("unix");
    if (!vfs || vfs->iVersion < 3 || !vfs->xSetSystemCall || !vfs->xGetSystemCall)
        return;
    for (size_t i = 0; i < CALL_COUNT; i++) {
        real[i] = vfs->xGetSystemCall(vfs, CALLS[i].name);
        if (!real[i])
            return;
    }
    for (size_t i = 0; i < CALL_COUNT; i++) {
        if (vfs->xSetSystemCall(vfs, CALLS[i].name, CALLS[i].confined) != SQLITE_OK) {
            while (i-- > 0)
                vfs->xSetSystemCall(vfs, CALLS[i].name, NULL); /* back to SQLite's own */
            return;
        }
    }
    failure = NULL;
}

bool ct_sqlfiles_confine(const struct ct_sqlfiles_dir *dir, char *why, size_t cap)
{
    assert(dir && dir->at && dir->owns);
    const struct ct_sqlfiles_dir *none = NULL;
    __atomic_compare_exchange_n(&trace_dir, &none, dir, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    pthread_once(&once, install);
    if (failure)
        snprintf(why, cap, "%s", failure);
    return failure == NULL;
}
