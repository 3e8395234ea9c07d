/*
 * sidefiles.h - the warning for a trace that lost the files beside it.
 *
 * A process that is killed leaves part of its trace outside <base>.db: what
 * it committed since SQLite's last checkpoint in <base>.db-wal, and what it
 * had not committed yet in its crash buffer <base>.ring. Copying only the
 * *.db files loses both, and the copy reads as a process with fewer calls
 * (often none) that ended without saying how. Every report warns about it
 * on stderr (`cutrace: <trace>: warning: ...`), once per trace, and goes
 * on. The checks run before the rings are folded and the leftovers of dead
 * processes are marked (recover.h), on the files as they were found, on a
 * trace whose .db says 'running':
 *
 *   with a ring and no -wal: when the .db holds fewer calls than the ring
 *   says were committed. The ring's header has no count of calls (its
 *   cursors count records, stack records too), but the writer hands a slot
 *   back only after committing its record, so the slots just below the
 *   header's tail name the last call committed; a .db whose events stop
 *   before it lost the -wal that commit went to. A ring whose writer never
 *   committed loses nothing without a -wal;
 *
 *   without a ring: when the .db says it had one (meta crash_buffer, format
 *   7, written into the .db itself before the first call): the ring is
 *   missing, and the -wal too when the .db is in WAL mode without one.
 *
 * A .db caught halfway through a checkpoint is inconsistent without its
 * -wal: it is refused as damaged, by the report's one-line error.
 */
#ifndef CUTRACE_ANALYZER_SIDEFILES_H
#define CUTRACE_ANALYZER_SIDEFILES_H

/* The traces of `path` (a directory, or one trace file) that lost their
 * -wal or .ring, before its rings are folded. */
void sidefiles_warn(const char *path);

#endif
