/*
 * ancestry.h - the processes a traced process descends from, as far as they
 * belong to the traced run, with their command lines (the `ancestors` table).
 */
#ifndef CUTRACE_ANCESTRY_H
#define CUTRACE_ANCESTRY_H

#include <stddef.h>
#include <stdint.h>

#include "cutrace/store.h"

/*
 * Walks up from `parent` under proc_root ("/proc"; a test's own tree) and
 * fills out[0..] parent first; returns how many (at most cap). The walk
 * stops before the first process whose environment lacks CUTRACE_DIR (the
 * one that set it is not part of the run), after pid 1, after cap
 * processes, and quietly at anything unreadable (another user's process,
 * hidepid, a process that just ended). Each cmdline is malloc'd, redacted
 * and shell-quoted as the process's own is (procinfo.h); with no memory for
 * one, the walk ends there.
 */
size_t ct_ancestry_walk(const char *proc_root, int64_t parent, struct ct_ancestor *out, size_t cap);
void ct_ancestry_free(struct ct_ancestor *list, size_t n);

#endif
