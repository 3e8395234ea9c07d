/*
 * recover.h - folding the crash buffers (.ring files) of killed processes
 * back into their traces.
 *
 * libcutrace.so keeps every record that returned to the program but is not
 * yet committed in <base>.ring beside <base>.db, a file the kernel keeps
 * when the process is killed. A process that exits normally deletes its
 * ring; a killed one leaves it, and only folding it makes its trace whole.
 * recover_ring() does that for one ring:
 *
 *   1. the ring is validated as hostile input (header fields, sizes, names)
 *      and read through a private read-only mapping: it is never written;
 *   2. a ring whose process holds its lock is left alone: a POSIX write
 *      lock (fcntl, ring 6 on; no child inherits it) or, from older builds,
 *      flock(LOCK_EX), held for the process's whole life;
 *   3. its records go into dirname(ring)/<header db_name> in one transaction
 *      (INSERT OR IGNORE by seq, so replaying committed records is harmless),
 *      with meta end_state ('killed' unless the ring says how it ended),
 *      writer_error/writer_stopped_after, dropped_records and
 *      recovered_records, alive_mono_ns (the writer's last heartbeat, ring
 *      7), and the calls the process was inside (its entered marks, as
 *      `inflight` rows: inflight.h); a missing or
 *      empty database is created from the header first;
 *   4. the ring is deleted, still under its lock.
 *
 * `cutrace recover` reports each ring; every other command folds silently
 * through recover_fold_quietly(), called by trace_set_open(). Both then
 * clean what processes killed while creating their trace files left
 * (leftovers.h).
 */
#ifndef CUTRACE_ANALYZER_RECOVER_H
#define CUTRACE_ANALYZER_RECOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum recover_status {
    RECOVER_FOLDED,     /* its records are in the trace, the ring is deleted */
    RECOVER_LIVE,       /* locked by its running process: left alone */
    RECOVER_GONE,       /* deleted meanwhile (another cutrace folded it) */
    RECOVER_NOT_FOLDED, /* a sound ring whose trace could not be written */
    RECOVER_BAD,        /* the ring or its trace is unusable: bad input */
};

struct recover_result {
    enum recover_status status;
    char *ring_path; /* as found: DIR/NAME.ring */
    char *db_path;   /* DIR/<db_name of the header>; NULL until the header is read */

    /* RECOVER_BAD, RECOVER_NOT_FOLDED: one line, and the file it is about. */
    char error[512];
    char *error_path;
    bool read_only; /* RECOVER_NOT_FOLDED because the directory or file cannot be written */

    /* From the header, once validated (has_header). */
    bool has_header;
    int64_t pid;
    uint64_t start_wall_ns, start_mono_ns;
    char *boot_id;
    char *writer_error; /* NULL: the writer did not give up */
    int64_t writer_stopped_after;
    int64_t dropped; /* records the process could not keep (meta dropped_records) */

    /* RECOVER_FOLDED. */
    bool created_db;          /* the trace was missing or empty and was made from the header */
    uint64_t ring_records;    /* complete, uncommitted records the ring held */
    int64_t new_records;      /* of those, the ones the trace did not have yet */
    int64_t inflight_records; /* calls it died inside (entered marks) added as inflight rows */
    int64_t recovered_total;  /* meta recovered_records afterwards */
    char *end_state_before;   /* meta end_state before; NULL if there was none */
    char *end_state;          /* and after */
    char *unlink_error;       /* folded, but the ring could not be deleted */
};

/* Folds one ring (see above). Fills *r (free it with recover_result_free)
 * and returns r->status. Prints nothing. */
enum recover_status recover_ring(const char *ring_path, struct recover_result *r);
void recover_result_free(struct recover_result *r);

/*
 * The rings that belong to `path` as given to a command: every *.ring of a
 * directory, in name order, or the ring beside FILE.db (FILE.ring), if any.
 * A path that is neither yields none. Returns 0, or -1 with a one-line
 * problem in err (the directory cannot be read); *rings is then NULL.
 */
int recover_find_rings(const char *path, char ***rings, size_t *count, char *err, size_t errlen);
void recover_free_rings(char **rings, size_t count);

/*
 * What every report does before it reads `path`: folds its rings, silently.
 * A ring of a live process is skipped; one that cannot be written out
 * (read-only directory) costs one warning line on stderr and the command
 * goes on; a corrupt ring, or a ring whose trace is unusable, prints the
 * one-line error and returns -1 (bad input, exit 1). Then the leftovers of
 * trace creation are cleaned (leftovers.h), without a word: one that cannot
 * be cleaned changes nothing the report says.
 */
int recover_fold_quietly(const char *path);

#endif
