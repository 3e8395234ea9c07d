/*
 * pack.c - `cutrace pack DIR... -o FILE`: one SQLite file holding every
 * process of a run, to share a run or query all its ranks at once
 * (model/packed.h has the layout; docs/schema.md "Packed runs").
 *
 * The run is opened as every report opens it (trace_set_open_paths: rings
 * folded, every trace validated, the warnings for lost -wal and .ring
 * files), so the pack holds what the reports would read, the -wal's
 * records included, and DIR is changed no more than a report changes it.
 * Rows are copied through SQLite, value by value, so nothing of a trace is
 * reinterpreted; what the traces redact stays redacted. Views are not
 * copied but made again over all processes from schema.h's one
 * definition; each trace's own view SQL is kept for reading it alone. The file is written
 * under a temporary name beside FILE and only published complete: linked
 * to FILE when it must not replace one, renamed over it with --force.
 */
#include "cli.h"
#include "cutrace/schema.h"
#include "model/manifest.h"
#include "model/packed.h"
#include "model/traceset.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: cutrace pack [options] DIR... -o FILE\n"
    "\n"
    "Writes one file holding every process of the run in DIR (directories,\n"
    "trace files, taken as one run): the crash buffers of killed processes\n"
    "folded, every -wal's records in, the run's manifest.json, and the trace\n"
    "tables and views with a `process` column, so that every report reads FILE\n"
    "in place of DIR and `sqlite3 FILE` queries every rank at once.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE             the packed file to write (required)\n"
    "  --force                       replace FILE if it exists\n" CLI_HELP_HELP "\n"
    "exit status:\n"
    "  0  ok\n"
    "  1  bad input: a trace or directory that cannot be used, FILE not writable\n"
    "  2  usage error, or FILE exists (without --force)\n";

enum { OPT_FORCE = 0x300 };

/* A table of the pack and the columns it has so far (the union of the
 * traces': a trace of an older format lacks some). */
struct pack_table {
    char *name;
    char **columns;
    size_t ncolumns, cap;
    bool by_key; /* keyed by (process, the trace's key); else indexed by process */
};

struct packer {
    sqlite3 *db; /* the file being written */
    struct pack_table *tables;
    size_t ntables, cap;
    char error[512];
};

static int pack_fail(struct packer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pack_fail(struct packer *p, const char *fmt, ...)
{
    if (p->error[0] == '\0') { /* the first problem wins */
        va_list ap;
        va_start(ap, fmt);
        cli_vformat_line(p->error, sizeof(p->error), fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int exec_sql(struct packer *p, const char *sql)
{
    char *message = NULL;
    if (sqlite3_exec(p->db, sql, NULL, NULL, &message) == SQLITE_OK)
        return 0;
    int rc = pack_fail(p, "cannot write (sqlite: %s)", message ? message : sqlite3_errmsg(p->db));
    sqlite3_free(message);
    return rc;
}

static int write_fail(struct packer *p, sqlite3_stmt *stmt)
{
    sqlite3_finalize(stmt);
    return pack_fail(p, "cannot write (sqlite: %s)", sqlite3_errmsg(p->db));
}

/* A trace's failure while it is read: the trace is named. */
static int read_fail(struct packer *p, struct trace *t, sqlite3_stmt *stmt)
{
    sqlite3_finalize(stmt);
    return pack_fail(p, "cannot read %s (sqlite: %s)", t->path, sqlite3_errmsg(t->db));
}

static struct pack_table *find_table(struct packer *p, const char *name)
{
    for (size_t i = 0; i < p->ntables; i++)
        if (strcmp(p->tables[i].name, name) == 0)
            return &p->tables[i];
    return NULL;
}

static bool has_column(const struct pack_table *pt, const char *column)
{
    for (size_t i = 0; i < pt->ncolumns; i++)
        if (strcmp(pt->columns[i], column) == 0)
            return true;
    return false;
}

/* The columns of a trace's table or view, in order; key[i]: its place in
 * the primary key (0: not in it). */
struct columns {
    char **names;
    int *key;
    size_t count, cap;
};

static void columns_free(struct columns *c)
{
    for (size_t i = 0; i < c->count; i++)
        free(c->names[i]);
    free(c->names);
    free(c->key);
    memset(c, 0, sizeof(*c));
}

static int read_columns(struct packer *p, struct trace *t, const char *object, struct columns *c)
{
    memset(c, 0, sizeof(*c));
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(t->db, "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", -1,
                           &stmt, NULL) != SQLITE_OK ||
        sqlite3_bind_text(stmt, 1, object, -1, SQLITE_STATIC) != SQLITE_OK)
        return read_fail(p, t, stmt);
    int rc;
    size_t key_cap = 0;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const unsigned char *name = sqlite3_column_text(stmt, 0);
        if (!name)
            continue;
        if (strcmp((const char *)name, PACK_PROCESS_COLUMN) == 0) {
            sqlite3_finalize(stmt);
            return pack_fail(p,
                             "%s: '%s' has a column named '" PACK_PROCESS_COLUMN
                             "', which a pack adds itself",
                             t->path, object);
        }
        c->names = xgrow(c->names, &c->cap, c->count + 1, sizeof(*c->names));
        c->key = xgrow(c->key, &key_cap, c->count + 1, sizeof(*c->key));
        c->key[c->count] = sqlite3_column_int(stmt, 1);
        c->names[c->count++] = xstrdup((const char *)name);
    }
    if (rc != SQLITE_DONE)
        return read_fail(p, t, stmt);
    sqlite3_finalize(stmt);
    if (c->count == 0)
        return pack_fail(p, "%s: '%s' has no columns", t->path, object);
    return 0;
}

/* "process", "a", "b" with the given separator prefix, quoted. */
static char *quoted_list(char **names, size_t count, bool with_process)
{
    char *list = xstrdup(with_process ? "\"" PACK_PROCESS_COLUMN "\"" : "");
    for (size_t i = 0; i < count; i++) {
        char *q = sqlite3_mprintf("\"%w\"", names[i]);
        char *more = xasprintf("%s%s%s", list, list[0] ? ", " : "", q ? q : "\"\"");
        sqlite3_free(q);
        free(list);
        list = more;
    }
    return list;
}

/* The pack's table for a trace's table, created or widened to hold every
 * column the trace has. */
static int ensure_table(struct packer *p, const char *name, const struct columns *c)
{
    struct pack_table *pt = find_table(p, name);
    char *qname = sqlite3_mprintf("\"%w\"", name);
    int rc = 0;
    bool created = !pt;
    if (created) {
        /* The trace's key, in key order, after process. */
        char *key = xstrdup("\"" PACK_PROCESS_COLUMN "\"");
        for (int k = 1; (size_t)k <= c->count; k++)
            for (size_t i = 0; i < c->count; i++)
                if (c->key[i] == k) {
                    char *q = sqlite3_mprintf("\"%w\"", c->names[i]);
                    char *more = xasprintf("%s, %s", key, q);
                    sqlite3_free(q);
                    free(key);
                    key = more;
                }
        bool by_key = strchr(key, ',') != NULL;
        char *cols = quoted_list(c->names, c->count, false);
        char *sql =
            by_key ? xasprintf("CREATE TABLE %s(\"" PACK_PROCESS_COLUMN
                               "\" INTEGER NOT NULL, %s, PRIMARY KEY (%s)) WITHOUT ROWID",
                               qname, cols, key)
                   : xasprintf("CREATE TABLE %s(\"" PACK_PROCESS_COLUMN "\" INTEGER NOT NULL, %s)",
                               qname, cols);
        rc = exec_sql(p, sql);
        free(sql);
        free(cols);
        free(key);
        p->tables = xgrow(p->tables, &p->cap, p->ntables + 1, sizeof(*p->tables));
        pt = &p->tables[p->ntables++];
        *pt = (struct pack_table){.name = xstrdup(name), .by_key = by_key};
    }
    for (size_t i = 0; i < c->count && rc == 0; i++) {
        if (has_column(pt, c->names[i]))
            continue;
        if (!created) { /* a column the traces packed before lack: older ones */
            char *sql = sqlite3_mprintf("ALTER TABLE %s ADD COLUMN \"%w\"", qname, c->names[i]);
            rc = exec_sql(p, sql);
            sqlite3_free(sql);
        }
        pt->columns = xgrow(pt->columns, &pt->cap, pt->ncolumns + 1, sizeof(*pt->columns));
        pt->columns[pt->ncolumns++] = xstrdup(c->names[i]);
    }
    sqlite3_free(qname);
    return rc;
}

/* Every row of the trace's object into the pack's table of that name. */
static int copy_rows(struct packer *p, struct trace *t, int64_t process, const char *object,
                     const struct columns *c)
{
    char *cols = quoted_list(c->names, c->count, false);
    char *qname = sqlite3_mprintf("\"%w\"", object);
    char *select = xasprintf("SELECT %s FROM %s", cols, qname);
    char *all = quoted_list(c->names, c->count, true);
    char *marks = xstrdup("?");
    for (size_t i = 0; i < c->count; i++) {
        char *more = xasprintf("%s, ?", marks);
        free(marks);
        marks = more;
    }
    char *insert = xasprintf("INSERT INTO %s(%s) VALUES (%s)", qname, all, marks);
    free(cols);
    free(all);
    free(marks);
    sqlite3_free(qname);
    sqlite3_stmt *from = NULL, *to = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(t->db, select, -1, &from, NULL) != SQLITE_OK)
        rc = read_fail(p, t, from);
    else if (sqlite3_prepare_v2(p->db, insert, -1, &to, NULL) != SQLITE_OK)
        rc = write_fail(p, to);
    free(select);
    free(insert);
    if (rc != 0) {
        sqlite3_finalize(from);
        return rc;
    }
    int step;
    while ((step = sqlite3_step(from)) == SQLITE_ROW) {
        sqlite3_bind_int64(to, 1, process);
        for (size_t i = 0; i < c->count; i++)
            sqlite3_bind_value(to, (int)i + 2, sqlite3_column_value(from, (int)i));
        if (sqlite3_step(to) != SQLITE_DONE) {
            sqlite3_finalize(from);
            return write_fail(p, to);
        }
        sqlite3_reset(to);
    }
    if (step != SQLITE_DONE) {
        sqlite3_finalize(to);
        return read_fail(p, t, from);
    }
    sqlite3_finalize(from);
    sqlite3_finalize(to);
    return 0;
}

/* pack_objects' and pack_columns' rows for one object of a trace. */
static int record_object(struct packer *p, int64_t process, int64_t ord, const char *type,
                         const char *name, const char *sql, const struct columns *c)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(p->db, "INSERT INTO pack_objects VALUES (?, ?, ?, ?, ?)", -1, &stmt,
                           NULL) != SQLITE_OK)
        return write_fail(p, stmt);
    sqlite3_bind_int64(stmt, 1, process);
    sqlite3_bind_int64(stmt, 2, ord);
    sqlite3_bind_text(stmt, 3, type, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 4, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 5, sql, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) != SQLITE_DONE)
        return write_fail(p, stmt);
    sqlite3_finalize(stmt);
    if (!c)
        return 0;
    if (sqlite3_prepare_v2(p->db, "INSERT INTO pack_columns VALUES (?, ?, ?, ?)", -1, &stmt,
                           NULL) != SQLITE_OK)
        return write_fail(p, stmt);
    for (size_t i = 0; i < c->count; i++) {
        sqlite3_bind_int64(stmt, 1, process);
        sqlite3_bind_text(stmt, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 3, (int64_t)i);
        sqlite3_bind_text(stmt, 4, c->names[i], -1, SQLITE_STATIC);
        if (sqlite3_step(stmt) != SQLITE_DONE)
            return write_fail(p, stmt);
        sqlite3_reset(stmt);
    }
    sqlite3_finalize(stmt);
    return 0;
}

/* One object of a trace: its definition, and a table's rows (a view is
 * made again over every process, CT_PACK_VIEWS_SQL). */
static int pack_object(struct packer *p, struct trace *t, int64_t process, int64_t ord,
                       const char *type, const char *name, const char *sql)
{
    bool table = strcmp(type, "table") == 0;
    if (packed_is_own_table(name))
        return pack_fail(p, "%s: has a table or view named '%s', which a pack uses itself", t->path,
                         name);
    struct columns c = {0};
    int rc = 0;
    if (table) {
        rc = read_columns(p, t, name, &c);
        if (rc == 0)
            rc = ensure_table(p, name, &c);
        if (rc == 0)
            rc = copy_rows(p, t, process, name, &c);
    }
    if (rc == 0)
        rc = record_object(p, process, ord, type, name, sql, table ? &c : NULL);
    columns_free(&c);
    return rc;
}

static int pack_trace(struct packer *p, struct trace *t, int64_t process)
{
    if (t->packed)
        return pack_fail(p, "%s: already packed (give the run's directory instead)", t->path);
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(p->db, "INSERT INTO pack_traces VALUES (?, ?)", -1, &stmt, NULL) !=
        SQLITE_OK)
        return write_fail(p, stmt);
    sqlite3_bind_int64(stmt, 1, process);
    sqlite3_bind_text(stmt, 2, t->file, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) != SQLITE_DONE)
        return write_fail(p, stmt);
    sqlite3_finalize(stmt);

    /* Read whole first: the objects are then read with other statements. */
    if (sqlite3_prepare_v2(t->db,
                           "SELECT type, name, sql FROM sqlite_schema WHERE type IN"
                           " ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                           " ORDER BY rowid",
                           -1, &stmt, NULL) != SQLITE_OK)
        return read_fail(p, t, stmt);
    char **rows = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
        for (int col = 0; col < 3; col++) {
            const unsigned char *text = sqlite3_column_text(stmt, col);
            rows = xgrow(rows, &cap, n + 1, sizeof(*rows));
            rows[n++] = text ? xstrdup((const char *)text) : NULL;
        }
    rc = rc == SQLITE_DONE ? 0 : read_fail(p, t, stmt);
    if (rc == 0)
        sqlite3_finalize(stmt);
    for (size_t i = 0; rc == 0 && i + 2 < n; i += 3)
        rc = rows[i] && rows[i + 1]
                 ? pack_object(p, t, process, (int64_t)(i / 3), rows[i], rows[i + 1], rows[i + 2])
                 : pack_fail(p, "%s: damaged schema", t->path);
    for (size_t i = 0; i < n; i++)
        free(rows[i]);
    free(rows);
    return rc;
}

/* The run's manifest (the manifest.json beside its first trace that has
 * one, model/manifest.h): 1 found, 0 none, -1 after its one-line error. */
static int find_manifest(const struct trace_set *set, struct run_manifest *found)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < set->count; i++)
        rc = manifest_find(set->traces[i].path, found);
    return rc;
}

/* Its text into the manifest table: what every report reads of a packed
 * run instead of the file. */
static int pack_manifest(struct packer *p, const struct run_manifest *found)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(p->db, "INSERT INTO manifest(json) VALUES (?)", -1, &stmt, NULL) !=
            SQLITE_OK ||
        sqlite3_bind_text(stmt, 1, found->text, (int)found->text_len, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_step(stmt) != SQLITE_DONE)
        return write_fail(p, stmt);
    sqlite3_finalize(stmt);
    return 0;
}

/* An index on process for the tables without a key of their own (the
 * process row), so one process's rows are found directly. */
static int index_tables(struct packer *p)
{
    for (size_t i = 0; i < p->ntables; i++) {
        if (p->tables[i].by_key)
            continue;
        char *sql =
            sqlite3_mprintf("CREATE INDEX \"pack_index_%w\" ON \"%w\"(\"" PACK_PROCESS_COLUMN "\")",
                            p->tables[i].name, p->tables[i].name);
        int rc = exec_sql(p, sql);
        sqlite3_free(sql);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int write_pack(struct packer *p, const char *tmp, struct trace_set *set,
                      const struct run_manifest *manifest)
{
    if (sqlite3_open_v2(tmp, &p->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
        return pack_fail(p, "cannot create %s (sqlite: %s)", tmp,
                         p->db ? sqlite3_errmsg(p->db) : "out of memory");
    /* A private file until it is published: no journal needed. */
    if (exec_sql(p, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN;") != 0 ||
        exec_sql(p, PACK_SCHEMA_SQL) != 0)
        return -1;
    char *info = sqlite3_mprintf("INSERT INTO pack_info VALUES ('schema', '%q'),"
                                 " ('pack_version', %d), ('producer', 'cutrace %q')",
                                 PACK_SCHEMA_NAME, PACK_VERSION, CUTRACE_VERSION);
    int rc = exec_sql(p, info);
    sqlite3_free(info);
    for (size_t i = 0; rc == 0 && i < set->count; i++)
        rc = pack_trace(p, &set->traces[i], (int64_t)i + 1);
    if (rc == 0 && manifest)
        rc = pack_manifest(p, manifest);
    /* The documented views, over every process: one definition with the
     * traces' (include/cutrace/schema.h). */
    if (rc == 0)
        rc = exec_sql(p, CT_PACK_VIEWS_SQL);
    if (rc == 0)
        rc = index_tables(p);
    if (rc == 0)
        rc = exec_sql(p, "COMMIT");
    /* Readers open it read-only: a rollback journal leaves no side files. */
    if (rc == 0)
        rc = exec_sql(p, "PRAGMA journal_mode = DELETE");
    if (sqlite3_close(p->db) != SQLITE_OK && rc == 0)
        rc = pack_fail(p, "cannot close %s", tmp);
    p->db = NULL;
    int fd = rc == 0 ? open(tmp, O_RDONLY | O_CLOEXEC) : -1;
    if (rc == 0 && (fd < 0 || fsync(fd) != 0))
        rc = pack_fail(p, "cannot write %s: %s", tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

/* FILE's directory and a hidden name in it for the file being written. */
static char *temporary_name(const char *out)
{
    const char *slash = strrchr(out, '/');
    if (!slash)
        return xasprintf(".%s.tmp-%ld", out, (long)getpid());
    return xasprintf("%.*s/.%s.tmp-%ld", (int)(slash - out), out, slash + 1, (long)getpid());
}

static int publish(struct packer *p, const char *tmp, const char *out, bool force)
{
    if (force ? rename(tmp, out) != 0 : link(tmp, out) != 0) {
        if (errno == EEXIST)
            return pack_fail(p, "exists (use --force to replace it)");
        return pack_fail(p, "cannot write: %s", strerror(errno));
    }
    if (!force)
        unlink(tmp);
    return 0;
}

int cmd_pack(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, OPT_FORCE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL;
    bool force = false;
    int c;
    while ((c = cli_getopt(argc, argv, "o:h", options, usage)) != -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case OPT_FORCE:
            force = true;
            break;
        case 'h':
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    struct cli_report_opts o;
    cli_report_init(&o);
    if (cli_report_operands(&o, argc, argv, optind) != CLI_PARSED)
        return CLI_EXIT_USAGE;
    if (!out || !out[0])
        return cli_usage_error(argv[0], "-o FILE is required: the packed file to write");
    struct stat st;
    if (lstat(out, &st) == 0 && (!force || S_ISDIR(st.st_mode))) {
        cli_error(out,
                  S_ISDIR(st.st_mode) ? "is a directory" : "exists (use --force to replace it)");
        return CLI_EXIT_USAGE;
    }

    struct trace_set set;
    if (trace_set_open_paths(&set, o.paths, o.npaths) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct run_manifest manifest;
    int found = find_manifest(&set, &manifest);
    if (found < 0) {
        trace_set_close(&set);
        return CLI_EXIT_BAD_INPUT;
    }
    struct packer p = {0};
    char *tmp = temporary_name(out);
    unlink(tmp); /* ours from an earlier run of this pid, never another's name */
    int rc = write_pack(&p, tmp, &set, found ? &manifest : NULL);
    if (found)
        manifest_free(&manifest);
    if (p.db)
        sqlite3_close(p.db);
    trace_set_close(&set);
    if (rc == 0)
        rc = publish(&p, tmp, out, force);
    if (rc != 0) {
        unlink(tmp);
        cli_error(out, "%s", p.error);
    }
    free(tmp);
    for (size_t i = 0; i < p.ntables; i++) {
        for (size_t k = 0; k < p.tables[i].ncolumns; k++)
            free(p.tables[i].columns[k]);
        free(p.tables[i].columns);
        free(p.tables[i].name);
    }
    free(p.tables);
    if (rc != 0 && strstr(p.error, "exists (use --force"))
        return CLI_EXIT_USAGE;
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_BAD_INPUT;
}
