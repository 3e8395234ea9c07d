/*
 * trace.h - opening the traces of a directory for reading, and querying them.
 *
 * A trace directory holds one SQLite file per traced process
 * (<host>-<pid>-<start_wall_ns>.db, see include/cutrace/schema.h), plus
 * SQLite's -wal/-shm files and the .ring crash buffers of killed processes,
 * which trace_set_open folds into their traces first (recover.h). Each .db
 * is then opened read-only and validated before any report trusts it; the
 * first problem becomes a one-line message naming the file.
 *
 * Policy: a file that fails validation makes the whole trace set fail to
 * open, and the command exits 1 with that one line. A report that silently
 * left out a process would understate memory per GPU, which is exactly what
 * users come to this tool to find; they can move the bad file aside.
 *
 * Every query of a trace runs inside one read transaction opened with the
 * trace, so a report about a still-running process sees one consistent
 * snapshot even while libcutrace keeps writing.
 *
 * Reports use only the public tables and views (process, devices, env, calls,
 * allocations, meminfo, ipc) plus meta and apis; api ids never leave this
 * module, names come from each trace's own apis table.
 */
#ifndef CUTRACE_ANALYZER_TRACE_H
#define CUTRACE_ANALYZER_TRACE_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * From this format on, calls and allocations carry effect_order (the order
 * calls took effect across threads, include/cutrace/schema.h), and frees are
 * paired by it; older traces pair by seq, which is then the same order.
 */
#define TRACE_EFFECT_ORDER_SINCE 6

/* One row of a trace's apis table. */
struct trace_api {
    int64_t id;
    char *name, *layer, *role, *space, *kind;
};

struct trace {
    char *path; /* directory/file.db as the user can find it */
    char *file; /* file.db */
    sqlite3 *db;
    int64_t format_version;
    char *producer;  /* meta 'producer', NULL if absent */
    char *end_state; /* meta 'end_state', NULL if absent */
    /* Written by crash recovery (analyzer/recover/recover.h); has_* false if absent. */
    bool has_recovered_records;
    int64_t recovered_records; /* meta 'recovered_records': rows folded in from the ring */
    char *writer_error;        /* meta 'writer_error': why the writer gave up, NULL if it did not */
    bool has_writer_stopped_after;
    int64_t writer_stopped_after; /* meta 'writer_stopped_after': last seq it committed */
    bool has_dropped_records;
    int64_t dropped_records; /* meta 'dropped_records': calls the tracer could not record */
    struct trace_api *apis;
    size_t napis;
    bool wal_mode; /* the file's header says WAL mode */
    /* A process of a packed run (packed.h): path is "PACK:FILE", file the
     * trace file's name in the run it was packed from. */
    bool packed;
    int64_t pack_process; /* its pack_traces.process */
    char error[512];      /* the first problem met, one line; "" while none */
};

static inline bool trace_has_effect_order(const struct trace *t)
{
    return t->format_version >= TRACE_EFFECT_ORDER_SINCE;
}

/*
 * 1: the trace orders effects (format 6 or later, its columns usable); 0:
 * an older trace, ordered by seq; -1 with t->error set: a trace of format 6
 * or later whose ret_seq or effect_order columns are missing or broken.
 * Reports that order memory events check it up front, after modules_check.
 */
int trace_effect_order_check(struct trace *t);

/*
 * Runs `sql` (a LIMIT 0 query: preparing it compiles the views it reads) to
 * make sure `object` is there and usable. 0, or -1 with one line in
 * t->error naming it (or the damage, for a corrupt file).
 */
int trace_check_usable(struct trace *t, const char *object, const char *sql);

/*
 * Opens and validates one trace file. Returns 0, or -1 with t->error set
 * (t must then still be closed). Used by trace_set_open (traceset.h); exposed
 * for tests.
 */
int trace_open(struct trace *t, const char *path);
/*
 * The same for process `process` of the packed run at pack_path, whose
 * trace file was named `file` (packed.h says how it reads as its trace).
 */
int trace_open_packed(struct trace *t, const char *pack_path, int64_t process, const char *file);

/*
 * A plain read-only SQLite connection to a trace file, opened as reports
 * open theirs: with SQLite's immutable option where that is safe (a
 * finished trace), so that reading it leaves no -wal or -shm behind. For
 * the checks recovery makes before it decides to write (leftovers.c).
 */
int trace_sqlite_open_readonly(const char *path, sqlite3 **db);
/* The same, always immutable: the .db file alone, whatever a -wal beside it
 * holds (the check for a missing -wal, sidefiles.h). */
int trace_sqlite_open_main_file(const char *path, sqlite3 **db);
void trace_close(struct trace *t);

/* Whether the file is an SQLite database whose header says WAL mode. */
bool trace_file_in_wal_mode(const char *path);

/*
 * Records a problem with the trace (the first one wins) and returns -1, so
 * that callers can write `return trace_fail(t, ...)`.
 */
int trace_fail(struct trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "cutrace: <path>: <error>" to stderr. */
void trace_report_error(const struct trace *t);

/*
 * Prepares `sql` and binds one parameter per character of `types`, in order:
 * 'i' int64_t, 't' const char * (NULL binds NULL), 'n' NULL (no argument).
 * Returns NULL with t->error set on failure. SQL text must be a constant:
 * values from users or traces only ever travel as bound parameters.
 */
sqlite3_stmt *trace_query(struct trace *t, const char *sql, const char *types, ...);

/* Steps a query: 1 for a row, 0 when done, -1 with t->error set on error
 * (a corrupt page found mid-query is reported like any damaged file). */
int trace_step(struct trace *t, sqlite3_stmt *stmt);

/* Column helpers that make NULLs explicit: damaged traces contain them even
 * where the schema says NOT NULL. */
bool col_is_null(sqlite3_stmt *stmt, int col);
int64_t col_int(sqlite3_stmt *stmt, int col, int64_t if_null);
/* A copy of a text column (NUL bytes inside become spaces), NULL for NULL. */
char *col_text(sqlite3_stmt *stmt, int col);

/* The trace's apis row by id or name, NULL if there is none. */
const struct trace_api *trace_api_by_id(const struct trace *t, int64_t id);
const struct trace_api *trace_api_by_name(const struct trace *t, const char *name);
/* The api's name, or NULL when the id is not in this trace's apis table. */
const char *trace_api_name(const struct trace *t, int64_t id);

/*
 * The identity a trace file's name carries (<host>-<pid>-<start_wall_ns>.db,
 * tracefile.c), for traces that lost their process row. Returns false when
 * the name is not of that form; *host is malloc'd.
 */
bool trace_identity_from_file_name(const char *file, int64_t *pid, int64_t *start_wall_ns,
                                   char **host);

/*
 * SQL aggregate available on every opened trace: ct_sum(x) adds the
 * non-negative integers of a group, ignoring NULLs and negative values and
 * saturating at INT64_MAX. SQLite's sum() would abort the whole query with
 * "integer overflow" on a damaged trace; byte and time totals use ct_sum.
 */
#define TRACE_SUM_FUNCTION "ct_sum"

/* meta's value for key in an open trace: *found tells a missing row; *text
 * (malloc'd) is NULL for a NULL value; *integer is set when the value is an
 * integer. An SQLite code. */
int trace_meta_get(sqlite3 *db, const char *key, bool *found, char **text, int64_t *integer,
                   bool *is_integer);

#endif
