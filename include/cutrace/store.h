/*
 * store.h - one process's trace file: the SQLite database behind the views.
 *
 * Only the writer thread (and, after a crash, recovery) touches a store, so a
 * store needs no locking of its own. Every function returns 0 on success or
 * an SQLite error code, and leaves a message in ct_store_error().
 */
#ifndef CUTRACE_STORE_H
#define CUTRACE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "cutrace/format.h"

struct ct_store;

/* A process the traced one descends from (table ancestors). */
struct ct_ancestor {
    int64_t pid;
    int64_t start_ticks; /* /proc/<pid>/stat starttime: with pid, which process it was */
    char *cmdline;       /* redacted and shell-quoted, as process.cmdline */
};

/* The most ancestors a trace records: deep enough for a shell, a launcher,
 * a forkserver and a worker's own children, small enough to walk at once. */
#define CT_ANCESTORS_MAX 16

struct ct_process_info {
    int64_t pid;
    int64_t ppid;
    int64_t uid;
    uint64_t start_wall_ns;
    uint64_t start_mono_ns;
    char host[256];
    char boot_id[64];
    char exe[1024];
    char *cmdline; /* owned by the caller */
    /* ancestors[0] is the parent; written with the process row. */
    struct ct_ancestor ancestors[CT_ANCESTORS_MAX];
    size_t nancestors;
};

struct ct_device_info {
    int device; /* ordinal as the process sees it */
    char uuid[64];
    char pci_bus_id[32];
    char name[256];
    uint64_t total_bytes;
};

struct ct_env_var {
    const char *name;
    const char *value;
};

/* Creates the schema in `path`, an empty file the caller created safely. */
struct ct_store *ct_store_create(const char *path, char *err, size_t errlen);
/*
 * The same for a file no reader opens before it is renamed into place (a
 * process's hidden .db.tmp, thrown away whole if the process dies while it
 * is made): written without a journal and without a sync, straight into
 * the file (never twice its size, as through a WAL). Once the file is in
 * place, ct_store_finish_private switches it to WAL with
 * synchronous=NORMAL, as ct_store_create leaves a file: that is the one
 * sync of its making (8 fdatasync before).
 */
struct ct_store *ct_store_create_private(const char *path, char *err, size_t errlen);
/*
 * The same connection on a private file that already holds the schema (the
 * build's image of a new trace file, preload/core/schema_image.h): only
 * the schema's reading is left to SQLite.
 */
struct ct_store *ct_store_open_private(const char *path, char *err, size_t errlen);
int ct_store_finish_private(struct ct_store *st);
/* Opens an existing trace for appending (recovery). */
struct ct_store *ct_store_open(const char *path, char *err, size_t errlen);
void ct_store_close(struct ct_store *st);
const char *ct_store_error(struct ct_store *st);

int ct_store_write_process(struct ct_store *st, const struct ct_process_info *info);
int ct_store_write_env(struct ct_store *st, const struct ct_env_var *vars, size_t n);
int ct_store_write_device(struct ct_store *st, const struct ct_device_info *dev,
                          uint64_t first_seq);
/* Versions of the libraries in use; 0 = unknown (left as it was). */
struct ct_versions {
    int runtime; /* cudaRuntimeGetVersion, 12080 = 12.8 */
    int driver;  /* cuDriverGetVersion */
    int nccl;    /* ncclGetVersion, 22809 = 2.28.9 */
};

int ct_store_set_versions(struct ct_store *st, const struct ct_versions *v);
int ct_store_write_module(struct ct_store *st, const char *path, uint64_t base, uint64_t start,
                          uint64_t end);
/* One loaded object (objects.h), for symbolizing stacks offline. */
int ct_store_write_object(struct ct_store *st, const char *path, const char *build_id,
                          uint64_t base, uint64_t start, uint64_t end, uint64_t first_seq);
int ct_store_set_meta_text(struct ct_store *st, const char *key, const char *value);
int ct_store_set_meta_int(struct ct_store *st, const char *key, int64_t value);

int ct_store_begin(struct ct_store *st);
int ct_store_commit(struct ct_store *st);
/*
 * Inserts one record; a record whose seq is already present is ignored. An
 * auxiliary record (stackrec.h) becomes stack_frames or py_code rows
 * instead (again ignored when present); one that is not valid, or meets a
 * trace without those tables, is dropped.
 */
int ct_store_insert(struct ct_store *st, const struct ct_record *rec);
/*
 * From now on ct_store_insert holds event records and inserts them many rows
 * per statement (a fifth fewer instructions per record): they are in the
 * database only once ct_store_commit returned, and an insert's error may be
 * reported by a later insert or by the commit. For the writer, which commits
 * every few hundred records anyway; recovery, which counts the rows each
 * insert adds, does not use it. A trace older than format 6 stays one row at
 * a time.
 */
int ct_store_batch_events(struct ct_store *st);
/*
 * From now on a commit never checkpoints (SQLite's auto-checkpoint would,
 * inside COMMIT, with two fsyncs that took up to 0.4 s on a busy disk);
 * ct_store_checkpoint_if_due does it, once the WAL has grown as far as
 * SQLite's default lets it, when the caller chooses: the writer, after it
 * has handed the committed records' ring slots back.
 */
void ct_store_defer_checkpoints(struct ct_store *st);
int ct_store_checkpoint_if_due(struct ct_store *st);
/* Folds the WAL into the main file so a reader needs nothing else. */
int ct_store_checkpoint(struct ct_store *st);
/*
 * The process ended: the WAL folded in and the file switched to a rollback
 * journal, so the .db alone holds everything, now and after every later
 * commit (each then checkpointed, if a reader kept the switch from
 * happening). ct_store_unseal goes back to WAL, for a process that goes on.
 */
int ct_store_seal(struct ct_store *st);
int ct_store_unseal(struct ct_store *st);

/* SQLite stores signed 64-bit integers; pointers and sizes travel bit-exact. */
static inline int64_t ct_u64_to_sql(uint64_t v)
{
    int64_t s;
    __builtin_memcpy(&s, &v, sizeof s);
    return s;
}

static inline uint64_t ct_sql_to_u64(int64_t s)
{
    uint64_t v;
    __builtin_memcpy(&v, &s, sizeof v);
    return v;
}

/*
 * The store's connection, for crash recovery (`cutrace recover`): it reads
 * meta and counts the rows its inserts added (sqlite3_total_changes64) inside
 * the transaction it opened with ct_store_begin, with SQL of its own.
 */
struct sqlite3 *ct_store_sqlite(struct ct_store *st);

#endif
