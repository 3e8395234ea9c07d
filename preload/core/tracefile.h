/*
 * tracefile.h - naming, creating and publishing a process's trace files.
 *
 * A trace is <dir>/<host>-<pid>-<start_wall_ns>.db with its crash buffer
 * <same>.ring beside it, in the process's trace directory (tracedir.h), whose
 * descriptor every call here goes through. Names are unique even for reused
 * pids (the start time). Both files are built under hidden temporary names
 * (.<name>.tmp) and published complete, with a rename that refuses to replace
 * anything: a reader never sees a half-made trace, nothing existing is
 * overwritten, and a symlink planted at any of the names is never followed.
 * A base whose names are taken, by anything, is skipped for <base>-1, ...
 */
#ifndef CUTRACE_TRACEFILE_H
#define CUTRACE_TRACEFILE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

struct ct_tracefile {
    char db_path[PATH_MAX]; /* final names, free when chosen */
    char ring_path[PATH_MAX];
    char db_tmp_path[PATH_MAX];   /* created, empty, mode 0600 */
    char ring_tmp_path[PATH_MAX]; /* free; the caller creates it (ct_tracefile_open_new) */
    char db_name[256];            /* basename of db_path */
};

/*
 * Chooses the names of a new trace in the trace directory and creates its
 * temporary database file; 0, or -1 with errno (ENAMETOOLONG, EEXIST after
 * 100 taken names, EXDEV without a trace directory, or what open(2) said).
 */
int ct_tracefile_create(const char *host, int64_t pid, uint64_t start_wall_ns,
                        struct ct_tracefile *out);

/* Creates path, a name of the trace directory (O_CREAT|O_EXCL|O_NOFOLLOW, 0600); an fd or -1. */
int ct_tracefile_open_new(const char *path, int access_mode);

/*
 * Writes n bytes into path, the still-empty temporary database file that
 * ct_tracefile_create made (the image of a new trace file): only if it is
 * the tracer's own, empty file in the trace directory, never through a
 * symlink. 0, or -1 with errno (EEXIST: not empty; EPERM: not ours).
 */
int ct_tracefile_fill(const char *path, const void *bytes, size_t n);

/* Moves a finished temporary file to its final name; -1 (EEXIST) if taken. */
int ct_tracefile_publish(const char *tmp_path, const char *final_path);

/* Removes a name of the trace directory; 0 or -1 with errno. */
int ct_tracefile_remove(const char *path);

#endif
