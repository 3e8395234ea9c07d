/*
 * writer.h - the background thread that moves records from the ring to SQLite.
 *
 * The writer is the only user of the trace's SQLite connection. It drains
 * every published record at least every `interval_ms`, commits, and only
 * then releases the ring slots, so a record is always either in a committed
 * transaction or in a published slot of the ring file.
 */
#ifndef CUTRACE_WRITER_H
#define CUTRACE_WRITER_H

#include <limits.h>
#include <stdbool.h>

#include "cutrace/ring.h"
#include "cutrace/store.h"

struct ct_writer;

/* What the writer asks the outside world; injectable so tests need no CUDA. */
struct ct_writer_probes {
    bool (*describe_device)(int device, struct ct_device_info *out);
    void (*versions)(struct ct_versions *out);
    void (*objects_changed)(void); /* objects were loaded or unloaded; may be NULL */
};

struct ct_writer_config {
    struct ct_ring *ring;
    char db_path[PATH_MAX]; /* an existing trace (ct_store_create made it) */
    /* Or, when set, what gives the writer its connection: called once, on
     * the writer thread under its work lock, before any record is written
     * (the session finishes there the file its first call made and hands
     * over the connection that made it, so the schema is not parsed
     * again). NULL with a message in err when it cannot. */
    struct ct_store *(*make_store)(void *arg, char *err, size_t errlen);
    void *make_arg;
    struct ct_writer_probes probes;
    unsigned interval_ms;
    bool record_objects; /* loaded_modules, for stacks (objects.h) */
};

/* Starts the thread; NULL (and a message in err) if it cannot. */
struct ct_writer *ct_writer_start(const struct ct_writer_config *cfg, char *err, size_t errlen);

/* False once the writer has failed for good; producers then stop recording. */
bool ct_writer_alive(const struct ct_writer *w);

/*
 * Waits until every record claimed before the call is committed, then, if
 * end_state is not NULL, stores it in meta and seals the file
 * (ct_store_seal: one self-contained .db, also for later commits), or, for
 * "running" (a failed exec: the process goes on), returns it to WAL. Returns
 * false on timeout or if the writer is dead.
 */
bool ct_writer_flush(struct ct_writer *w, const char *end_state, unsigned timeout_ms);

/* The exit status (0-255) the next end state other than "running" is
 * stored with, as meta exit_status. */
void ct_writer_note_exit_status(struct ct_writer *w, int status);

/* Stops and joins the thread after a final drain, and frees the writer. */
void ct_writer_stop(struct ct_writer *w);

/* fork(): hold the writer outside SQLite across the fork. */
void ct_writer_before_fork(struct ct_writer *w);
void ct_writer_after_fork_parent(struct ct_writer *w);

/* Records committed so far (for tests and flush bookkeeping). */
uint64_t ct_writer_committed(struct ct_writer *w);

#endif
