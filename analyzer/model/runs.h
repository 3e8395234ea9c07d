/*
 * runs.h - a directory that holds runs: what `cutrace run -o DIR` makes,
 * one subdirectory per run (DIR/run-<UTC start>-<pid>, each with its
 * manifest.json), so that reusing DIR never mixes two runs' processes.
 *
 * A report given such a DIR takes its run when it holds exactly one, and
 * refuses with the list when it holds several (docs/cli.md, "Runs in one
 * directory"); `cutrace ls DIR` lists them. A directory with traces of its
 * own (*.db, *.ring: a bare LD_PRELOAD, or a run's own directory) is a run
 * itself and is read as it always was.
 */
#ifndef CUTRACE_ANALYZER_RUNS_H
#define CUTRACE_ANALYZER_RUNS_H

#include "model/manifest.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct run_entry {
    char *path; /* DIR/run-... */
    struct run_manifest manifest;
    size_t traces; /* its *.db files */
};

/*
 * The runs directly inside dir (subdirectories holding a manifest.json),
 * oldest first (their names sort by start time), manifests parsed. Returns
 * their number (0 when dir is no directory of runs: it has traces of its own,
 * or none), or -1 after the one-line error of a manifest that cannot be read.
 */
ssize_t runs_list(const char *dir, struct run_entry **runs);
void runs_free(struct run_entry *runs, size_t count);

/* The trace files (*.db) directly in dir. */
size_t runs_trace_files(const char *dir);

/*
 * The path a report reads for `path`: itself (*run_dir NULL, returns 0), or
 * its one run (*run_dir malloc'd, returns 0). A directory of several runs
 * is refused (-1) with one line naming them and `cutrace ls`.
 */
int runs_resolve(const char *path, char **run_dir);

#endif
