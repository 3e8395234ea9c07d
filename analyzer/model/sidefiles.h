/*
 * sidefiles.h - the warning for a trace that lost the files beside it.
 *
 * A process that is killed leaves part of its trace outside <base>.db: what
 * it committed since SQLite's last checkpoint in <base>.db-wal, and what it
 * had not committed yet in its crash buffer <base>.ring. Copying only the
 * *.db files loses both, and the copy reads as a process with fewer calls
 * (often none) that ended without saying how. Every report warns about it,
 * once per trace, on stderr (`cutrace: <trace>: ...`) and goes on:
 *
 *   before its rings are folded, a trace whose meta still says end_state
 *   'running', whose header says WAL mode and whose -wal file is missing
 *   (a killed writer always leaves its -wal: its connection was open);
 *
 *   after, a trace that still says 'running' and has no ring (and no live
 *   process keeping one), or that crash recovery marked 'killed' because it
 *   had calls but no ring (meta end_note, leftovers.h), never folded one.
 *
 * The ring header counts tickets of records, calls and auxiliary records
 * alike, and is gone once folded, so a count of calls to compare the trace
 * with does not survive a copy; the checks above are what the files left
 * still tell.
 */
#ifndef CUTRACE_ANALYZER_SIDEFILES_H
#define CUTRACE_ANALYZER_SIDEFILES_H

#include "model/trace.h"

#include <stddef.h>

/* The trace file names already warned about during one opening of a set. */
struct sidefiles_warned {
    char **files;
    size_t count, cap;
};

/* Before folding: the traces of `path` (a directory, or one trace file)
 * whose -wal is missing. */
void sidefiles_warn_before_folding(const char *path, struct sidefiles_warned *warned);
/* After opening: trace t, unless it was warned about already. */
void sidefiles_warn_opened(struct trace *t, struct sidefiles_warned *warned);
void sidefiles_warned_free(struct sidefiles_warned *warned);

#endif
