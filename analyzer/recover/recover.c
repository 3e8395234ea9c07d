/*
 * recover.c - folds the .ring crash buffers of killed processes into their
 * traces (see recover.h for the steps and who calls them).
 *
 * A ring file is untrusted input like a trace: it may be truncated, damaged
 * or forged. Every header field is checked before it is used, the file is
 * mapped PROT_READ and MAP_PRIVATE (recovery never writes to a ring), and
 * each record is checked (seq, api id) before it reaches the database, so
 * that a bad ring is refused as a whole instead of leaving wrong numbers in
 * a trace. Problems with the ring or its database are bad input
 * (RECOVER_BAD); failures to write an otherwise sound trace (read-only
 * directory, full disk) are RECOVER_NOT_FOLDED, which reports may survive.
 */
#include "recover/recover.h"

#include "cli.h"
#include "recover/inflight.h"
#include "recover/leftovers.h"
#include "recover/owner.h"
#include "model/trace.h"

#include "cutrace/ring.h"
#include "cutrace/stackrec.h"
#include "cutrace/store.h"
#include "cutrace/apis.h"
#include "cutrace/format.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * The largest ring accepted, in slots. libcutrace makes at most 2^21
 * (CUTRACE_BUFFER_MB=1024); 2^24 leaves room for a larger limit later while
 * a sparse file that claims billions of slots is refused instead of being
 * scanned for minutes.
 */
#define RECOVER_MAX_CAPACITY (UINT64_C(1) << 24)

#define API_BITMAP_BYTES (1u << 13) /* one bit per uint16_t api id */

/* Columns ct_store_insert writes: a trace without them cannot take records.
 * ret_seq (format 6) is not among them: a format-5 trace takes records
 * without it, as that format had them. */
static const char *const event_columns[] = {
    "seq",    "parent_seq", "t_ns",  "dur_ns", "wait_ns", "tid",      "api_id",
    "device", "result",     "depth", "ptr",    "size",    "flags",    "stream",
    "arg0",   "arg1",       "arg2",  "arg3",   "caller",  "stack_id", "handle",
};

static enum recover_status set_problem(struct recover_result *r, enum recover_status status,
                                       const char *path, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

static enum recover_status set_problem(struct recover_result *r, enum recover_status status,
                                       const char *path, const char *fmt, va_list ap)
{
    r->status = status;
    free(r->error_path);
    r->error_path = xstrdup(path);
    vsnprintf(r->error, sizeof(r->error), fmt, ap);
    /* Messages quote header fields and SQLite's words: keep them one line. */
    for (char *c = r->error; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    return status;
}

/* Bad input: the ring, or the trace it belongs to, cannot be used. */
static enum recover_status bad(struct recover_result *r, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum recover_status bad(struct recover_result *r, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_problem(r, RECOVER_BAD, path, fmt, ap);
    va_end(ap);
    return RECOVER_BAD;
}

/* A sound ring whose records could not be written out (left in place). */
static enum recover_status not_folded(struct recover_result *r, bool read_only, const char *fmt,
                                      ...) __attribute__((format(printf, 3, 4)));
static enum recover_status not_folded(struct recover_result *r, bool read_only, const char *fmt,
                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_problem(r, RECOVER_NOT_FOLDED, r->ring_path, fmt, ap);
    va_end(ap);
    r->read_only = read_only;
    return RECOVER_NOT_FOLDED;
}

void recover_result_free(struct recover_result *r)
{
    free(r->ring_path);
    free(r->db_path);
    free(r->error_path);
    free(r->boot_id);
    free(r->writer_error);
    free(r->end_state_before);
    free(r->end_state);
    free(r->unlink_error);
    memset(r, 0, sizeof(*r));
}

/* ---- the header ---- */

/* Why a text field of the header cannot be used, or NULL: it must end
 * inside its array, and it ends up in file names, messages and the trace. */
static const char *text_problem(const char *field, size_t cap)
{
    const char *end = memchr(field, '\0', cap);
    if (!end)
        return "is not NUL-terminated";
    for (const char *c = field; c < end; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return "has control characters";
    return NULL;
}

static enum recover_status check_header(struct recover_result *r, const struct ct_ring_header *h,
                                        uint64_t file_size)
{
    const char *path = r->ring_path;
    if (memcmp(h->magic, CT_RING_MAGIC, sizeof(h->magic)) != 0)
        return bad(r, path, "not a cutrace ring (bad magic)");
    if (h->version > CT_RING_VERSION)
        return bad(r, path,
                   "ring written by a newer cutrace (ring format %" PRIu32 ", this build reads %d)",
                   h->version, CT_RING_VERSION);
    if (h->version < CT_RING_VERSION_OLDEST)
        return bad(r, path,
                   "ring written by an older cutrace (ring format %" PRIu32
                   ", this build reads %d); recover it with that version",
                   h->version, CT_RING_VERSION);
    if (h->slot_size != sizeof(struct ct_slot))
        return bad(r, path, "corrupt ring: slot size %" PRIu32 ", expected %zu", h->slot_size,
                   sizeof(struct ct_slot));
    uint64_t cap = h->capacity;
    if (cap < 2 || (cap & (cap - 1)) != 0)
        return bad(r, path, "corrupt ring: capacity %" PRIu64 " is not a power of two", cap);
    if (cap > RECOVER_MAX_CAPACITY)
        return bad(r, path, "corrupt ring: capacity %" PRIu64 " slots is more than cutrace writes",
                   cap);
    /* No overflow: cap <= 2^24. Ring 7 keeps its marks after the slots. */
    size_t slots_need = ct_ring_file_bytes(6, cap), need = ct_ring_file_bytes(h->version, cap);
    if (file_size < need && need == slots_need)
        return bad(r, path, "truncated ring (%" PRIu64 " bytes; its %" PRIu64 " slots need %zu)",
                   file_size, cap, need);
    if (file_size < need)
        return bad(r, path,
                   "truncated ring (%" PRIu64 " bytes; its %" PRIu64 " slots need %zu), %zu with "
                   "its %d entered marks",
                   file_size, cap, slots_need, need, CT_RING_MARKS);

    const char *why = text_problem(h->db_name, sizeof(h->db_name));
    if (why)
        return bad(r, path, "corrupt ring: its db_name %s", why);
    size_t len = strlen(h->db_name);
    if (strchr(h->db_name, '/') || strcmp(h->db_name, ".") == 0 || strcmp(h->db_name, "..") == 0)
        return bad(r, path, "corrupt ring: db_name '%s' is not a file name in its directory",
                   h->db_name);
    if (len <= 3 || strcmp(h->db_name + len - 3, ".db") != 0)
        return bad(r, path, "corrupt ring: db_name '%.64s' is not a *.db file name", h->db_name);
    if ((why = text_problem(h->boot_id, sizeof(h->boot_id))) != NULL)
        return bad(r, path, "corrupt ring: its boot_id %s", why);
    if ((why = text_problem(h->end_state, sizeof(h->end_state))) != NULL)
        return bad(r, path, "corrupt ring: its end_state %s", why);
    if (!memchr(h->writer_error, '\0', sizeof(h->writer_error)))
        return bad(r, path, "corrupt ring: its writer_error is not NUL-terminated");
    /* Linux pids are positive and fit an int; anything else is not one. */
    if (h->pid <= 0 || h->pid > INT32_MAX)
        return bad(r, path, "corrupt ring: pid %" PRId64 " is not a process id", h->pid);
    if (h->writer_error[0] && h->writer_stopped_after > INT64_MAX)
        return bad(r, path, "corrupt ring: writer_stopped_after %" PRIu64 " is not a seq",
                   h->writer_stopped_after);
    if (h->version >= 6 && h->dropped > INT64_MAX)
        return bad(r, path, "corrupt ring: %" PRIu64 " dropped records is not a count", h->dropped);
    return RECOVER_FOLDED; /* meaning: no problem so far */
}

/* Copies what the header says about its process into r. */
static void take_header(struct recover_result *r, const struct ct_ring_header *h)
{
    r->has_header = true;
    r->pid = h->pid;
    r->start_wall_ns = h->start_wall_ns;
    r->start_mono_ns = h->start_mono_ns;
    r->boot_id = xstrdup(h->boot_id);
    if (h->writer_error[0]) {
        /* Free text (strerror, SQLite's words): kept, one line. */
        r->writer_error = xstrdup(h->writer_error);
        for (char *c = r->writer_error; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = ' ';
        r->writer_stopped_after = (int64_t)h->writer_stopped_after;
    }
    /* Ring 5 and older have no count there (their bytes are zero). */
    r->dropped = h->version >= 6 ? (int64_t)h->dropped : 0;
    const char *slash = strrchr(r->ring_path, '/');
    size_t dir_len = slash ? (size_t)(slash - r->ring_path) + 1 : 0;
    r->db_path = xasprintf("%.*s%s", (int)dir_len, r->ring_path, h->db_name);
}

/* ---- the records ---- */

static void api_mark(uint8_t *apis, int64_t api)
{
    if (api >= 0 && api <= UINT16_MAX)
        apis[api >> 3] |= (uint8_t)(1u << (api & 7));
}

struct record_check {
    const uint8_t *apis; /* the trace's apis table, as a bitmap */
    uint64_t count;      /* calls; auxiliary records (stacks) are not counted */
    bool bad;
    uint64_t bad_seq;
    unsigned bad_api;
    bool bad_is_api;
};

/* One record as recovery may use it: 1 <= seq <= INT64_MAX (SQLite's
 * integers are signed; seq starts at 1) and an api the trace names. */
static bool record_ok(struct record_check *c, const struct ct_record *rec)
{
    if (ct_record_is_aux(rec)) {
        struct ct_aux_record aux;
        memcpy(&aux, rec, sizeof(aux));
        if (ct_aux_valid(&aux))
            return true;
    }
    if (rec->seq == 0 || rec->seq > INT64_MAX) {
        if (!c->bad) {
            c->bad = true;
            c->bad_seq = rec->seq;
        }
        return false;
    }
    if (!inflight_api_known(c->apis, rec->api)) {
        if (!c->bad) {
            c->bad = true;
            c->bad_is_api = true;
            c->bad_seq = rec->seq;
            c->bad_api = rec->api;
        }
        return false;
    }
    return true;
}

static void check_record(const struct ct_record *rec, void *arg)
{
    struct record_check *c = arg;
    /* A copy: the mapping is private but its pages are the file's until touched. */
    struct ct_record copy;
    memcpy(&copy, rec, sizeof(copy));
    if (record_ok(c, &copy) && !ct_record_is_aux(&copy))
        c->count++;
}

static enum recover_status bad_record(struct recover_result *r, const struct record_check *c)
{
    if (c->bad_is_api)
        return bad(r, r->ring_path,
                   "corrupt ring: record seq %" PRIu64 " names api id %u, which its trace does "
                   "not list",
                   c->bad_seq, c->bad_api);
    return bad(r, r->ring_path, "corrupt ring: a record with seq %" PRIu64 " (seq runs from 1)",
               c->bad_seq);
}

struct inserter {
    struct ct_store *store;
    struct record_check check; /* checked again: the file could change under us */
    bool aux;                  /* this pass inserts the auxiliary records, not the calls */
    int rc;
};

/* Calls and auxiliary records go in separate passes, so that the rows the
 * calls added can be counted (recovered_records). */
static void insert_record(const struct ct_record *rec, void *arg)
{
    struct inserter *in = arg;
    if (in->rc != 0 || in->check.bad)
        return;
    struct ct_record copy;
    memcpy(&copy, rec, sizeof(copy));
    if (ct_record_is_aux(&copy) != in->aux)
        return;
    if (record_ok(&in->check, &copy)) {
        if (!in->aux)
            in->check.count++;
        in->rc = ct_store_insert(in->store, &copy);
    }
}

/* ---- the database ---- */

/* SQLite failures that are about where the trace lies, not what it holds. */
static bool environmental(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_NOMEM:
    case SQLITE_NOLFS:
        return true;
    default:
        return false;
    }
}

static bool read_only_errno(int err)
{
    return err == EROFS || err == EACCES || err == EPERM;
}

/*
 * Checks, beyond trace_open's, that the trace can take records the way
 * libcutrace writes them: every column ct_store_insert fills, seq as the
 * primary key (INSERT OR IGNORE must ignore replays) and no triggers (a
 * forged file could otherwise change what an insert does).
 */
static int check_foldable(struct trace *t)
{
    sqlite3_stmt *stmt =
        trace_query(t, "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'", "");
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    int64_t triggers = rc == 1 ? col_int(stmt, 0, 0) : 0;
    sqlite3_finalize(stmt);
    if (rc < 0)
        return -1;
    if (triggers > 0)
        return trace_fail(t, "not a trace as cutrace writes them (it has triggers); not folded");

    /* One pass over events' columns: which exist, and which make the key. */
    enum { NCOLUMNS = sizeof(event_columns) / sizeof(event_columns[0]) };
    bool present[NCOLUMNS] = {false};
    int64_t keys = 0;
    bool seq_is_key = false;
    stmt = trace_query(t, "SELECT name, pk, upper(type) FROM pragma_table_info('events')", "");
    if (!stmt)
        return -1;
    while ((rc = trace_step(t, stmt)) == 1) {
        const char *name = (const char *)sqlite3_column_text(stmt, 0);
        const char *type = (const char *)sqlite3_column_text(stmt, 2);
        int64_t pk = col_int(stmt, 1, 0);
        keys += pk > 0;
        for (size_t i = 0; name && i < NCOLUMNS; i++)
            if (strcmp(name, event_columns[i]) == 0)
                present[i] = true;
        if (name && strcmp(name, "seq") == 0)
            seq_is_key = pk == 1 && type && strcmp(type, "INTEGER") == 0;
    }
    sqlite3_finalize(stmt);
    if (rc < 0)
        return -1;
    for (size_t i = 0; i < NCOLUMNS; i++)
        if (!present[i])
            return trace_fail(t, "incomplete cutrace trace: 'events' has no column '%s'",
                              event_columns[i]);
    /* INSERT OR IGNORE must ignore exactly the replays: seq alone is the key. */
    if (!seq_is_key || keys != 1)
        return trace_fail(t, "incomplete cutrace trace: 'events' is not keyed by seq alone");
    return 0;
}

/*
 * The ring must be the trace's own: a process row (when the trace has one)
 * of another pid or start time means the records belong elsewhere, and
 * folding them would give this process calls it never made.
 */
static int check_owner(struct trace *t, const struct recover_result *r)
{
    sqlite3_stmt *stmt = trace_query(t, "SELECT pid, start_wall_ns FROM process", "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        bool pid_differs = !col_is_null(stmt, 0) && col_int(stmt, 0, 0) != r->pid;
        bool start_differs =
            !col_is_null(stmt, 1) && ct_sql_to_u64(col_int(stmt, 1, 0)) != r->start_wall_ns;
        if (pid_differs || start_differs) {
            const char *slash = strrchr(r->ring_path, '/');
            trace_fail(t,
                       "trace of process %" PRId64 " (start %" PRIu64 " ns), but ring %s is "
                       "of process %" PRId64 " (start %" PRIu64 " ns); not folded",
                       col_int(stmt, 0, 0), ct_sql_to_u64(col_int(stmt, 1, 0)),
                       slash ? slash + 1 : r->ring_path, r->pid, r->start_wall_ns);
            rc = -1;
            break;
        }
    }
    sqlite3_finalize(stmt);
    return rc < 0 ? -1 : 0;
}

/* An SQLite file with no table or view at all: what a process killed while
 * its writer was creating the schema leaves (WAL mode set, nothing committed). */
static bool sqlite_blank(const char *path)
{
    sqlite3 *db = NULL;
    bool blank = false;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, NULL) ==
        SQLITE_OK) {
        sqlite3_stmt *stmt = NULL;
        if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_schema", -1, &stmt, NULL) ==
                SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW)
            blank = sqlite3_column_int64(stmt, 0) == 0;
        sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
    return blank;
}

static int exec_sql(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t sum;
    return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

/* A trace without a process row gets one from the header: pid and start
 * times are the process's own; what the header does not know is left
 * empty (host, cmdline, exe) or NULL (ppid, uid: 0 would be a real value). */
static int write_process_row(struct ct_store *st, const struct recover_result *r)
{
    sqlite3 *db = ct_store_sqlite(st);
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM process", -1, &stmt, NULL);
    int64_t rows = 0;
    if (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        rows = sqlite3_column_int64(stmt, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_OK || rows > 0)
        return rc;
    struct ct_process_info info;
    memset(&info, 0, sizeof(info));
    info.pid = r->pid;
    info.start_wall_ns = r->start_wall_ns;
    info.start_mono_ns = r->start_mono_ns;
    snprintf(info.boot_id, sizeof(info.boot_id), "%s", r->boot_id);
    rc = ct_store_write_process(st, &info);
    if (rc == 0)
        rc = exec_sql(db, "UPDATE process SET ppid = NULL, uid = NULL");
    return rc;
}

/* Abandons the transaction: a write failure leaves the ring for later, a
 * trace that refuses the records is bad input. */
static enum recover_status abandon(struct recover_result *r, struct ct_store *st, int rc,
                                   const char *doing)
{
    char why[300];
    snprintf(why, sizeof(why), "%s", ct_store_error(st));
    if (!why[0])
        snprintf(why, sizeof(why), "%s", sqlite3_errstr(rc));
    exec_sql(ct_store_sqlite(st), "ROLLBACK");
    ct_store_close(st);
    if (environmental(rc))
        return not_folded(r, (rc & 0xff) == SQLITE_READONLY || (rc & 0xff) == SQLITE_PERM,
                          "cannot write %s (%s: %s)", r->db_path, doing, why);
    return bad(r, r->db_path, "cannot take the records of its ring (%s: %s)", doing, why);
}

/* Removes a trace file this run created and could not complete. */
static void remove_created(const char *db_path)
{
    unlink(db_path);
    char *side = xasprintf("%s-wal", db_path);
    unlink(side);
    free(side);
    side = xasprintf("%s-shm", db_path);
    unlink(side);
    free(side);
}

static struct ct_store *open_store(struct recover_result *r, bool blank, bool exists,
                                   bool *created_file)
{
    char err[400] = "";
    *created_file = false;
    if (!blank) {
        /* The trace passed validation: failing to open it is about where it lies. */
        struct ct_store *st = ct_store_open(r->db_path, err, sizeof(err));
        if (!st)
            not_folded(r, false, "cannot open it for writing: %s", err);
        return st;
    }
    if (!exists) {
        /* O_EXCL|O_NOFOLLOW: never through a link planted in the meantime. */
        int fd = open(r->db_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            not_folded(r, read_only_errno(errno), "cannot create %s: %s", r->db_path,
                       strerror(errno));
            return NULL;
        }
        close(fd);
        *created_file = true;
    }
    struct ct_store *st = ct_store_create(r->db_path, err, sizeof(err));
    if (!st) {
        if (*created_file)
            remove_created(r->db_path);
        not_folded(r, false, "cannot create the trace: %s", err);
    }
    return st;
}

/*
 * Where the records go: checks that the directory and trace can be written
 * and that the trace is one this build folds into, and marks the api ids it
 * lists in `apis`. Sets *exists and *blank (missing, empty, or an SQLite file
 * without tables: made from the header). RECOVER_FOLDED when all is well.
 */
static enum recover_status check_target(struct recover_result *r, uint8_t *apis, bool *exists,
                                        bool *blank)
{
    /* Writability first: a read-only copy of a trace directory is read,
     * not refused, by the reports. Root passes these checks except on a
     * read-only mount; SQLite's own errors catch the rest. */
    const char *slash = strrchr(r->ring_path, '/');
    char *dir = slash ? xstrndup(r->ring_path, (size_t)(slash - r->ring_path) + 1) : xstrdup(".");
    int access_rc = faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS);
    int err = errno;
    if (access_rc != 0)
        not_folded(r, read_only_errno(err), "cannot write to %s (%s)", dir, strerror(err));
    free(dir);
    if (access_rc != 0)
        return r->status;

    struct stat st;
    *exists = lstat(r->db_path, &st) == 0;
    if (!*exists && errno != ENOENT)
        return bad(r, r->db_path, "cannot open: %s", strerror(errno));
    if (*exists && S_ISLNK(st.st_mode))
        return bad(r, r->db_path, "a symbolic link, not a trace file (not followed)");
    if (*exists && !S_ISREG(st.st_mode))
        return bad(r, r->db_path, "not a regular file");
    if (*exists && faccessat(AT_FDCWD, r->db_path, W_OK, AT_EACCESS) != 0) {
        err = errno;
        return not_folded(r, read_only_errno(err), "cannot write %s (%s)", r->db_path,
                          strerror(err));
    }

    *blank = !*exists || st.st_size == 0;
    if (!*blank) {
        /* The validation every report applies, plus what folding needs. */
        struct trace t;
        if (trace_open(&t, r->db_path) == 0 && check_foldable(&t) == 0 && check_owner(&t, r) == 0) {
            for (size_t i = 0; i < t.napis; i++)
                api_mark(apis, t.apis[i].id);
        } else if (sqlite_blank(r->db_path)) {
            *blank = true;
        } else {
            bad(r, r->db_path, "%s", t.error[0] ? t.error : "unusable trace");
        }
        trace_close(&t);
        if (r->status == RECOVER_BAD)
            return RECOVER_BAD;
    }
    if (*blank) /* ct_store_create writes this build's apis */
        for (int id = 1; id < CT_API_COUNT; id++)
            api_mark(apis, id);
    return RECOVER_FOLDED;
}

/*
 * Inside the store's transaction: the process row if the trace has none, the
 * records, and meta. Returns 0 or the failing SQLite code, with *doing
 * saying what failed; in->check.bad when a record turned out bad after all.
 */
static int write_records(struct recover_result *r, struct ct_store *store, struct inserter *in,
                         const struct ct_ring *ring, const struct ct_ring_header *h,
                         const char **doing)
{
    sqlite3 *db = ct_store_sqlite(store);
    *doing = "process row";
    int rc = write_process_row(store, r);
    if (rc != 0)
        return rc;

    *doing = "insert";
    int64_t changes = sqlite3_total_changes64(db);
    ct_ring_scan(ring, insert_record, in);
    if (in->rc != 0 || in->check.bad)
        return in->rc;
    r->new_records = sqlite3_total_changes64(db) - changes;
    /* INSERT OR IGNORE adds at most one row per record. */
    assert(r->new_records >= 0 && r->new_records <= (int64_t)in->check.count);
    in->aux = true;
    ct_ring_scan(ring, insert_record, in);
    in->aux = false;
    if (in->rc != 0 || in->check.bad)
        return in->rc;
    /* After the records: a mark whose call's record made it is no call in flight. */
    *doing = "inflight";
    rc = inflight_fold(db, ring, in->check.apis, &r->inflight_records);
    if (rc != 0)
        return rc;

    *doing = "meta";
    bool found, is_int;
    char *text;
    int64_t value = 0;
    rc = trace_meta_get(db, "end_state", &found, &text, &value, &is_int);
    if (rc != 0)
        return rc;
    r->end_state_before = text; /* r owns it now */
    text = NULL;
    /* "running" (or nothing) from a process whose lock is free: it died.
     * The ring says how, when exit/_exit/exec got to say it there. */
    const char *before = r->end_state_before;
    if (!found || !before || strcmp(before, "running") == 0) {
        bool said = h->end_state[0] && strcmp(h->end_state, "running") != 0;
        r->end_state = xstrdup(said ? h->end_state : "killed");
        rc = ct_store_set_meta_text(store, "end_state", r->end_state);
    } else {
        r->end_state = xstrdup(before);
    }
    if (rc == 0 && h->version >= 7 && h->alive_mono_ns > 0 && h->alive_mono_ns <= INT64_MAX)
        rc = ct_store_set_meta_int(store, "alive_mono_ns", (int64_t)h->alive_mono_ns);
    if (rc == 0 && r->writer_error) {
        rc = ct_store_set_meta_text(store, "writer_error", r->writer_error);
        if (rc == 0)
            rc = ct_store_set_meta_int(store, "writer_stopped_after", r->writer_stopped_after);
    }
    /* The ring's count only grows, and the writer stored a past value of it. */
    if (rc == 0 && r->dropped > 0) {
        rc = trace_meta_get(db, "dropped_records", &found, &text, &value, &is_int);
        free(text);
        text = NULL;
        if (rc == 0 && !(found && is_int && value >= r->dropped))
            rc = ct_store_set_meta_int(store, "dropped_records", r->dropped);
    }
    if (rc == 0)
        rc = trace_meta_get(db, "recovered_records", &found, &text, &value, &is_int);
    free(text);
    if (rc != 0)
        return rc;
    /* Added to, not replaced: a fold that committed but was killed before
     * deleting its ring is folded again, finding nothing new. */
    int64_t old = found && is_int && value > 0 ? value : 0;
    r->recovered_total = sat_add(old, r->new_records);
    rc = ct_store_set_meta_int(store, "recovered_records", r->recovered_total);
    if (rc == 0) {
        *doing = "commit";
        rc = ct_store_commit(store);
    }
    return rc;
}

/* Steps 3 and 4 of recover.h, with the ring locked, mapped and validated. */
static enum recover_status fold(struct recover_result *r, const struct ct_ring *ring,
                                const struct ct_ring_header *h)
{
    uint8_t *apis = xcalloc(API_BITMAP_BYTES, 1);
    bool exists = false, blank = false;
    struct inserter in = {.check = {.apis = apis}};
    if (check_target(r, apis, &exists, &blank) != RECOVER_FOLDED) {
        free(apis);
        return r->status;
    }
    /* Every record is checked before anything is written. */
    ct_ring_scan(ring, check_record, &in.check);
    if (in.check.bad) {
        free(apis);
        return bad_record(r, &in.check);
    }
    r->ring_records = in.check.count;
    in.check.count = 0;

    bool created_file;
    struct ct_store *store = open_store(r, blank, exists, &created_file);
    if (!store) {
        free(apis);
        return r->status;
    }
    r->created_db = blank;
    in.store = store;
    const char *doing = "begin";
    int rc = ct_store_begin(store);
    if (rc == 0)
        rc = write_records(r, store, &in, ring, h, &doing);
    free(apis);
    enum recover_status status = RECOVER_FOLDED;
    if (in.check.bad) {
        exec_sql(ct_store_sqlite(store), "ROLLBACK");
        ct_store_close(store);
        status = bad_record(r, &in.check);
    } else if (rc != 0) {
        status = abandon(r, store, rc, doing);
    } else {
        /* The commit is what makes the records safe; a checkpoint held off by a
         * reader only leaves them in the -wal file, where readers see them. */
        ct_store_checkpoint(store);
        ct_store_close(store);
    }
    if (status != RECOVER_FOLDED) {
        if (created_file)
            remove_created(r->db_path);
        return status;
    }
    /* Still under the lock, so no other cutrace folds it meanwhile. */
    if (unlink(r->ring_path) != 0)
        r->unlink_error = xstrdup(strerror(errno));
    r->status = RECOVER_FOLDED;
    return RECOVER_FOLDED;
}

/* ---- one ring ---- */

/* Reads and checks the header of the open ring: RECOVER_FOLDED when sound. */
static enum recover_status read_header(int fd, struct recover_result *r, struct ct_ring_header *h,
                                       struct stat *st)
{
    const char *path = r->ring_path;
    if (fstat(fd, st) != 0)
        return bad(r, path, "cannot stat: %s", strerror(errno));
    if (!S_ISREG(st->st_mode))
        return bad(r, path, "not a regular file, so not a cutrace ring");
    if (st->st_size < CT_RING_HEADER_BYTES)
        return bad(r, path, "truncated ring (%lld bytes, shorter than its %d-byte header)",
                   (long long)st->st_size, CT_RING_HEADER_BYTES);
    ssize_t n = pread(fd, h, sizeof(*h), 0);
    if (n != (ssize_t)sizeof(*h))
        return bad(r, path, "cannot read: %s", n < 0 ? strerror(errno) : "short read");
    return check_header(r, h, (uint64_t)st->st_size);
}

static enum recover_status recover_open_ring(int fd, struct recover_result *r)
{
    const char *path = r->ring_path;
    struct stat st;
    struct ct_ring_header h;
    /*
     * The header is checked before the lock is tried, so a ring is locked only
     * once it is formatted, which its process does after taking its own lock:
     * a cutrace never holds the lock of a ring whose process is just starting
     * (its own lock would fail and leave its ring unprotected for its life).
     */
    if (read_header(fd, r, &h, &st) != RECOVER_FOLDED)
        return r->status;
    switch (owner_ring_lock(fd)) {
    case OWNER_RING_TAKEN:
        break;
    case OWNER_RING_HELD:
        r->pid = h.pid;
        r->status = RECOVER_LIVE;
        return RECOVER_LIVE;
    case OWNER_RING_FAILED:
        return not_folded(r, false, "cannot lock it (%s), so cannot tell whether its process lives",
                          strerror(errno));
    }
    /* Another cutrace may have folded and deleted it between our open and
     * our lock: then the path is gone or names a new file. */
    struct stat now;
    if (fstat(fd, &st) != 0 || st.st_nlink == 0 || stat(path, &now) != 0 ||
        now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
        r->status = RECOVER_GONE;
        return RECOVER_GONE;
    }
    /* Read again under the lock: what a process says as it dies is final now. */
    if (read_header(fd, r, &h, &st) != RECOVER_FOLDED)
        return r->status;
    take_header(r, &h);

    size_t bytes = ct_ring_bytes(h.capacity);
    void *mem = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mem == MAP_FAILED)
        return bad(r, path, "cannot map: %s", strerror(errno));
    struct ct_ring ring;
    enum recover_status status;
    /* attach reads the mapped header, which we checked through pread. */
    if (!ct_ring_attach(&ring, mem, bytes))
        status = bad(r, path, "corrupt ring: its header changed while being read");
    else
        status = fold(r, &ring, &h);
    munmap(mem, bytes);
    return status;
}

enum recover_status recover_ring(const char *ring_path, struct recover_result *r)
{
    memset(r, 0, sizeof(*r));
    r->ring_path = xstrdup(ring_path);
    /* O_NONBLOCK: a FIFO planted under a ring's name must not hang us. */
    int fd = open(ring_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) {
            r->status = RECOVER_GONE;
            return RECOVER_GONE;
        }
        if (errno == ELOOP)
            return bad(r, ring_path, "a symbolic link, not a ring file (not followed)");
        return bad(r, ring_path, "cannot open: %s", strerror(errno));
    }
    enum recover_status status = recover_open_ring(fd, r);
    close(fd); /* drops the lock, after the ring is deleted */
    assert(status == r->status);
    return status;
}

/* ---- finding rings ---- */

static bool has_suffix(const char *name, const char *suffix)
{
    size_t len = strlen(name), slen = strlen(suffix);
    return len > slen && strcmp(name + len - slen, suffix) == 0;
}

static int compare_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int recover_find_rings(const char *path, char ***rings, size_t *count, char *err, size_t errlen)
{
    *rings = NULL;
    *count = 0;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            snprintf(err, errlen, "cannot read directory: %s", strerror(errno));
            return -1;
        }
        size_t cap = 0;
        struct dirent *entry;
        while ((entry = readdir(d)) != NULL) {
            if (!has_suffix(entry->d_name, ".ring"))
                continue;
            *rings = xgrow(*rings, &cap, *count + 1, sizeof(**rings));
            (*rings)[(*count)++] = cli_path_join(path, entry->d_name);
        }
        closedir(d);
        /* Same directory prefix: path order is name order. */
        if (*count > 1)
            qsort(*rings, *count, sizeof(**rings), compare_paths);
        return 0;
    }
    /* FILE.db, whether it exists or not (a process killed before its writer
     * made the file leaves only the ring): its ring is FILE.ring. */
    if (has_suffix(path, ".db")) {
        char *ring = xasprintf("%.*s.ring", (int)(strlen(path) - 3), path);
        struct stat rs;
        if (lstat(ring, &rs) == 0) {
            *rings = xmalloc(sizeof(**rings));
            (*rings)[0] = ring;
            *count = 1;
        } else {
            free(ring);
        }
    }
    return 0;
}

void recover_free_rings(char **rings, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(rings[i]);
    free(rings);
}

/* After the rings: what killed processes left while creating their traces.
 * A leftover that cannot be cleaned changes nothing a report says (a
 * temporary file is never read; a trace says "running, or killed"). */
static void clean_leftovers_quietly(const char *path)
{
    struct leftover *items;
    size_t count;
    char err[256];
    if (leftovers_find(path, &items, &count, err, sizeof(err)) != 0)
        return;
    for (size_t i = 0; i < count; i++)
        leftover_clean(&items[i]);
    leftovers_free(items, count);
}

int recover_fold_quietly(const char *path)
{
    char **rings;
    size_t count;
    char err[256];
    /* An unreadable directory is reported by the loader that follows. */
    if (recover_find_rings(path, &rings, &count, err, sizeof(err)) != 0)
        return 0;
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        struct recover_result r;
        switch (recover_ring(rings[i], &r)) {
        case RECOVER_FOLDED:
        case RECOVER_LIVE:
        case RECOVER_GONE:
            /* An undeletable folded ring is folded again next time, adding nothing. */
            break;
        case RECOVER_NOT_FOLDED:
            if (r.read_only)
                cli_error(r.ring_path,
                          "not folded (read-only): records of a killed process may be missing; "
                          "run cutrace recover where it is writable");
            else
                cli_error(r.ring_path,
                          "not folded (%s): records of a killed process may be missing; run "
                          "cutrace recover once that is fixed",
                          r.error);
            break;
        case RECOVER_BAD:
            cli_error(r.error_path, "%s", r.error);
            rc = -1;
            break;
        }
        recover_result_free(&r);
    }
    recover_free_rings(rings, count);
    if (rc == 0)
        clean_leftovers_quietly(path);
    return rc;
}
