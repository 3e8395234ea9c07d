/*
 * tracedir.c - resolving, checking and holding the trace directory.
 *
 * Why the checks are enough: a directory owned by the user and writable by
 * nobody else holds only names the user made. A sticky directory writable by
 * others (the user's own 1777 drop box) lets others add names but not rename
 * or remove the user's: the tracer creates each of its files with O_EXCL, and
 * every file SQLite opens there is checked to be the user's own before a byte
 * is written (sqlfiles.c), so a planted name costs a trace, never its
 * contents. The path itself is used once: later, a parent directory swapped
 * by whoever owns it can at worst make a name disappear (a warning), because
 * names are reached through the descriptor.
 */
#include "tracedir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sqlfiles.h"

#define CT_MAX_SYMLINKS 40 /* as the kernel's path walk */

static struct {
    char requested[PATH_MAX]; /* as the caller spelled it */
    char path[PATH_MAX];      /* canonical */
    int fd;                   /* atomic; -1 while none is in use */
    dev_t dev;
    ino_t ino;
} T = {.fd = -1};

const char *ct_tracedir_path(void)
{
    return T.path;
}

static bool same_dir(int fd, dev_t dev, ino_t ino)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == dev && st.st_ino == ino;
}

/* The rule of the header; `why` may be NULL. */
static bool trusted(const struct stat *st, const char *dir, char *why, size_t cap)
{
    uid_t me = geteuid();
    if (st->st_uid != me) {
        if (why)
            snprintf(why, cap, "trace directory %s is owned by uid %u, not by this user (uid %u)",
                     dir, (unsigned)st->st_uid, (unsigned)me);
        return false;
    }
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) {
        if (why)
            snprintf(why, cap,
                     "trace directory %s is writable by others without the sticky bit (mode %04o)",
                     dir, (unsigned)(st->st_mode & 07777));
        return false;
    }
    return true;
}

/* canon += "/" + comp; false (ENAMETOOLONG) if it does not fit. */
static bool append(char *canon, const char *comp)
{
    size_t used = strlen(canon), len = strlen(comp);
    if (used + 1 + len >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return false;
    }
    canon[used] = '/';
    memcpy(canon + used + 1, comp, len + 1);
    return true;
}

/*
 * The walk: each component is looked at without following it; a symlink's
 * target is put in front of what is left of the path and walked in turn; ".."
 * goes to the parent of the real directory reached so far. With `create`,
 * missing components the caller's path names are made 0700, but never ones a
 * symlink points to: a dangling link (planted by whoever owns its directory)
 * must not make the tracer create directories where it points.
 * Returns a read-only descriptor of the directory, or -1 with errno.
 */
static int walk(const char *dir, bool create, char canon[PATH_MAX])
{
    char unwalked[2 * PATH_MAX];
    if (dir[0] != '/') {
        errno = EINVAL;
        return -1;
    }
    if (strlen(dir) >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(unwalked, dir);
    canon[0] = '\0';
    int cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return -1;
    size_t pos = 0, from_link = 0; /* unwalked[pos..from_link) came from a symlink */
    int links = 0, saved;
    for (;;) {
        while (unwalked[pos] == '/')
            pos++;
        if (!unwalked[pos])
            break;
        size_t len = strcspn(unwalked + pos, "/");
        if (len > NAME_MAX) {
            errno = ENAMETOOLONG;
            goto fail;
        }
        char comp[NAME_MAX + 1];
        memcpy(comp, unwalked + pos, len);
        comp[len] = '\0';
        bool named_by_link = pos < from_link;
        pos += len;
        if (strcmp(comp, ".") == 0)
            continue;
        if (strcmp(comp, "..") == 0) {
            int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (up < 0)
                goto fail;
            close(cur);
            cur = up;
            char *slash = strrchr(canon, '/');
            if (slash)
                *slash = '\0';
            continue;
        }
        struct stat st;
        int made = 0;
        while (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT || !create || named_by_link || made++ > 2)
                goto fail;
            if (mkdirat(cur, comp, 0700) != 0 && errno != EEXIST)
                goto fail;
        }
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            if (++links > CT_MAX_SYMLINKS) {
                errno = ELOOP;
                goto fail;
            }
            ssize_t n = readlinkat(cur, comp, target, sizeof target);
            if (n < 0)
                goto fail;
            size_t rest = strlen(unwalked + pos);
            if (n == 0 || (size_t)n >= sizeof target || (size_t)n + 1 + rest >= sizeof unwalked) {
                errno = n == 0 ? ENOENT : ENAMETOOLONG;
                goto fail;
            }
            size_t link_left = from_link > pos ? from_link - pos : 0;
            memmove(unwalked + n + 1, unwalked + pos, rest + 1);
            memcpy(unwalked, target, (size_t)n);
            unwalked[n] = '/';
            pos = 0;
            from_link = (size_t)n + 1 + link_left;
            if (target[0] == '/') {
                int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (root < 0)
                    goto fail;
                close(cur);
                cur = root;
                canon[0] = '\0';
            }
            continue;
        }
        int next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0)
            goto fail;
        close(cur);
        cur = next;
        if (!append(canon, comp))
            goto fail;
    }
    if (!canon[0])
        strcpy(canon, "/");
    int fd = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    saved = errno;
    close(cur);
    errno = saved;
    return fd;
fail:
    saved = errno;
    close(cur);
    errno = saved;
    return -1;
}

int ct_tracedir_use(const char *dir, char *why, size_t cap)
{
    const char *name;
    if (T.path[0] && strcmp(T.requested, dir) == 0 && ct_tracedir_at(T.path, &name) >= 0)
        return 0;
    char canon[PATH_MAX];
    int fd = walk(dir, true, canon);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int err = errno;
        snprintf(why, cap, "cannot create trace directory %s: %s", dir, strerror(err));
        if (fd >= 0)
            close(fd);
        errno = err;
        return -1;
    }
    if (!trusted(&st, dir, why, cap)) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    static const struct ct_sqlfiles_dir self = {.at = ct_tracedir_at, .owns = ct_tracedir_owns};
    if (!ct_sqlfiles_confine(&self, why, cap)) {
        close(fd);
        errno = ENOSYS;
        return -1;
    }
    /* A directory used before (tests switch) is left open: its number may be the program's now. */
    snprintf(T.requested, sizeof T.requested, "%s", dir);
    snprintf(T.path, sizeof T.path, "%s", canon);
    T.dev = st.st_dev;
    T.ino = st.st_ino;
    __atomic_store_n(&T.fd, fd, __ATOMIC_RELEASE);
    return 0;
}

void ct_tracedir_release(void)
{
    int fd = __atomic_exchange_n(&T.fd, -1, __ATOMIC_ACQ_REL);
    if (fd >= 0 && same_dir(fd, T.dev, T.ino))
        close(fd); /* a number the program reused is the program's: left alone */
    T.path[0] = '\0';
    T.requested[0] = '\0';
}

/*
 * The descriptor, if it is still ours. A program that closes every fd it did
 * not open (daemons, sandboxes) closes this one too, and may reuse its number
 * for a directory of its own: the number is trusted only while it names the
 * resolved directory; otherwise the directory is found again by its canonical
 * path and must be the same one, still trusted. The program's number is never
 * closed.
 */
static int checked_fd(void)
{
    int fd = __atomic_load_n(&T.fd, __ATOMIC_ACQUIRE);
    if (fd >= 0 && same_dir(fd, T.dev, T.ino))
        return fd;
    char canon[PATH_MAX];
    int again = walk(T.path, false, canon);
    struct stat st;
    if (again < 0 || fstat(again, &st) != 0 || st.st_dev != T.dev || st.st_ino != T.ino ||
        strcmp(canon, T.path) != 0 || !trusted(&st, T.path, NULL, 0)) {
        if (again >= 0)
            close(again);
        errno = ESTALE;
        return -1;
    }
    if (!__atomic_compare_exchange_n(&T.fd, &fd, again, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        close(again); /* another thread found it first: fd is now its descriptor */
        return fd;
    }
    return again;
}

int ct_tracedir_at(const char *path, const char **name)
{
    size_t n = strlen(T.path);
    if (n == 0 || strncmp(path, T.path, n) != 0)
        goto elsewhere;
    const char *rest = path + n;
    if (*rest == '\0') {
        *name = ".";
        return checked_fd();
    }
    if (n > 1 && *rest++ != '/') /* a canonical "/" already ends in '/' */
        goto elsewhere;
    if (!*rest || strchr(rest, '/') || strcmp(rest, ".") == 0 || strcmp(rest, "..") == 0)
        goto elsewhere;
    *name = rest;
    return checked_fd();
elsewhere:
    errno = EXDEV;
    return -1;
}

bool ct_tracedir_owns(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1;
}
