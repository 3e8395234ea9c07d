/*
 * traceset.h - a run's trace directory (or one trace file) opened as a
 * whole: its killed processes' crash buffers folded first, then every trace
 * opened and validated. It sits above trace.h (one file) and recover.h
 * (folding), which is why it is a module of its own: trace.c must not need
 * recovery, and recovery opens traces through trace.c.
 */
#ifndef CUTRACE_ANALYZER_TRACESET_H
#define CUTRACE_ANALYZER_TRACESET_H

#include "model/trace.h"

#include <stdbool.h>
#include <stddef.h>

struct trace_set {
    char *path; /* the directory (or single file) given by the user */
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
void trace_set_close(struct trace_set *set);

/* Whether a directory entry is named like a trace file (*.db). */
bool trace_set_is_trace_name(const char *name);

#endif
