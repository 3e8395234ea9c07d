/*
 * ancestry.c - the command lines of a traced process's ancestors.
 *
 * A worker started by multiprocessing's spawn method runs `python -c "from
 * multiprocessing.spawn import spawn_main; ..." --multiprocessing-fork`: its
 * own command line holds none of the server's flags, and the launcher that
 * holds them never touches CUDA, so it leaves no trace of its own. Recording
 * the lines of the processes above the worker, once, when its trace is made,
 * keeps those flags in the worker's trace.
 *
 * Where the run begins: a process's initial environment (/proc/<pid>/environ,
 * what it was started with) holds CUTRACE_DIR if it was started inside the
 * run, so the first ancestor without it (the shell that exported it, or
 * `cutrace run` itself) is outside, and neither it nor anything above it is
 * recorded: a user's login shell has no place in a shared trace.
 *
 * Only /proc files are opened, O_CLOEXEC, and closed before returning, as
 * procinfo.c does: the program's descriptors stay as they were.
 */
#include "ancestry.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procinfo.h"

static const char RUN_VARIABLE[] = "CUTRACE_DIR=";

/* 1 when the NUL-separated environment in `path` has a CUTRACE_DIR entry, 0
 * when not, -1 when it cannot be read. Streamed: an environment can be large. */
static int environ_holds_run(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    const size_t key_len = sizeof RUN_VARIABLE - 1;
    size_t matched = 0; /* bytes of RUN_VARIABLE the current entry started with */
    bool mismatched = false;
    int found = 0;
    char buf[4096];
    ssize_t n;
    while (!found && (n = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n && !found; i++) {
            if (buf[i] == '\0') {
                matched = 0;
                mismatched = false;
            } else if (!mismatched) {
                mismatched = buf[i] != RUN_VARIABLE[matched];
                if (!mismatched && ++matched == key_len)
                    found = 1;
            }
        }
    }
    if (n < 0)
        found = -1;
    close(fd);
    return found;
}

/* ppid and start time (clock ticks since boot) from /proc/<pid>/stat. */
static bool read_stat(const char *path, int64_t *ppid, int64_t *start_ticks)
{
    char buf[1024];
    size_t len = ct_procinfo_read(path, buf, sizeof buf - 1);
    buf[len] = '\0';
    /* The name in parentheses may hold anything, ')' included: fields
     * start after the last one. */
    char *close_paren = strrchr(buf, ')');
    if (!close_paren)
        return false;
    /* Fields 3 (state) to 22 (starttime); ppid is field 4. */
    char state;
    long long parent, ticks;
    int scanned = sscanf(close_paren + 1,
                         " %c %lld %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d"
                         " %*d %lld",
                         &state, &parent, &ticks);
    if (scanned != 3)
        return false;
    *ppid = parent;
    *start_ticks = ticks;
    return true;
}

size_t ct_ancestry_walk(const char *proc_root, int64_t parent, struct ct_ancestor *out, size_t cap)
{
    size_t count = 0;
    int64_t pid = parent;
    while (count < cap && pid >= 1) {
        char path[512];
        snprintf(path, sizeof path, "%s/%" PRId64 "/environ", proc_root, pid);
        if (environ_holds_run(path) != 1)
            break;
        int64_t ppid, start_ticks;
        snprintf(path, sizeof path, "%s/%" PRId64 "/stat", proc_root, pid);
        if (!read_stat(path, &ppid, &start_ticks))
            break;
        snprintf(path, sizeof path, "%s/%" PRId64 "/cmdline", proc_root, pid);
        char *cmdline = ct_procinfo_cmdline(path);
        if (!cmdline)
            break;
        out[count++] = (struct ct_ancestor){pid, start_ticks, cmdline};
        if (pid == 1) /* init: nothing above it */
            break;
        pid = ppid;
    }
    return count;
}

void ct_ancestry_free(struct ct_ancestor *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(list[i].cmdline);
        list[i].cmdline = NULL;
    }
}
