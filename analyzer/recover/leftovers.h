/*
 * leftovers.h - what a process killed while it was creating its trace files
 * leaves behind, and cleaning that up.
 *
 * At its first CUDA call the tracer (preload/core/session.c) creates, in
 * this order: .<base>.db.tmp (empty, then an SQLite file with -wal and -shm
 * beside it while the schema, process row and environment go in), renames
 * it <base>.db (end_state 'running'), creates .<base>.ring.tmp, reserves
 * its blocks, maps and locks it, formats its header, and renames it
 * <base>.ring. A SIGKILL between two steps leaves one of:
 *
 *   .<base>.db.tmp (and -wal, -shm, -journal)   nothing published
 *   <base>.db, no ring                          the trace says running forever
 *   <base>.db and .<base>.ring.tmp              formatted or not, maybe locked
 *   <base>.db and <base>.ring                   folded by recover.h
 *
 * A process that ran with its ring in memory (no file ring could be made)
 * and was killed leaves a trace without a ring too. No record that returned
 * to the program is ever in a temporary file (records are pushed only into
 * a published ring), so removing them loses nothing.
 *
 * Cleaning: a temporary file whose process is gone is removed, and a .db
 * that says 'running' (or nothing), has no ring and whose process is gone
 * gets end_state 'killed' and an end_note saying why. The process is
 * <host>-<pid>-<start_wall_ns>[-N] of the name (tracefile.h), or, where the
 * file says more, its ring header's or process row's pid, start times and
 * boot id; it must be of this host, and owner.h judges whether it is gone.
 * A .ring.tmp is never removed while its lock is held (owner_ring_lock).
 * A live process's files are never touched.
 */
#ifndef CUTRACE_ANALYZER_LEFTOVERS_H
#define CUTRACE_ANALYZER_LEFTOVERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum leftover_kind {
    LEFTOVER_DB_TMP,   /* .<base>.db.tmp and its SQLite side files */
    LEFTOVER_RING_TMP, /* .<base>.ring.tmp */
    LEFTOVER_TRACE,    /* <base>.db without <base>.ring */
};

enum leftover_status {
    LEFTOVER_NONE,    /* nothing to do: a trace that says how it ended, a file not cutrace's */
    LEFTOVER_CLEANED, /* removed (temporary), or marked killed (trace) */
    LEFTOVER_LIVE,    /* its process may be running: left alone */
    LEFTOVER_FOREIGN, /* made on another host: whether its process lives cannot be told */
    LEFTOVER_FAILED,  /* its process is gone but it could not be removed or marked */
};

struct leftover {
    enum leftover_kind kind;
    enum leftover_status status;
    char *path;           /* DIR/.<base>.db.tmp (even when only its side files are left),
                           * DIR/.<base>.ring.tmp or DIR/<base>.db */
    int64_t pid;          /* its process; 0 until known */
    const char *why;      /* LEFTOVER_CLEANED: how we know it is gone (static) */
    char *host;           /* LEFTOVER_FOREIGN of a trace: the host its process row names */
    char side_files[32];  /* LEFTOVER_DB_TMP cleaned: the side files removed too ("-wal, -shm") */
    const char *end_note; /* LEFTOVER_TRACE cleaned: the note written (static) */
    char error[512];      /* LEFTOVER_FAILED: one line */
    bool read_only;       /* LEFTOVER_FAILED because the directory or file cannot be written */
};

/*
 * The leftovers of `path` as given to a command: of every base in a
 * directory, or of FILE.db's base, in name order. Run it after the rings
 * are folded: a trace whose ring exists is no leftover. Returns 0, or -1
 * with a one-line problem in err (the directory cannot be read).
 */
int leftovers_find(const char *path, struct leftover **items, size_t *count, char *err,
                   size_t errlen);

/* Judges one leftover and cleans it if its process is gone; sets l->status
 * and what goes with it. Prints nothing. */
void leftover_clean(struct leftover *l);

void leftovers_free(struct leftover *items, size_t count);

#endif
