/*
 * traceset.h - a run's trace directories, trace files or packed runs
 * (packed.h) opened as a whole: its killed processes' crash buffers folded
 * first, then every trace opened and validated. It sits above trace.h (one file) and recover.h
 * (folding), which is why it is a module of its own: trace.c must not need
 * recovery, and recovery opens traces through trace.c.
 */
#ifndef CUTRACE_ANALYZER_TRACESET_H
#define CUTRACE_ANALYZER_TRACESET_H

#include "model/trace.h"

#include <stdbool.h>
#include <stddef.h>

struct trace_set {
    char *path; /* the directories or files given by the user, joined by spaces */
    struct trace *traces;
    size_t count; /* >= 1 once opened */
};

/*
 * Opens `path`: a directory of traces (every *.db in it, sorted by name), or
 * one trace file. A directory holding runs of `cutrace run` is opened as its
 * one run (set->path names the run), and refused when it holds several
 * (model/runs.h). On any problem prints "cutrace: <file>: <problem>" to
 * stderr and returns -1 with nothing left open; returns 0 otherwise.
 *
 * First it folds the crash buffers of killed processes (the directory's
 * .ring files, or the one beside the file) into their traces, silently
 * (recover_fold_quietly in recover.h), so that every report sees the
 * records a killed process left behind: a corrupt ring is bad input like a
 * corrupt trace; one that cannot be written (read-only directory) costs one
 * warning line on stderr and the report goes on without its records.
 */
int trace_set_open(struct trace_set *set, const char *path);
/*
 * The same for several paths taken as one run (npaths >= 1): directories,
 * trace files and packed runs (packed.h: every process of one), in the
 * order given; a trace met twice (the same <host>-<pid>-<start>.db, say a
 * directory and its pack) is bad input naming it. set->path is the paths
 * joined by spaces. Every trace that lost its -wal or .ring file costs one
 * warning line (sidefiles.h).
 */
int trace_set_open_paths(struct trace_set *set, const char *const *paths, size_t npaths);
void trace_set_close(struct trace_set *set);

/* Whether a directory entry is named like a trace file (*.db). */
bool trace_set_is_trace_name(const char *name);

#endif
