/*
 * tracefile.c - trace file names, exclusive creation, and publication.
 *
 * O_CREAT|O_EXCL fails on any existing name, dangling symlinks included, and
 * O_NOFOLLOW keeps it that way for the last component; renameat2 with
 * RENAME_NOREPLACE fails on any existing target and never follows one. So a
 * symlink planted where a trace will be written is never followed: the trace
 * takes the next free name, or is not published. Every name is reached
 * through the trace directory's descriptor (tracedir.h), never its path.
 */
#include "tracefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracedir.h"

/* out = dir/base+suffix; false (errno ENAMETOOLONG) if it does not fit. */
static bool join(char *out, size_t cap, const char *dir, const char *base, const char *suffix)
{
    int n = snprintf(out, cap, "%s/%s%s", strcmp(dir, "/") == 0 ? "" : dir, base, suffix);
    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return false;
    }
    return true;
}

/* Host names become file names: anything but [A-Za-z0-9.-] turns into '_'. */
static void safe_host(const char *host, char *out, size_t cap)
{
    size_t i = 0;
    for (; host[i] && i + 1 < cap; i++) {
        char c = host[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.';
        out[i] = ok ? c : '_';
    }
    out[i] = '\0';
}

/* path+suffix exists as anything, or cannot be looked at. */
static bool taken(const char *path, const char *suffix)
{
    char full[PATH_MAX];
    const char *name;
    if ((size_t)snprintf(full, sizeof full, "%s%s", path, suffix) >= sizeof full)
        return true;
    int dir = ct_tracedir_at(full, &name);
    struct stat st;
    return dir < 0 || fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

/* The side files SQLite makes beside a database, planted ones included. */
static bool db_taken(const char *db_path)
{
    return taken(db_path, "") || taken(db_path, "-wal") || taken(db_path, "-shm") ||
           taken(db_path, "-journal");
}

int ct_tracefile_open_new(const char *path, int access_mode)
{
    const char *name;
    int dir = ct_tracedir_at(path, &name);
    if (dir < 0)
        return -1;
    return openat(dir, name, access_mode | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

int ct_tracefile_fill(const char *path, const void *bytes, size_t n)
{
    const char *name;
    int dir = ct_tracedir_at(path, &name);
    if (dir < 0)
        return -1;
    int fd = openat(dir, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    int rc = -1;
    if (!ct_tracedir_owns(fd))
        errno = EPERM;
    else if (fstat(fd, &st) != 0)
        ;
    else if (st.st_size != 0)
        errno = EEXIST;
    else {
        const unsigned char *p = bytes;
        size_t done = 0;
        while (done < n) {
            ssize_t w = pwrite(fd, p + done, n - done, (off_t)done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w == 0)
                errno = EIO; /* no progress and no error: never loop on it */
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        rc = done == n ? 0 : -1;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int ct_tracefile_create(const char *host, int64_t pid, uint64_t start_wall_ns,
                        struct ct_tracefile *out)
{
    const char *dir = ct_tracedir_path();
    if (!*dir) {
        errno = EXDEV;
        return -1;
    }
    char safe[100], first[200], base[220], hidden[230];
    safe_host(host && *host ? host : "host", safe, sizeof safe);
    snprintf(first, sizeof first, "%s-%lld-%llu", safe, (long long)pid,
             (unsigned long long)start_wall_ns);
    for (int attempt = 0; attempt < 100; attempt++) {
        if (attempt)
            snprintf(base, sizeof base, "%s-%d", first, attempt);
        else
            snprintf(base, sizeof base, "%s", first);
        snprintf(hidden, sizeof hidden, ".%s", base);
        if (!join(out->db_path, sizeof out->db_path, dir, base, ".db") ||
            !join(out->ring_path, sizeof out->ring_path, dir, base, ".ring") ||
            !join(out->db_tmp_path, sizeof out->db_tmp_path, dir, hidden, ".db.tmp") ||
            !join(out->ring_tmp_path, sizeof out->ring_tmp_path, dir, hidden, ".ring.tmp"))
            return -1;
        /* All names must be free together, SQLite's side files too. */
        if (db_taken(out->db_path) || taken(out->ring_path, "") || taken(out->ring_tmp_path, "") ||
            taken(out->db_tmp_path, "-wal") || taken(out->db_tmp_path, "-shm") ||
            taken(out->db_tmp_path, "-journal"))
            continue;
        int fd = ct_tracefile_open_new(out->db_tmp_path, O_WRONLY);
        if (fd >= 0) {
            close(fd);
            snprintf(out->db_name, sizeof out->db_name, "%s.db", base);
            return 0;
        }
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

int ct_tracefile_publish(const char *tmp_path, const char *final_path)
{
    const char *from, *to;
    int dir = ct_tracedir_at(tmp_path, &from);
    if (dir < 0 || ct_tracedir_at(final_path, &to) < 0)
        return -1;
    return renameat2(dir, from, dir, to, RENAME_NOREPLACE);
}

int ct_tracefile_remove(const char *path)
{
    const char *name;
    int dir = ct_tracedir_at(path, &name);
    return dir < 0 ? -1 : unlinkat(dir, name, 0);
}
