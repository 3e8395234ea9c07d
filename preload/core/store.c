/*
 * store.c - writes trace records and process facts into a trace's SQLite file.
 *
 * The file is opened in WAL mode with synchronous=NORMAL: a commit costs no
 * fsync, and a process killed at any moment leaves a database holding every
 * committed transaction (the WAL is replayed by the next reader). Records
 * are inserted with INSERT OR IGNORE keyed by their sequence number, so
 * recovery may replay a ring that partly overlaps what was committed.
 *
 * A finished trace is sealed: its WAL folded in and the file switched to a
 * rollback journal, so that it is one self-contained file and each later
 * commit (a library destructor's cudaFree, after the tracer's final flush)
 * lands in the .db itself. Where a reader keeps the WAL in use the switch is
 * refused; every later commit is then checkpointed instead.
 */
#include "cutrace/store.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "cutrace/apis.h"
#include "cutrace/schema.h"
#include "cutrace/pylines.h"
#include "cutrace/stackrec.h"

#ifndef CUTRACE_VERSION
#define CUTRACE_VERSION "dev"
#endif

#define CT_STORE_BUSY_MS 2000
/* Rows per batched INSERT: one statement run, cursor and VDBE setup shared
 * by that many rows (about a fifth of an insert's instructions; 32 and 64
 * rows save the same, 16 a little less: writer19.md). */
#define CT_STORE_BATCH  32
#define CT_EVENT_PARAMS 26 /* bound values per events row (EVENT_INSERT_SQL) */

struct ct_store {
    sqlite3 *db;
    sqlite3_stmt *insert_event;
    /* Prepared at the first auxiliary record. A format-4 trace (recovery
     * folds old rings into old traces) has no line tables: the Python
     * statements are then NULL, and frames are stored as format 4 had them. */
    sqlite3_stmt *insert_frame, *insert_code;
    sqlite3_stmt *insert_lines, *append_lines, *find_lines, *set_meta;
    sqlite3_stmt *begin, *commit; /* prepared once: the writer commits every few hundred records */
    /* Batched event inserts (ct_store_batch_events): records held until
     * CT_STORE_BATCH of them go in with one statement of that many rows. */
    sqlite3_stmt *insert_many;
    bool batching;
    bool checkpoints_deferred; /* ct_store_defer_checkpoints: the wal hook only counts */
    int wal_frames;            /* frames in the WAL after the last commit */
    unsigned pending_n;
    struct ct_record pending[CT_STORE_BATCH];
    bool no_stack_tables;        /* an older trace: auxiliary records are dropped */
    bool format4_frames;         /* stack_frames has no instr and entry columns */
    bool checkpoint_each_commit; /* sealed, but still in WAL mode (see above) */
    bool no_ret_seq;             /* events has no ret_seq column (format 5 or older) */
    char error[256];
};

static int fail(struct ct_store *st, int rc, const char *what)
{
    snprintf(st->error, sizeof st->error, "%s: %s", what, st->db ? sqlite3_errmsg(st->db) : "?");
    return rc;
}

const char *ct_store_error(struct ct_store *st)
{
    return st->error;
}

static int exec_sql(struct ct_store *st, const char *sql, const char *what)
{
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : fail(st, rc, what);
}

#define EVENT_INSERT_HEAD                                                                          \
    "INSERT OR IGNORE INTO events(seq, parent_seq, t_ns, dur_ns, wait_ns, tid, api_id, device,"    \
    " result, depth, ptr, size, flags, stream, arg0, arg1, arg2, arg3, arg4, arg5, arg6, arg7,"    \
    " caller, stack_id, handle"
#define EVENT_INSERT_VALUES "?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?"
static const char EVENT_INSERT_SQL[] =
    EVENT_INSERT_HEAD ", ret_seq) VALUES(" EVENT_INSERT_VALUES ",?)";
/* A trace of format 5 or older (recovery folds old rings into old traces). */
static const char EVENT_INSERT_SQL_FORMAT5[] =
    EVENT_INSERT_HEAD ") VALUES(" EVENT_INSERT_VALUES ")";

static struct ct_store *open_db(const char *path, const char *pragmas, char *err, size_t errlen)
{
    struct ct_store *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* NOFOLLOW: a symlink planted at the trace path is refused, never followed. */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW;
    int rc = sqlite3_open_v2(path, &st->db, flags, NULL);
    /* Someone holding the file locked (a reader's long transaction) is waited for, briefly. */
    if (rc == SQLITE_OK)
        sqlite3_busy_timeout(st->db, CT_STORE_BUSY_MS);
    if (rc == SQLITE_OK)
        rc = exec_sql(st, pragmas, "pragmas");
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, st->db ? sqlite3_errmsg(st->db) : "cannot open");
        sqlite3_close(st->db);
        free(st);
        return NULL;
    }
    return st;
}

static int prepare_insert(struct ct_store *st)
{
    int rc = sqlite3_prepare_v3(st->db, EVENT_INSERT_SQL, -1, SQLITE_PREPARE_PERSISTENT,
                                &st->insert_event, NULL);
    if (rc == SQLITE_ERROR) { /* no such column: an older trace */
        st->no_ret_seq = true;
        rc = sqlite3_prepare_v3(st->db, EVENT_INSERT_SQL_FORMAT5, -1, SQLITE_PREPARE_PERSISTENT,
                                &st->insert_event, NULL);
    }
    return rc == SQLITE_OK ? 0 : fail(st, rc, "prepare insert");
}

static int write_apis(struct ct_store *st)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(st->db, "INSERT INTO apis VALUES(?,?,?,?,?,?)", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return fail(st, rc, "prepare apis");
    for (int id = 1; id < CT_API_COUNT && rc == SQLITE_OK; id++) {
        const struct ct_api_info *a = &ct_api_table[id];
        sqlite3_bind_int(s, 1, id);
        sqlite3_bind_text(s, 2, a->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, a->layer, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, a->role, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 5, a->space, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 6, a->kind, -1, SQLITE_STATIC);
        rc = sqlite3_step(s) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(st->db);
        sqlite3_reset(s);
    }
    sqlite3_finalize(s);
    return rc == SQLITE_OK ? 0 : fail(st, rc, "write apis");
}

#define CT_STORE_PRAGMAS "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"

/* Schema, api table and the first meta rows, in one transaction. */
static int write_schema(struct ct_store *st)
{
    int rc = exec_sql(st, "BEGIN", "begin");
    if (!rc)
        rc = exec_sql(st, CT_SCHEMA_SQL, "create schema");
    if (!rc)
        rc = write_apis(st);
    if (!rc)
        rc = ct_store_set_meta_text(st, "schema", CT_SCHEMA_NAME);
    if (!rc)
        rc = ct_store_set_meta_int(st, "format_version", CT_FORMAT_VERSION);
    if (!rc)
        rc = ct_store_set_meta_text(st, "producer", "libcutrace " CUTRACE_VERSION);
    if (!rc)
        rc = ct_store_set_meta_text(st, "end_state", "running");
    if (!rc)
        rc = exec_sql(st, "COMMIT", "commit schema");
    return rc;
}

static int set_journal_mode(struct ct_store *st, const char *mode, char *now, size_t cap);

/* A private file is thrown away whole if the process dies while it is
 * made (a leftover .db.tmp): it needs neither a journal nor a sync. */
#define PRIVATE_PRAGMAS "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"

static struct ct_store *create(const char *path, bool private, char *err, size_t errlen)
{
    struct ct_store *st = open_db(path, private ? PRIVATE_PRAGMAS : CT_STORE_PRAGMAS, err, errlen);
    if (!st)
        return NULL;
    int rc = write_schema(st);
    if (!rc)
        rc = prepare_insert(st);
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, st->error);
        ct_store_close(st);
        return NULL;
    }
    return st;
}

struct ct_store *ct_store_create(const char *path, char *err, size_t errlen)
{
    return create(path, false, err, errlen);
}

struct ct_store *ct_store_create_private(const char *path, char *err, size_t errlen)
{
    return create(path, true, err, errlen);
}

struct ct_store *ct_store_open_private(const char *path, char *err, size_t errlen)
{
    struct ct_store *st = open_db(path, PRIVATE_PRAGMAS, err, errlen);
    if (st && prepare_insert(st)) { /* the schema's one reading */
        snprintf(err, errlen, "%s: %s", path, st->error);
        ct_store_close(st);
        return NULL;
    }
    return st;
}

int ct_store_finish_private(struct ct_store *st)
{
    /* The switch's own commit syncs the file (no journal: the file alone). */
    char mode[16] = "";
    int rc = exec_sql(st, "PRAGMA synchronous=NORMAL", "synchronous");
    if (!rc)
        rc = set_journal_mode(st, "WAL", mode, sizeof mode);
    if (!rc && strcmp(mode, "wal") != 0)
        rc = fail(st, SQLITE_ERROR, "journal mode wal");
    return rc;
}

struct ct_store *ct_store_open(const char *path, char *err, size_t errlen)
{
    struct ct_store *st = open_db(path, CT_STORE_PRAGMAS, err, errlen);
    if (st && prepare_insert(st)) {
        snprintf(err, errlen, "%s: %s", path, st->error);
        ct_store_close(st);
        return NULL;
    }
    return st;
}

void ct_store_close(struct ct_store *st)
{
    if (!st)
        return;
    sqlite3_finalize(st->insert_event);
    sqlite3_finalize(st->insert_frame);
    sqlite3_finalize(st->insert_code);
    sqlite3_finalize(st->insert_lines);
    sqlite3_finalize(st->append_lines);
    sqlite3_finalize(st->find_lines);
    sqlite3_finalize(st->set_meta);
    sqlite3_finalize(st->begin);
    sqlite3_finalize(st->commit);
    sqlite3_finalize(st->insert_many);
    sqlite3_close(st->db);
    free(st);
}

static int step_done(struct ct_store *st, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);
    int out = (rc == SQLITE_DONE) ? 0 : fail(st, rc, what);
    sqlite3_finalize(s);
    return out;
}

static int prepare(struct ct_store *st, const char *sql, sqlite3_stmt **s)
{
    int rc = sqlite3_prepare_v2(st->db, sql, -1, s, NULL);
    return rc == SQLITE_OK ? 0 : fail(st, rc, sql);
}

int ct_store_set_meta_text(struct ct_store *st, const char *key, const char *value)
{
    sqlite3_stmt *s;
    int rc = prepare(st, "INSERT OR REPLACE INTO meta VALUES(?, ?)", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, value, -1, SQLITE_STATIC);
    return step_done(st, s, "write meta");
}

int ct_store_set_meta_int(struct ct_store *st, const char *key, int64_t value)
{
    sqlite3_stmt *s;
    int rc = prepare(st, "INSERT OR REPLACE INTO meta VALUES(?, ?)", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, value);
    return step_done(st, s, "write meta");
}

/* Depth 1 is the parent. A process without ancestors writes nothing, so a
 * trace of an older format (recovery) never needs the table. */
static int write_ancestors(struct ct_store *st, const struct ct_process_info *p)
{
    assert(p->nancestors <= CT_ANCESTORS_MAX);
    if (p->nancestors == 0)
        return 0;
    sqlite3_stmt *s;
    int rc =
        prepare(st, "INSERT INTO ancestors(depth, pid, start_ticks, cmdline) VALUES(?,?,?,?)", &s);
    for (size_t i = 0; !rc && i < p->nancestors; i++) {
        const struct ct_ancestor *a = &p->ancestors[i];
        sqlite3_bind_int64(s, 1, (int64_t)i + 1);
        sqlite3_bind_int64(s, 2, a->pid);
        sqlite3_bind_int64(s, 3, a->start_ticks);
        sqlite3_bind_text(s, 4, a->cmdline ? a->cmdline : "", -1, SQLITE_STATIC);
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = fail(st, sqlite3_errcode(st->db), "write ancestors");
        sqlite3_reset(s);
    }
    if (s)
        sqlite3_finalize(s);
    return rc;
}

int ct_store_write_process(struct ct_store *st, const struct ct_process_info *p)
{
    sqlite3_stmt *s;
    int rc = prepare(st,
                     "INSERT INTO process(pid, ppid, host, cmdline, start_wall_ns, start_mono_ns,"
                     " exe, boot_id, uid) VALUES(?,?,?,?,?,?,?,?,?)",
                     &s);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, p->pid);
    sqlite3_bind_int64(s, 2, p->ppid);
    sqlite3_bind_text(s, 3, p->host, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, p->cmdline ? p->cmdline : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, ct_u64_to_sql(p->start_wall_ns));
    sqlite3_bind_int64(s, 6, ct_u64_to_sql(p->start_mono_ns));
    sqlite3_bind_text(s, 7, p->exe, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 8, p->boot_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 9, p->uid);
    rc = step_done(st, s, "write process");
    return rc ? rc : write_ancestors(st, p);
}

int ct_store_write_env(struct ct_store *st, const struct ct_env_var *vars, size_t n)
{
    sqlite3_stmt *s;
    int rc = prepare(st, "INSERT OR REPLACE INTO env VALUES(?, ?)", &s);
    for (size_t i = 0; !rc && i < n; i++) {
        sqlite3_bind_text(s, 1, vars[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, vars[i].value, -1, SQLITE_STATIC);
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = fail(st, sqlite3_errcode(st->db), "write env");
        sqlite3_reset(s);
    }
    if (s)
        sqlite3_finalize(s);
    return rc;
}

int ct_store_write_device(struct ct_store *st, const struct ct_device_info *d, uint64_t first_seq)
{
    sqlite3_stmt *s;
    int rc = prepare(st, "INSERT OR REPLACE INTO devices VALUES(?,?,?,?,?,?)", &s);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 1, d->device);
    sqlite3_bind_text(s, 2, d->uuid, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, d->pci_bus_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, d->name, -1, SQLITE_STATIC);
    if (d->total_bytes)
        sqlite3_bind_int64(s, 5, ct_u64_to_sql(d->total_bytes));
    sqlite3_bind_int64(s, 6, ct_u64_to_sql(first_seq));
    return step_done(st, s, "write device");
}

int ct_store_set_versions(struct ct_store *st, const struct ct_versions *v)
{
    sqlite3_stmt *s;
    int rc = prepare(st,
                     "UPDATE process SET cuda_runtime_version = coalesce(?, cuda_runtime_version),"
                     " cuda_driver_version = coalesce(?, cuda_driver_version),"
                     " nccl_version = coalesce(?, nccl_version)",
                     &s);
    if (rc)
        return rc;
    int values[] = {v->runtime, v->driver, v->nccl};
    for (int i = 0; i < 3; i++) {
        if (values[i] > 0)
            sqlite3_bind_int(s, i + 1, values[i]);
    }
    return step_done(st, s, "write versions");
}

int ct_store_write_module(struct ct_store *st, const char *path, uint64_t base, uint64_t start,
                          uint64_t end)
{
    sqlite3_stmt *s;
    int rc =
        prepare(st, "INSERT INTO modules(path, base, start_addr, end_addr) VALUES(?,?,?,?)", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, ct_u64_to_sql(base));
    sqlite3_bind_int64(s, 3, ct_u64_to_sql(start));
    sqlite3_bind_int64(s, 4, ct_u64_to_sql(end));
    return step_done(st, s, "write module");
}

int ct_store_write_object(struct ct_store *st, const char *path, const char *build_id,
                          uint64_t base, uint64_t start, uint64_t end, uint64_t first_seq)
{
    sqlite3_stmt *s;
    int rc = prepare(st,
                     "INSERT INTO loaded_modules(path, build_id, base, start_addr, end_addr,"
                     " first_seq) VALUES(?,?,?,?,?,?)",
                     &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
    if (build_id && *build_id)
        sqlite3_bind_text(s, 2, build_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, ct_u64_to_sql(base));
    sqlite3_bind_int64(s, 4, ct_u64_to_sql(start));
    sqlite3_bind_int64(s, 5, ct_u64_to_sql(end));
    sqlite3_bind_int64(s, 6, ct_u64_to_sql(first_seq));
    return step_done(st, s, "write loaded module");
}

static int flush_pending(struct ct_store *st);
static bool busy(int rc);

/* BEGIN and COMMIT as kept statements: sqlite3_exec would parse them at
 * every commit, which the writer makes every CT_COMMIT_STEP records. */
static int step_kept(struct ct_store *st, sqlite3_stmt **s, const char *sql, const char *what)
{
    int rc =
        *s ? SQLITE_OK : sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, s, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(*s);
        sqlite3_reset(*s);
    }
    return rc == SQLITE_DONE ? 0 : fail(st, rc, what);
}

int ct_store_begin(struct ct_store *st)
{
    return step_kept(st, &st->begin, "BEGIN", "begin");
}

int ct_store_commit(struct ct_store *st)
{
    int rc = flush_pending(st);
    if (!rc)
        rc = step_kept(st, &st->commit, "COMMIT", "commit");
    /* The transaction is durable in the WAL already: a checkpoint a reader
     * holds back only leaves part of it there, as before the seal. */
    if (!rc && st->checkpoint_each_commit)
        sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return rc;
}

/* A statement kept for the trace's life; the SQLite code, unrecorded. */
static int prepare_kept(struct ct_store *st, const char *sql, sqlite3_stmt **out)
{
    return sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL);
}

/* The statements for auxiliary records, by what the trace's schema has. */
static int prepare_aux(struct ct_store *st)
{
    if (st->insert_frame || st->no_stack_tables)
        return 0;
    int rc = prepare_kept(
        st,
        "INSERT OR IGNORE INTO stack_frames(stack_id, depth, kind, value, instr, entry)"
        " VALUES(?,?,?,?,?,?)",
        &st->insert_frame);
    if (rc == SQLITE_ERROR) { /* a format-4 trace */
        st->format4_frames = true;
        rc = prepare_kept(st,
                          "INSERT OR IGNORE INTO stack_frames(stack_id, depth, kind, value)"
                          " VALUES(?,?,?,?)",
                          &st->insert_frame);
    }
    if (rc == SQLITE_OK)
        rc =
            prepare_kept(st, "INSERT OR IGNORE INTO py_code(code_id, function, file) VALUES(?,?,?)",
                         &st->insert_code);
    if (rc == SQLITE_ERROR) { /* no such table: a trace of format 3 or older */
        sqlite3_finalize(st->insert_frame);
        sqlite3_finalize(st->insert_code);
        st->insert_frame = st->insert_code = NULL;
        st->no_stack_tables = true;
        return 0;
    }
    if (rc == SQLITE_OK && !st->format4_frames) {
        rc = prepare_kept(
            st,
            "INSERT OR IGNORE INTO py_linetables(code_id, format, first_line, size, bytes)"
            " VALUES(?,?,?,?,x'')",
            &st->insert_lines);
        /* A chunk lands only right after the previous one: a repeated or
         * lost chunk leaves the table cut, never garbled. (|| works on text:
         * the casts keep the bytes, NULs included, a blob.) */
        if (rc == SQLITE_OK)
            rc = prepare_kept(st,
                              "UPDATE py_linetables SET bytes = CAST(bytes || ?2 AS BLOB)"
                              " WHERE code_id = ?1 AND length(CAST(bytes AS BLOB)) = ?3",
                              &st->append_lines);
        if (rc == SQLITE_OK)
            rc = prepare_kept(
                st, "SELECT format, first_line, bytes FROM py_linetables WHERE code_id = ?",
                &st->find_lines);
    }
    if (rc == SQLITE_OK)
        rc =
            prepare_kept(st, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", &st->set_meta);
    return rc == SQLITE_OK ? 0 : fail(st, rc, "prepare stack insert");
}

static int step_reset(struct ct_store *st, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : fail(st, rc, what);
}

/* A Python frame's line from its code's line table (0: none known). */
static int64_t frame_line(struct ct_store *st, uint64_t code_id, uint32_t offset)
{
    if (!st->find_lines)
        return 0;
    sqlite3_stmt *q = st->find_lines;
    sqlite3_bind_int64(q, 1, ct_u64_to_sql(code_id));
    int64_t line = 0;
    if (sqlite3_step(q) == SQLITE_ROW)
        line =
            ct_pylines_line((unsigned)sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1),
                            sqlite3_column_blob(q, 2), (size_t)sqlite3_column_bytes(q, 2), offset);
    sqlite3_reset(q);
    return line > 0 && line <= UINT32_MAX ? line : 0;
}

static int insert_frames(struct ct_store *st, const struct ct_aux_record *a)
{
    sqlite3_stmt *s = st->insert_frame;
    for (unsigned i = 0; i < a->count; i++) {
        unsigned depth = a->first + i;
        uint64_t v = ct_aux_frame(a, i);
        bool python = depth >= a->native;
        sqlite3_bind_int64(s, 1, ct_u64_to_sql(a->key));
        sqlite3_bind_int(s, 2, (int)depth);
        sqlite3_bind_int(s, 3, python ? 1 : 0);
        if (!python) {
            sqlite3_bind_int64(s, 4, ct_u64_to_sql(v));
        } else {
            /* Stored as (code id << 32) | line, whichever way it was read. */
            uint32_t low = (uint32_t)v;
            uint64_t code = v >> 32;
            int64_t line = low & CT_PYFRAME_VALUE_MASK;
            if (low & CT_PYFRAME_INSTR)
                line = frame_line(st, code, low & CT_PYFRAME_VALUE_MASK);
            sqlite3_bind_int64(s, 4, ct_u64_to_sql(code << 32 | (uint64_t)line));
        }
        if (!st->format4_frames) {
            if (python && (ct_aux_frame(a, i) & CT_PYFRAME_INSTR)) {
                sqlite3_bind_int64(s, 5, (int64_t)(v & CT_PYFRAME_VALUE_MASK));
                sqlite3_bind_int(s, 6, (v & CT_PYFRAME_ENTRY) ? 1 : 0);
            } else {
                sqlite3_bind_null(s, 5);
                sqlite3_bind_null(s, 6);
            }
        }
        int rc = step_reset(st, s, "insert stack frame");
        if (rc)
            return rc;
    }
    return 0;
}

static int insert_code(struct ct_store *st, const struct ct_aux_record *a)
{
    char text[CT_AUX_PAYLOAD_BYTES];
    ct_aux_get_bytes(a, 0, text, (unsigned)a->count + a->total);
    sqlite3_stmt *s = st->insert_code;
    sqlite3_bind_int64(s, 1, ct_u64_to_sql(a->key));
    sqlite3_bind_text(s, 2, text, a->count, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 3, text + a->count, a->total, SQLITE_TRANSIENT);
    int rc = step_reset(st, s, "insert python code");
    if (rc || a->extra[2] == CT_PYLINES_NONE || !st->insert_lines)
        return rc;
    s = st->insert_lines;
    sqlite3_bind_int64(s, 1, ct_u64_to_sql(a->key));
    sqlite3_bind_int(s, 2, a->extra[2]);
    sqlite3_bind_int64(s, 3, ct_aux_pycode_first_line(a));
    sqlite3_bind_int(s, 4, a->first);
    return step_reset(st, s, "insert python line table");
}

static int append_lines(struct ct_store *st, const struct ct_aux_record *a)
{
    if (!st->append_lines)
        return 0;
    uint8_t bytes[CT_AUX_PAYLOAD_BYTES];
    ct_aux_get_bytes(a, 0, bytes, a->count);
    sqlite3_stmt *s = st->append_lines;
    sqlite3_bind_int64(s, 1, ct_u64_to_sql(a->key));
    sqlite3_bind_blob(s, 2, bytes, a->count, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 3, a->first);
    return step_reset(st, s, "append python line table");
}

static int insert_meta(struct ct_store *st, const struct ct_aux_record *a)
{
    char text[CT_AUX_PAYLOAD_BYTES];
    ct_aux_get_bytes(a, 0, text, (unsigned)a->count + a->total);
    sqlite3_stmt *s = st->set_meta;
    sqlite3_bind_text(s, 1, text, a->count, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, text + a->count, a->total, SQLITE_TRANSIENT);
    return step_reset(st, s, "set meta");
}

static int insert_aux(struct ct_store *st, const struct ct_record *r)
{
    struct ct_aux_record a;
    memcpy(&a, r, sizeof a);
    if (!ct_aux_valid(&a))
        return 0;
    int rc = prepare_aux(st);
    if (rc || st->no_stack_tables)
        return rc;
    switch (a.kind) {
    case CT_AUX_FRAMES:
        return insert_frames(st, &a);
    case CT_AUX_PYCODE:
        return insert_code(st, &a);
    case CT_AUX_PYLINES:
        return append_lines(st, &a);
    case CT_AUX_META:
        return insert_meta(st, &a);
    }
    return 0;
}

/* Binds *r as the events row whose first parameter is `col`; returns the next one. */
static int bind_event(struct ct_store *st, sqlite3_stmt *s, int col, const struct ct_record *r)
{
    assert(r->seq > 0);
    /* In the column order of EVENT_INSERT_SQL. */
    int64_t head[] = {
        ct_u64_to_sql(r->seq),
        ct_u64_to_sql(r->parent_seq),
        ct_u64_to_sql(r->t_ns),
        ct_u64_to_sql(r->dur_ns),
        ct_u64_to_sql(r->wait_ns),
        r->tid,
        r->api,
        r->device,
        r->result,
        r->depth,
        ct_u64_to_sql(r->ptr),
        ct_u64_to_sql(r->size),
        ct_u64_to_sql(r->flags),
        ct_u64_to_sql(r->stream),
    };
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        sqlite3_bind_int64(s, col++, head[i]);
    for (int i = 0; i < CT_RECORD_ARGS; i++)
        sqlite3_bind_int64(s, col++, ct_u64_to_sql(r->arg[i]));
    sqlite3_bind_int64(s, col++, ct_u64_to_sql(r->caller));
    sqlite3_bind_int64(s, col++, ct_u64_to_sql(r->stack_id));
    /* Static: the record outlives the statement's step (the caller's, or pending[]). */
    if (r->has_handle)
        sqlite3_bind_blob(s, col++, r->handle, CT_IPC_HANDLE_BYTES, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, col++);
    /* Rings before 6 leave it 0: the call's effect is then placed at its seq. */
    if (!st->no_ret_seq)
        sqlite3_bind_int64(s, col++, ct_u64_to_sql(r->ret_seq > r->seq ? r->ret_seq : r->seq));
    return col;
}

static int insert_one(struct ct_store *st, const struct ct_record *r)
{
    sqlite3_stmt *s = st->insert_event;
    assert(s);
    int col = bind_event(st, s, 1, r);
    assert(col - 1 == sqlite3_bind_parameter_count(s));
    (void)col;
    return step_reset(st, s, "insert event");
}

/* The pending records, CT_STORE_BATCH rows at once or one by one for fewer. */
static int flush_pending(struct ct_store *st)
{
    unsigned n = st->pending_n;
    st->pending_n = 0;
    if (n < CT_STORE_BATCH) {
        for (unsigned i = 0; i < n; i++) {
            int rc = insert_one(st, &st->pending[i]);
            if (rc)
                return rc;
        }
        return 0;
    }
    sqlite3_stmt *s = st->insert_many;
    int col = 1;
    for (unsigned i = 0; i < n; i++)
        col = bind_event(st, s, col, &st->pending[i]);
    assert(col - 1 == sqlite3_bind_parameter_count(s));
    return step_reset(st, s, "insert events");
}

/* SQLite's own auto-checkpoint threshold, in WAL frames (pages). */
#define CT_STORE_CHECKPOINT_FRAMES 1000

static int count_wal_frames(void *arg, sqlite3 *db, const char *name, int frames)
{
    (void)db;
    (void)name;
    struct ct_store *st = arg;
    st->wal_frames = frames;
    return SQLITE_OK;
}

void ct_store_defer_checkpoints(struct ct_store *st)
{
    /* Replaces the auto-checkpoint, which SQLite runs inside COMMIT. */
    sqlite3_wal_hook(st->db, count_wal_frames, st);
    st->checkpoints_deferred = true;
}

int ct_store_checkpoint_if_due(struct ct_store *st)
{
    if (!st->checkpoints_deferred || st->wal_frames < CT_STORE_CHECKPOINT_FRAMES)
        return 0;
    st->wal_frames = 0;
    /* PASSIVE, as the auto-checkpoint: a reader holding the WAL only
     * leaves part of it there for the next one. */
    int rc = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return rc == SQLITE_OK || busy(rc) ? 0 : fail(st, rc, "checkpoint");
}

int ct_store_batch_events(struct ct_store *st)
{
    if (st->batching || st->no_ret_seq)
        return 0; /* an older trace: one row at a time, as it always was */
    /* EVENT_INSERT_SQL with CT_STORE_BATCH rows of values. */
    static const char row[] = "(" EVENT_INSERT_VALUES ",?)";
    char sql[sizeof EVENT_INSERT_HEAD + 32 + CT_STORE_BATCH * sizeof row];
    int len = snprintf(sql, sizeof sql, "%s, ret_seq) VALUES", EVENT_INSERT_HEAD);
    for (unsigned i = 0; i < CT_STORE_BATCH; i++)
        len += snprintf(sql + len, sizeof sql - (size_t)len, "%s%s", i ? "," : "", row);
    assert((size_t)len < sizeof sql);
    int rc = prepare_kept(st, sql, &st->insert_many);
    if (rc != SQLITE_OK)
        return fail(st, rc, "prepare batched insert");
    assert(sqlite3_bind_parameter_count(st->insert_many) == CT_STORE_BATCH * CT_EVENT_PARAMS);
    st->batching = true;
    return 0;
}

int ct_store_insert(struct ct_store *st, const struct ct_record *r)
{
    if (ct_record_is_aux(r))
        return insert_aux(st, r);
    if (!st->batching)
        return insert_one(st, r);
    assert(r->seq > 0 && st->pending_n < CT_STORE_BATCH);
    memcpy(&st->pending[st->pending_n++], r, sizeof *r);
    return st->pending_n == CT_STORE_BATCH ? flush_pending(st) : 0;
}

int ct_store_checkpoint(struct ct_store *st)
{
    int rc = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    return rc == SQLITE_OK ? 0 : fail(st, rc, "checkpoint");
}

/* journal_mode=<mode>; *now is what SQLite says the mode is afterwards. */
static int set_journal_mode(struct ct_store *st, const char *mode, char *now, size_t cap)
{
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", mode);
    sqlite3_stmt *s;
    int rc = prepare(st, sql, &s);
    if (rc)
        return rc;
    rc = sqlite3_step(s);
    const unsigned char *v = rc == SQLITE_ROW ? sqlite3_column_text(s, 0) : NULL;
    snprintf(now, cap, "%s", v ? (const char *)v : "");
    rc = rc == SQLITE_ROW ? SQLITE_OK : fail(st, rc, "journal mode");
    sqlite3_finalize(s);
    return rc;
}

static bool busy(int rc)
{
    return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

int ct_store_seal(struct ct_store *st)
{
    char mode[16] = "";
    int rc = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    if (rc != SQLITE_OK)
        rc = fail(st, rc, "checkpoint");
    else
        rc = set_journal_mode(st, "DELETE", mode, sizeof mode);
    /* Still in WAL (a reader, or no room to fold it in): later commits try again. */
    st->checkpoint_each_commit = strcmp(mode, "delete") != 0;
    return busy(rc) ? 0 : rc;
}

int ct_store_unseal(struct ct_store *st)
{
    char mode[16];
    st->checkpoint_each_commit = false;
    int rc = set_journal_mode(st, "WAL", mode, sizeof mode);
    if (!rc && strcmp(mode, "wal") != 0)
        rc = fail(st, SQLITE_ERROR, "journal mode wal");
    return rc;
}

struct sqlite3 *ct_store_sqlite(struct ct_store *st)
{
    return st->db;
}
