/*
 * tracefile.c - trace file names, exclusive creation, and publication.
 *
 * O_CREAT|O_EXCL fails on any existing name, dangling symlinks included, and
 * O_NOFOLLOW keeps it that way for the last component; renameat2 with
 * RENAME_NOREPLACE fails on any existing target and never follows one. So a
 * symlink planted where a trace will be written is never followed: the trace
 * takes the next free name, or is not published.
 */
#include "tracefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ct_tracefile_mkdir(const char *dir)
{
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s", dir) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(tmp, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* out = dir/base+suffix; false (errno ENAMETOOLONG) if it does not fit. */
static bool join(char *out, size_t cap, const char *dir, const char *base, const char *suffix)
{
    int n = snprintf(out, cap, "%s/%s%s", dir, base, suffix);
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

static bool taken(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 || errno != ENOENT;
}

int ct_tracefile_create(const char *dir, const char *host, int64_t pid, uint64_t start_wall_ns,
                        struct ct_tracefile *out)
{
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
        /* The four names must be free together. */
        if (taken(out->db_path) || taken(out->ring_path) || taken(out->ring_tmp_path))
            continue;
        int fd = open(out->db_tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
    return renameat2(AT_FDCWD, tmp_path, AT_FDCWD, final_path, RENAME_NOREPLACE);
}
