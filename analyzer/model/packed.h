/*
 * packed.h - the packed run file (`cutrace pack`, docs/schema.md "Packed
 * runs"): one SQLite database holding every process of a run, and how a
 * report reads one of its processes as if it were that process's own trace.
 *
 * Layout. Every table of every trace is stored once, in a table of the
 * same name whose first column `process` says which process a row is from
 * (pack_traces.process, 1, 2, ...), keyed by (process, the trace's own key):
 * events by (process, seq). The views of a trace are there too, made over
 * every process with the same `process` column (CT_PACK_VIEWS_SQL in
 * include/cutrace/schema.h), so that `sqlite3 run.cutrace` queries every
 * rank at once. Besides:
 *   pack_info(key, value)        'schema' = PACK_SCHEMA_NAME, 'pack_version'
 *   pack_traces(process, file)   one row per process: its trace file's name
 *   pack_objects(process, ord, type, name, sql)
 *                                the tables and views each trace had, in the
 *                                order it created them, and the views' SQL
 *   pack_columns(process, object, cid, name)
 *                                each of those tables' columns, in order
 *   manifest(json)               the run's manifest.json text, if it had one
 *
 * Reading. A process is read through its own connection to the file, in
 * which packed_create_views() makes TEMP views named like the trace's
 * tables, each the pack's table filtered on the process (so a lookup by
 * seq uses the (process, seq) key), and then the trace's own views again,
 * from their SQL, over those. SQLite resolves unqualified names in the
 * temp schema first, so every query of the loader reads the process as
 * its trace had it, with the same derivations.
 */
#ifndef CUTRACE_ANALYZER_PACKED_H
#define CUTRACE_ANALYZER_PACKED_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PACK_SCHEMA_NAME "cutrace-pack"
#define PACK_VERSION     1
/* The column every packed table starts with. */
#define PACK_PROCESS_COLUMN "process"

#define PACK_SCHEMA_SQL                                                                            \
    "CREATE TABLE pack_info(key TEXT PRIMARY KEY, value) WITHOUT ROWID;\n"                         \
    "CREATE TABLE pack_traces(process INTEGER PRIMARY KEY, file TEXT NOT NULL);\n"                 \
    "CREATE TABLE pack_objects(process INTEGER NOT NULL, ord INTEGER NOT NULL,"                    \
    " type TEXT NOT NULL, name TEXT NOT NULL, sql TEXT, PRIMARY KEY (process, ord))"               \
    " WITHOUT ROWID;\n"                                                                            \
    "CREATE TABLE pack_columns(process INTEGER NOT NULL, object TEXT NOT NULL,"                    \
    " cid INTEGER NOT NULL, name TEXT NOT NULL, PRIMARY KEY (process, object, cid))"               \
    " WITHOUT ROWID;\n"                                                                            \
    "CREATE TABLE manifest(json TEXT);\n"

/* Whether a table name belongs to the pack itself rather than to the traces. */
bool packed_is_own_table(const char *name);

/* One process of a packed file. */
struct packed_entry {
    int64_t process;
    char *file; /* its trace file's name, as it was in the run's directory */
};

/*
 * Whether the SQLite database at path is a packed run: 1 yes, 0 no (a
 * trace, or not SQLite at all: trace.c tells which), -1 with a one-line
 * problem in err (a pack that cannot be read, or of a newer version).
 */
int packed_probe(const char *path, char *err, size_t errlen);

/* The processes of a packed file, by process id. 0, or -1 with err set. */
int packed_list(const char *path, struct packed_entry **entries, size_t *count, char *err,
                size_t errlen);
void packed_list_free(struct packed_entry *entries, size_t count);

/*
 * On a read-only connection to a packed file: the TEMP views that make
 * `process` read as its own trace (above). 0, or -1 with a one-line
 * problem in err (a damaged pack).
 */
int packed_create_views(sqlite3 *db, int64_t process, char *err, size_t errlen);

#endif
