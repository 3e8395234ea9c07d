/*
 * trace.c - finding, opening and validating trace files, and the query
 * helpers every report uses. All problems end up as one line in
 * trace->error; nothing here prints except trace_report_error. A directory
 * of traces (a run) is opened by traceset.c, above this and recovery.
 */
#include "model/trace.h"

#include "cli.h"
#include "cutrace/format.h"
#include "model/packed.h"
#include "cutrace/schema.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SQLITE_MAGIC       "SQLite format 3"
#define SQLITE_VERSIONS_AT 18 /* header offset of the write and read format versions */
#define BUSY_TIMEOUT_MS    5000
#define MAX_REQUIRED_COLS  16

/* Columns the reports read; a trace lacking one is refused up front rather
 * than failing halfway through a report. */
static const struct {
    const char *object;
    const char *columns[MAX_REQUIRED_COLS];
} required_columns[] = {
    {"meta", {"key", "value"}},
    {"apis", {"api_id", "name", "layer", "role", "space", "kind"}},
    {"process",
     {"pid", "ppid", "host", "cmdline", "start_wall_ns", "start_mono_ns", "cuda_runtime_version",
      "cuda_driver_version", "exe"}},
    {"devices", {"device", "uuid", "pci_bus_id", "name", "total_bytes"}},
    {"env", {"name", "value"}},
    {"calls",
     {"seq", "t_ns", "dur_ns", "tid", "api", "layer", "device", "ptr", "size", "result", "nested",
      "parent_seq", "wait_ns"}},
    {"allocations",
     {"seq", "api", "device", "ptr", "size", "kind", "t_ns", "free_seq", "free_t_ns", "free_api"}},
    {"meminfo", {"seq", "t_ns", "device", "free_bytes", "total_bytes"}},
    {"ipc", {"seq", "t_ns", "api", "device", "ptr", "handle_hex", "result", "flags"}},
};

int trace_fail(struct trace *t, const char *fmt, ...)
{
    if (t->error[0] == '\0') {
        /* Messages embed SQLite's and the trace's text: keep them one line. */
        va_list ap;
        va_start(ap, fmt);
        cli_vformat_line(t->error, sizeof(t->error), fmt, ap);
        va_end(ap);
    }
    return -1;
}

void trace_report_error(const struct trace *t)
{
    cli_error(t->path, "%s", t->error[0] ? t->error : "unknown error");
}

/* Turns an SQLite failure into the user's terms: a damaged file, a read
 * error, or (last resort) SQLite's own words. */
static int fail_sqlite(struct trace *t, int rc, const char *doing)
{
    const char *message = t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc);
    switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
        return trace_fail(t, "corrupt or truncated database (sqlite: %s)", message);
    case SQLITE_IOERR:
        return trace_fail(t, "read error (sqlite: %s)", message);
    case SQLITE_NOMEM:
        return trace_fail(t, "out of memory while %s", doing);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return trace_fail(t, "database is locked by its writer; try again (sqlite: %s)", message);
    default:
        return trace_fail(t, "%s failed (sqlite: %s)", doing, message);
    }
}

sqlite3_stmt *trace_query(struct trace *t, const char *sql, const char *types, ...)
{
    assert(t->db && sql && types);
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(t->db, sql, -1, &stmt, NULL);
    if (rc != SQLITE_OK) {
        fail_sqlite(t, rc, "query");
        sqlite3_finalize(stmt);
        return NULL;
    }
    assert((size_t)sqlite3_bind_parameter_count(stmt) == strlen(types) &&
           "bound parameter count does not match the SQL");
    va_list ap;
    va_start(ap, types);
    for (int i = 0; types[i] && rc == SQLITE_OK; i++) {
        switch (types[i]) {
        case 'i':
            rc = sqlite3_bind_int64(stmt, i + 1, va_arg(ap, int64_t));
            break;
        case 't': {
            const char *text = va_arg(ap, const char *);
            rc = text ? sqlite3_bind_text(stmt, i + 1, text, -1, SQLITE_TRANSIENT)
                      : sqlite3_bind_null(stmt, i + 1);
            break;
        }
        case 'n':
            rc = sqlite3_bind_null(stmt, i + 1);
            break;
        default:
            assert(!"unknown bind type");
        }
    }
    va_end(ap);
    if (rc != SQLITE_OK) {
        fail_sqlite(t, rc, "binding a query parameter");
        sqlite3_finalize(stmt);
        return NULL;
    }
    return stmt;
}

int trace_step(struct trace *t, sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return fail_sqlite(t, rc, "query");
}

bool col_is_null(sqlite3_stmt *stmt, int col)
{
    return sqlite3_column_type(stmt, col) == SQLITE_NULL;
}

int64_t col_int(sqlite3_stmt *stmt, int col, int64_t if_null)
{
    if (col_is_null(stmt, col))
        return if_null;
    return sqlite3_column_int64(stmt, col);
}

char *col_text(sqlite3_stmt *stmt, int col)
{
    if (col_is_null(stmt, col))
        return NULL;
    const unsigned char *text = sqlite3_column_text(stmt, col);
    int len = sqlite3_column_bytes(stmt, col);
    if (!text)
        return xstrdup("");
    char *copy = xmalloc((size_t)len + 1);
    for (int i = 0; i < len; i++)
        copy[i] = text[i] ? (char)text[i] : ' ';
    copy[len] = '\0';
    return copy;
}

const struct trace_api *trace_api_by_id(const struct trace *t, int64_t id)
{
    for (size_t i = 0; i < t->napis; i++)
        if (t->apis[i].id == id)
            return &t->apis[i];
    return NULL;
}

const struct trace_api *trace_api_by_name(const struct trace *t, const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < t->napis; i++)
        if (t->apis[i].name && strcmp(t->apis[i].name, name) == 0)
            return &t->apis[i];
    return NULL;
}

const char *trace_api_name(const struct trace *t, int64_t id)
{
    const struct trace_api *api = trace_api_by_id(t, id);
    return api ? api->name : NULL;
}

/* ct_sum(): see trace.h. The aggregate context holds the running total. */
static void sum_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    assert(argc == 1);
    (void)argc;
    int64_t *total = sqlite3_aggregate_context(ctx, sizeof(*total));
    if (!total) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    int type = sqlite3_value_numeric_type(argv[0]);
    if (type != SQLITE_INTEGER)
        return;
    int64_t value = sqlite3_value_int64(argv[0]);
    if (value <= 0)
        return;
    *total = value > INT64_MAX - *total ? INT64_MAX : *total + value;
}

static void sum_final(sqlite3_context *ctx)
{
    int64_t *total = sqlite3_aggregate_context(ctx, 0);
    sqlite3_result_int64(ctx, total ? *total : 0);
}

/* Percent-encodes a path into an SQLite URI so no character of it can be
 * read as URI syntax ('?', '#', '%'). */
static char *path_to_uri(const char *path, const char *query)
{
    size_t len = strlen(path);
    char *uri = xmalloc(5 + 3 * len + strlen(query) + 2);
    char *out = uri + sprintf(uri, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/-_.~", *p))
            *out++ = (char)*p;
        else
            out += sprintf(out, "%%%02X", *p);
    }
    sprintf(out, "?%s", query);
    return uri;
}

static int open_sqlite(const char *path, bool immutable, sqlite3 **db)
{
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
    char *name = NULL;
    if (immutable) {
        name = path_to_uri(path, "mode=ro&immutable=1");
        flags |= SQLITE_OPEN_URI;
    }
    int rc = sqlite3_open_v2(name ? name : path, db, flags, NULL);
    free(name);
    return rc;
}

static int open_connection(struct trace *t, const char *path, bool immutable)
{
    int rc = open_sqlite(path, immutable, &t->db);
    if (rc != SQLITE_OK) {
        int result = trace_fail(t, "cannot open (sqlite: %s)",
                                t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
        sqlite3_close(t->db);
        t->db = NULL;
        return result;
    }
    sqlite3_extended_result_codes(t->db, 1);
    sqlite3_busy_timeout(t->db, BUSY_TIMEOUT_MS);
    /* The file may be hostile: no schema-defined functions with side
     * effects, no writable schema tricks, verify b-tree cell sizes. */
    sqlite3_db_config(t->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    sqlite3_db_config(t->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
    sqlite3_db_config(t->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, NULL);
    sqlite3_exec(t->db, "PRAGMA cell_size_check = ON", NULL, NULL, NULL);
    rc = sqlite3_create_function_v2(t->db, TRACE_SUM_FUNCTION, 1,
                                    SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                    NULL, sum_step, sum_final, NULL);
    if (rc != SQLITE_OK)
        return fail_sqlite(t, rc, "registering " TRACE_SUM_FUNCTION);
    return 0;
}

/* The checks that need no SQLite: SQLite opens an empty or foreign file
 * without complaint and only fails on the first query, with vaguer words.
 * *wal_mode: the header says the file is in WAL mode. */
static int check_file(struct trace *t, const char *path, bool *wal_mode)
{
    *wal_mode = false;
    struct stat st;
    if (stat(path, &st) != 0)
        return trace_fail(t, "cannot open: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return trace_fail(t, "not a regular file");
    if (st.st_size == 0)
        return trace_fail(t, "empty file (0 bytes), not a cutrace trace");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return trace_fail(t, "cannot open: %s", strerror(errno));
    /* The magic, then the file format's write and read versions: 2 and 2
     * is WAL mode (sqlite.org/fileformat.html, "The Database Header"). */
    unsigned char header[SQLITE_VERSIONS_AT + 2];
    ssize_t n = read(fd, header, sizeof(header));
    int saved = errno;
    close(fd);
    if (n < 0)
        return trace_fail(t, "cannot read: %s", strerror(saved));
    if ((size_t)n < sizeof(SQLITE_MAGIC) || memcmp(header, SQLITE_MAGIC, sizeof(SQLITE_MAGIC)) != 0)
        return trace_fail(t, "not an SQLite database, so not a cutrace trace");
    *wal_mode = (size_t)n == sizeof(header) && header[SQLITE_VERSIONS_AT] == 2 &&
                header[SQLITE_VERSIONS_AT + 1] == 2;
    return 0;
}

bool trace_file_in_wal_mode(const char *path)
{
    struct trace t;
    memset(&t, 0, sizeof(t));
    bool wal_mode = false;
    return check_file(&t, path, &wal_mode) == 0 && wal_mode;
}

/* Whether path+suffix names nothing (a name that cannot be checked counts as there). */
static bool absent(const char *path, const char *suffix)
{
    char *name = xasprintf("%s%s", path, suffix);
    struct stat st;
    bool none = lstat(name, &st) != 0 && errno == ENOENT;
    free(name);
    return none;
}

/*
 * Whether a WAL-mode trace can be read with SQLite's immutable option,
 * which takes no locks and creates no files. Read normally, a WAL database
 * makes SQLite create <trace>-wal and <trace>-shm, and a read-only
 * connection cannot delete them when it closes (only a writer that is the
 * last connection does): every report would leave two files behind.
 *
 * Immutable is safe when the file cannot change while it is read, and that
 * holds when neither <trace>-wal, <trace>-shm nor the ring <base>.ring
 * exists: every connection to a WAL database holds both files while it is
 * open (so none is open, and no committed data waits in a -wal file), and
 * the writers a trace has keep its ring while they write: its own process
 * (which publishes the ring before its writer opens the trace, and deletes
 * it after closing the trace for good) and crash recovery (which deletes
 * the ring it folds only after closing the trace). Left: a process that
 * starts writing in the instant after this check, having just published
 * its trace (complete, closed, without calls). Its writes go to the -wal
 * file; the main file changes only at a checkpoint, after 1000 pages of
 * them, far later than a report has read it. A trace name not ending in .db
 * has no ring name to check, so it is read normally. In every other case
 * the normal read, with SQLite's locking, is what keeps a live writer's
 * trace consistent, and the files it creates are the writer's own or a
 * dead writer's, found there.
 */
static bool finished_wal_trace(const char *path)
{
    size_t len = strlen(path);
    if (len <= 3 || strcmp(path + len - 3, ".db") != 0)
        return false;
    char *base = xstrndup(path, len - 3);
    bool no_ring = absent(base, ".ring");
    free(base);
    return no_ring && absent(path, "-wal") && absent(path, "-shm");
}

int trace_sqlite_open_readonly(const char *path, sqlite3 **db)
{
    return open_sqlite(path, finished_wal_trace(path), db);
}

int trace_sqlite_open_main_file(const char *path, sqlite3 **db)
{
    return open_sqlite(path, true, db);
}

/* Names of the tables and views, one string per line; the first query of a
 * file, so this is where a damaged header or schema shows. */
static int read_schema_names(struct trace *t, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    /* A packed process's trace is its temp schema (packed.h). */
    sqlite3_stmt *stmt = trace_query(t,
                                     t->packed ? "SELECT name FROM sqlite_temp_schema WHERE type"
                                                 " IN ('table', 'view') ORDER BY name"
                                               : "SELECT name FROM sqlite_schema WHERE type IN "
                                                 "('table', 'view') ORDER BY name",
                                     "");
    if (!stmt)
        return -1;
    size_t cap = 0;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        char *name = col_text(stmt, 0);
        if (!name)
            continue;
        *names = xgrow(*names, &cap, *count + 1, sizeof(**names));
        (*names)[(*count)++] = name;
    }
    sqlite3_finalize(stmt);
    return rc;
}

static bool has_name(char **names, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

/* meta's value for key as text; *found tells a NULL value from no row. */
static int read_meta(struct trace *t, const char *key, char **value, bool *found)
{
    *value = NULL;
    *found = false;
    sqlite3_stmt *stmt = trace_query(t, "SELECT value FROM meta WHERE key = ?", "t", key);
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    if (rc == 1) {
        *found = true;
        *value = col_text(stmt, 0);
    }
    sqlite3_finalize(stmt);
    return rc < 0 ? -1 : 0;
}

/*
 * An optional count in meta (written by crash recovery): absent is fine, but
 * a value that is not a non-negative integer is refused, never shown as a
 * number it is not.
 */
static int read_meta_count(struct trace *t, const char *key, int64_t *value, bool *found)
{
    *value = 0;
    *found = false;
    sqlite3_stmt *stmt =
        trace_query(t, "SELECT typeof(value), value FROM meta WHERE key = ?", "t", key);
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    if (rc == 1) {
        const char *type = (const char *)sqlite3_column_text(stmt, 0);
        if (type && strcmp(type, "integer") == 0 && sqlite3_column_int64(stmt, 1) >= 0) {
            *found = true;
            *value = sqlite3_column_int64(stmt, 1);
        } else {
            char *text = col_text(stmt, 1);
            trace_fail(t, "invalid meta '%s' value '%.32s' (expected a count)", key,
                       text ? text : "NULL");
            free(text);
            rc = -1;
        }
    }
    sqlite3_finalize(stmt);
    return rc < 0 ? -1 : 0;
}

static int check_identity(struct trace *t)
{
    char *schema;
    bool found;
    if (read_meta(t, "schema", &schema, &found) != 0)
        return -1;
    if (!found || !schema) {
        free(schema);
        return trace_fail(t, "not a cutrace trace (meta has no 'schema' entry)");
    }
    if (strcmp(schema, CT_SCHEMA_NAME) != 0) {
        trace_fail(t, "not a cutrace trace (meta schema is '%.64s', expected '%s')", schema,
                   CT_SCHEMA_NAME);
        free(schema);
        return -1;
    }
    free(schema);

    sqlite3_stmt *stmt =
        trace_query(t, "SELECT typeof(value), value FROM meta WHERE key = 'format_version'", "");
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    if (rc < 0) {
        sqlite3_finalize(stmt);
        return -1;
    }
    if (rc == 0) {
        sqlite3_finalize(stmt);
        return trace_fail(t, "not a cutrace trace (meta has no 'format_version' entry)");
    }
    /* meta.value has no type: accept an integer, or text that is one. */
    const char *type = (const char *)sqlite3_column_text(stmt, 0);
    char *text = col_text(stmt, 1);
    bool digits =
        text && text[0] && strspn(text, "0123456789") == strlen(text) && strlen(text) <= 18;
    if (type && (strcmp(type, "integer") == 0 || (strcmp(type, "text") == 0 && digits))) {
        t->format_version = sqlite3_column_int64(stmt, 1);
    } else {
        trace_fail(t, "invalid format_version '%.32s' (expected an integer)", text ? text : "NULL");
        free(text);
        sqlite3_finalize(stmt);
        return -1;
    }
    free(text);
    sqlite3_finalize(stmt);
    if (t->format_version > CT_FORMAT_VERSION)
        return trace_fail(
            t, "written by a newer cutrace (format %" PRId64 ", this build reads up to %d)",
            t->format_version, CT_FORMAT_VERSION);
    if (t->format_version < 1)
        return trace_fail(t, "invalid format_version %" PRId64, t->format_version);

    if (read_meta(t, "producer", &t->producer, &found) != 0 ||
        read_meta(t, "end_state", &t->end_state, &found) != 0 ||
        read_meta(t, "writer_error", &t->writer_error, &found) != 0 ||
        read_meta_count(t, "recovered_records", &t->recovered_records, &t->has_recovered_records) !=
            0 ||
        read_meta_count(t, "writer_stopped_after", &t->writer_stopped_after,
                        &t->has_writer_stopped_after) != 0 ||
        read_meta_count(t, "dropped_records", &t->dropped_records, &t->has_dropped_records) != 0)
        return -1;
    return 0;
}

/* Rewords the SQLite error met while compiling a table or view. */
static int unusable(struct trace *t, const char *object)
{
    int code = t->db ? sqlite3_extended_errcode(t->db) & 0xff : SQLITE_ERROR;
    if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB || code == SQLITE_IOERR ||
        code == SQLITE_NOMEM)
        return -1; /* a damaged file, not a schema problem: keep that error */
    char detail[sizeof(t->error)];
    snprintf(detail, sizeof(detail), "%s", t->db ? sqlite3_errmsg(t->db) : t->error);
    t->error[0] = '\0';
    return trace_fail(t, "incomplete cutrace trace: '%s' is unusable (sqlite: %s)", object, detail);
}

/*
 * The format that introduced a table or view of CT_SCHEMA_REQUIRED_TABLES.
 * Older traces lack it by design and stay readable: the reports that use it
 * check for it and degrade (nccl.h: no NCCL section; modules.h: no module
 * or driver-lookup section). A trace of that format or newer without it is
 * damaged and refused like any other.
 */
static int64_t format_introducing(const char *name)
{
    static const struct {
        const char *name;
        int64_t format;
    } since[] = {
        {"communicators", 2},
        {"collectives", 2},
        {"modules", 3},
        {"driver_lookups", 3},
    };
    for (size_t i = 0; i < sizeof(since) / sizeof(since[0]); i++)
        if (strcmp(since[i].name, name) == 0)
            return since[i].format;
    return 1;
}

static int check_structure(struct trace *t, char **names, size_t count)
{
    static const char *const required[] = CT_SCHEMA_REQUIRED_TABLES;
    assert(t->format_version >= 1 && "check_identity runs first");
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        if (t->format_version >= format_introducing(required[i]) &&
            !has_name(names, count, required[i]))
            return trace_fail(t, "incomplete cutrace trace: no table or view '%s'", required[i]);

    for (size_t i = 0; i < sizeof(required_columns) / sizeof(required_columns[0]); i++) {
        const char *object = required_columns[i].object;
        /* Preparing pragma_table_info on a view compiles the view, so a view
         * whose tables or columns are missing fails here, by name. */
        sqlite3_stmt *stmt = trace_query(t, "SELECT name FROM pragma_table_info(?)", "t", object);
        if (!stmt)
            return unusable(t, object);
        char **columns = NULL;
        size_t ncolumns = 0, cap = 0;
        int rc;
        while ((rc = trace_step(t, stmt)) == 1) {
            char *name = col_text(stmt, 0);
            if (!name)
                continue;
            columns = xgrow(columns, &cap, ncolumns + 1, sizeof(*columns));
            columns[ncolumns++] = name;
        }
        sqlite3_finalize(stmt);
        if (rc < 0)
            unusable(t, object);
        if (rc == 0 && ncolumns == 0) {
            /* pragma_table_info swallows the error of a broken view. */
            char *message = NULL;
            char *sql = sqlite3_mprintf("SELECT * FROM \"%w\" LIMIT 0", object);
            int err = sqlite3_exec(t->db, sql, NULL, NULL, &message);
            sqlite3_free(sql);
            trace_fail(t, "incomplete cutrace trace: '%s' is unusable (sqlite: %s)", object,
                       err != SQLITE_OK && message ? message : "no columns");
            sqlite3_free(message);
            rc = -1;
        }
        for (size_t c = 0; rc == 0 && c < MAX_REQUIRED_COLS && required_columns[i].columns[c];
             c++) {
            if (!has_name(columns, ncolumns, required_columns[i].columns[c])) {
                trace_fail(t, "incomplete cutrace trace: '%s' has no column '%s'", object,
                           required_columns[i].columns[c]);
                rc = -1;
            }
        }
        for (size_t c = 0; c < ncolumns; c++)
            free(columns[c]);
        free(columns);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int trace_check_usable(struct trace *t, const char *object, const char *sql)
{
    assert(t && t->db && object && sql);
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(t->db, sql, -1, &stmt, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW)
        return 0;
    switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return trace_fail(t, "corrupt or truncated database (sqlite: %s)", sqlite3_errmsg(t->db));
    case SQLITE_NOMEM:
        return trace_fail(t, "out of memory while checking '%s'", object);
    default:
        return trace_fail(t, "incomplete cutrace trace: '%s' is unusable (sqlite: %s)", object,
                          sqlite3_errmsg(t->db));
    }
}

int trace_effect_order_check(struct trace *t)
{
    if (!trace_has_effect_order(t))
        return 0;
    if (trace_check_usable(t, "calls", "SELECT ret_seq, effect_order FROM calls LIMIT 0") != 0 ||
        trace_check_usable(t, "allocations",
                           "SELECT effect_order, free_effect_order FROM allocations LIMIT 0") != 0)
        return -1;
    return 1;
}

static int load_apis(struct trace *t)
{
    sqlite3_stmt *stmt = trace_query(
        t, "SELECT api_id, name, layer, role, space, kind FROM apis ORDER BY api_id", "");
    if (!stmt)
        return -1;
    size_t cap = 0;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        t->apis = xgrow(t->apis, &cap, t->napis + 1, sizeof(*t->apis));
        struct trace_api *api = &t->apis[t->napis++];
        api->id = col_int(stmt, 0, -1);
        api->name = col_text(stmt, 1);
        api->layer = col_text(stmt, 2);
        api->role = col_text(stmt, 3);
        api->space = col_text(stmt, 4);
        api->kind = col_text(stmt, 5);
    }
    sqlite3_finalize(stmt);
    return rc;
}

static bool wal_file_exists(const char *path)
{
    char *wal = xasprintf("%s-wal", path);
    bool exists = access(wal, F_OK) == 0;
    free(wal);
    return exists;
}

/* What every opening does once the connection is there: the schema, the
 * identity and structure checks, the read transaction, the apis. */
static int validate(struct trace *t, const char *path, bool cannot_share_is_readonly)
{
    char **names = NULL;
    size_t count = 0;
    int rc = read_schema_names(t, &names, &count);
    int code = rc < 0 ? sqlite3_extended_errcode(t->db) & 0xff : SQLITE_OK;
    bool cannot_share =
        cannot_share_is_readonly && (code == SQLITE_CANTOPEN || code == SQLITE_READONLY);
    if (cannot_share && wal_file_exists(path)) {
        t->error[0] = '\0';
        trace_fail(t, "cannot read: its write-ahead log (-wal) needs a writable directory; "
                      "copy the trace directory somewhere writable");
    } else if (cannot_share) {
        /* A WAL-mode trace in a directory we cannot write to (a copy on a
         * read-only mount, another user's traces): reading needs a -shm file
         * we cannot create. With no -wal file there is nothing uncommitted
         * to read, so the file can be opened as immutable. */
        sqlite3_close(t->db);
        t->db = NULL;
        t->error[0] = '\0';
        if (open_connection(t, path, true) != 0)
            return -1;
        rc = read_schema_names(t, &names, &count);
    }
    if (rc == 0) {
        if (!has_name(names, count, "meta"))
            rc = trace_fail(t, "not a cutrace trace (an SQLite database without a meta table)");
        else if (check_identity(t) != 0 || check_structure(t, names, count) != 0)
            rc = -1;
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    if (rc != 0)
        return -1;

    /* One snapshot for all of a report's queries (see trace.h). */
    rc = sqlite3_exec(t->db, "BEGIN", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return fail_sqlite(t, rc, "starting a read transaction");
    return load_apis(t);
}

int trace_open(struct trace *t, const char *path)
{
    memset(t, 0, sizeof(*t));
    t->path = xstrdup(path);
    const char *slash = strrchr(path, '/');
    t->file = xstrdup(slash ? slash + 1 : path);

    if (check_file(t, path, &t->wal_mode) != 0 ||
        open_connection(t, path, t->wal_mode && finished_wal_trace(path)) != 0)
        return -1;
    return validate(t, path, true);
}

int trace_open_packed(struct trace *t, const char *pack_path, int64_t process, const char *file)
{
    assert(process > 0 && file);
    memset(t, 0, sizeof(*t));
    t->path = xasprintf("%s:%s", pack_path, file);
    t->file = xstrdup(file);
    t->packed = true;
    t->pack_process = process;
    bool wal_mode;
    if (check_file(t, pack_path, &wal_mode) != 0 || open_connection(t, pack_path, false) != 0)
        return -1;
    char err[sizeof(t->error)];
    /* The views live in the temp schema: a read transaction on the file
     * comes after them. */
    if (packed_create_views(t->db, process, err, sizeof(err)) != 0) {
        int code = sqlite3_extended_errcode(t->db) & 0xff;
        if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
            return trace_fail(t, "corrupt or truncated database (sqlite: %s)",
                              sqlite3_errmsg(t->db));
        return trace_fail(t, "%s", err);
    }
    return validate(t, pack_path, false);
}

void trace_close(struct trace *t)
{
    if (t->db) {
        sqlite3_exec(t->db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(t->db);
    }
    for (size_t i = 0; i < t->napis; i++) {
        free(t->apis[i].name);
        free(t->apis[i].layer);
        free(t->apis[i].role);
        free(t->apis[i].space);
        free(t->apis[i].kind);
    }
    free(t->apis);
    free(t->producer);
    free(t->end_state);
    free(t->writer_error);
    free(t->path);
    free(t->file);
    memset(t, 0, sizeof(*t));
}

bool trace_identity_from_file_name(const char *file, int64_t *pid, int64_t *start_wall_ns,
                                   char **host)
{
    const char *end = strrchr(file, '.');
    const char *second = end ? memrchr(file, '-', (size_t)(end - file)) : NULL;
    const char *first = second ? memrchr(file, '-', (size_t)(second - file)) : NULL;
    if (!first || first == file)
        return false;
    char *stop;
    long long p = strtoll(first + 1, &stop, 10);
    if (stop != second || p <= 0)
        return false;
    long long start = strtoll(second + 1, &stop, 10);
    if (stop != end)
        return false;
    *pid = p;
    *start_wall_ns = start;
    *host = xstrndup(file, (size_t)(first - file));
    return true;
}

int trace_meta_get(sqlite3 *db, const char *key, bool *found, char **text, int64_t *integer,
                   bool *is_integer)
{
    *found = false;
    *text = NULL;
    *is_integer = false;
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT value, typeof(value) FROM meta WHERE key = ?", -1,
                                &stmt, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 1, key, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
            *found = true;
            *text = col_text(stmt, 0);
            const unsigned char *type = sqlite3_column_text(stmt, 1);
            *is_integer = type && strcmp((const char *)type, "integer") == 0;
            *integer = sqlite3_column_int64(stmt, 0);
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(stmt);
    return rc;
}
