/*
 * packed.c - recognising a packed run file, listing its processes, and the
 * TEMP views through which one of them reads as its own trace (packed.h).
 * Everything read here comes from a file that may be hostile: names only
 * ever reach SQL quoted, and a view's SQL is accepted only as one CREATE
 * VIEW statement, executed in the temp schema of a read-only connection
 * that trace.c opened defensively.
 */
#include "model/packed.h"

#include "cli.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SQLITE_MAGIC "SQLite format 3"

static const char *const own_tables[] = {"pack_info", "pack_traces", "pack_objects", "pack_columns",
                                         "manifest"};

static bool among(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, list[i]) == 0)
            return true;
    return false;
}

bool packed_is_own_table(const char *name)
{
    return among(name, own_tables, sizeof(own_tables) / sizeof(own_tables[0]));
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cli_vformat_line(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int open_readonly(const char *path, sqlite3 **db)
{
    int rc = sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_db_config(*db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
        sqlite3_db_config(*db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
    }
    return rc;
}

static bool starts_like_sqlite(const char *path)
{
    char header[sizeof(SQLITE_MAGIC)];
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    size_t n = fread(header, 1, sizeof(header), f);
    fclose(f);
    return n == sizeof(header) && memcmp(header, SQLITE_MAGIC, sizeof(header)) == 0;
}

/* The text of pack_info's row for key, NULL when there is none. */
static char *info_text(sqlite3 *db, const char *key)
{
    sqlite3_stmt *stmt = NULL;
    char *value = NULL;
    if (sqlite3_prepare_v2(db, "SELECT value FROM pack_info WHERE key = ?", -1, &stmt, NULL) ==
            SQLITE_OK &&
        sqlite3_bind_text(stmt, 1, key, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0))
        value = xstrdup((const char *)sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return value;
}

int packed_probe(const char *path, char *err, size_t errlen)
{
    if (!starts_like_sqlite(path))
        return 0;
    sqlite3 *db = NULL;
    if (open_readonly(path, &db) != SQLITE_OK) {
        sqlite3_close(db);
        return 0; /* trace.c says why it cannot be opened */
    }
    sqlite3_stmt *stmt = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(
            db, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'pack_info'", -1,
            &stmt, NULL) == SQLITE_OK)
        found = sqlite3_step(stmt) == SQLITE_ROW;
    sqlite3_finalize(stmt);
    int rc = found;
    if (found) {
        char *schema = info_text(db, "schema");
        char *version = info_text(db, "pack_version");
        char *end = NULL;
        long long v = version ? strtoll(version, &end, 10) : 0;
        if (!schema || strcmp(schema, PACK_SCHEMA_NAME) != 0)
            rc = fail(err, errlen, "not a packed cutrace run (pack_info schema is not '%s')",
                      PACK_SCHEMA_NAME);
        else if (!version || *end != '\0' || v < 1)
            rc = fail(err, errlen, "damaged packed run: invalid pack_version '%.32s'",
                      version ? version : "NULL");
        else if (v > PACK_VERSION)
            rc = fail(err, errlen,
                      "packed by a newer cutrace (pack version %lld, this build reads "
                      "up to %d)",
                      v, PACK_VERSION);
        free(schema);
        free(version);
    }
    sqlite3_close(db);
    return rc;
}

int packed_list(const char *path, struct packed_entry **entries, size_t *count, char *err,
                size_t errlen)
{
    *entries = NULL;
    *count = 0;
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    int rc = open_readonly(path, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "SELECT process, file FROM pack_traces ORDER BY process", -1,
                                &stmt, NULL);
    size_t cap = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const unsigned char *file = sqlite3_column_text(stmt, 1);
        if (sqlite3_column_type(stmt, 0) != SQLITE_INTEGER || !file || !file[0]) {
            rc = SQLITE_CORRUPT;
            break;
        }
        *entries = xgrow(*entries, &cap, *count + 1, sizeof(**entries));
        (*entries)[*count].process = sqlite3_column_int64(stmt, 0);
        (*entries)[*count].file = xstrdup((const char *)file);
        ++*count;
        rc = SQLITE_OK;
    }
    int result = 0;
    if (rc != SQLITE_DONE)
        result = fail(err, errlen, "damaged packed run: cannot list its processes (sqlite: %s)",
                      rc == SQLITE_CORRUPT && db && sqlite3_errcode(db) == SQLITE_OK
                          ? "a pack_traces row without process or file"
                      : db ? sqlite3_errmsg(db)
                           : sqlite3_errstr(rc));
    else if (*count == 0)
        result = fail(err, errlen, "a packed run without processes (pack_traces is empty)");
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    if (result != 0) {
        packed_list_free(*entries, *count);
        *entries = NULL;
        *count = 0;
    }
    return result;
}

void packed_list_free(struct packed_entry *entries, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(entries[i].file);
    free(entries);
}

/* One row of pack_objects, read before any view is made: creating a view
 * changes the schema under a running statement. */
struct object {
    char *type, *name, *sql;
};

static int read_objects(sqlite3 *db, int64_t process, struct object **objects, size_t *count)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT type, name, sql FROM main.pack_objects WHERE process = ?"
                                " ORDER BY ord",
                                -1, &stmt, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(stmt, 1, process);
    size_t cap = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const unsigned char *type = sqlite3_column_text(stmt, 0);
        const unsigned char *name = sqlite3_column_text(stmt, 1);
        const unsigned char *sql = sqlite3_column_text(stmt, 2);
        *objects = xgrow(*objects, &cap, *count + 1, sizeof(**objects));
        (*objects)[(*count)++] = (struct object){
            .type = xstrdup(type ? (const char *)type : ""),
            .name = xstrdup(name ? (const char *)name : ""),
            .sql = sql ? xstrdup((const char *)sql) : NULL,
        };
        rc = SQLITE_OK;
    }
    sqlite3_finalize(stmt);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* "SELECT "a", "b" FROM main."name" WHERE process = N": the trace's own
 * columns of a packed table, NULL if the pack lists none for it. */
static char *filtered_select(sqlite3 *db, int64_t process, const char *name, int *rc)
{
    sqlite3_stmt *stmt = NULL;
    *rc = sqlite3_prepare_v2(db,
                             "SELECT name FROM main.pack_columns WHERE process = ? AND object = ?"
                             " ORDER BY cid",
                             -1, &stmt, NULL);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int64(stmt, 1, process);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_text(stmt, 2, name, -1, SQLITE_STATIC);
    char *columns = NULL;
    while (*rc == SQLITE_OK && (*rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const unsigned char *column = sqlite3_column_text(stmt, 0);
        char *quoted = sqlite3_mprintf("\"%w\"", column ? (const char *)column : "");
        char *more =
            xasprintf("%s%s%s", columns ? columns : "", columns ? ", " : "", quoted ? quoted : "");
        sqlite3_free(quoted);
        free(columns);
        columns = more;
        *rc = SQLITE_OK;
    }
    sqlite3_finalize(stmt);
    if (*rc == SQLITE_DONE)
        *rc = SQLITE_OK;
    if (*rc != SQLITE_OK || !columns) {
        free(columns);
        return NULL;
    }
    char *quoted = sqlite3_mprintf("\"%w\"", name);
    char *sql = xasprintf("SELECT %s FROM main.%s WHERE " PACK_PROCESS_COLUMN " = %" PRId64,
                          columns, quoted ? quoted : "\"\"", process);
    sqlite3_free(quoted);
    free(columns);
    return sql;
}

/* "CREATE VIEW ..." as the trace stored it, made a temp view; NULL when the
 * text is not a view's definition. */
static char *temp_view_sql(const char *sql)
{
    static const char prefix[] = "CREATE VIEW";
    if (!sql)
        return NULL;
    while (*sql == ' ' || *sql == '\n' || *sql == '\t')
        sql++;
    if (strncasecmp(sql, prefix, sizeof(prefix) - 1) != 0)
        return NULL;
    return xasprintf("CREATE TEMP VIEW%s", sql + sizeof(prefix) - 1);
}

/* Runs exactly one statement of sql: a view definition with something
 * after it is refused, not executed in part. */
static int exec_one(sqlite3 *db, const char *sql, bool *trailing)
{
    sqlite3_stmt *stmt = NULL;
    const char *tail = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, &tail);
    *trailing = false;
    if (rc == SQLITE_OK && tail)
        for (const char *c = tail; *c && !*trailing; c++)
            *trailing = !(*c == ' ' || *c == '\n' || *c == '\t' || *c == ';');
    if (rc == SQLITE_OK && !*trailing && stmt) {
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    sqlite3_finalize(stmt);
    return rc;
}

int packed_create_views(sqlite3 *db, int64_t process, char *err, size_t errlen)
{
    struct object *objects = NULL;
    size_t count = 0;
    int rc = read_objects(db, process, &objects, &count);
    int result = 0;
    if (rc != SQLITE_OK)
        result = fail(err, errlen, "damaged packed run: cannot read pack_objects (sqlite: %s)",
                      sqlite3_errmsg(db));
    for (size_t i = 0; i < count && result == 0; i++) {
        const struct object *o = &objects[i];
        char *sql = NULL;
        if (strncmp(o->name, "sqlite_", 7) == 0)
            continue; /* SQLite's own, never a trace's */
        if (strcmp(o->type, "table") == 0) {
            char *select = filtered_select(db, process, o->name, &rc);
            char *quoted = sqlite3_mprintf("\"%w\"", o->name);
            if (select && quoted)
                sql = xasprintf("CREATE TEMP VIEW %s AS %s", quoted, select);
            sqlite3_free(quoted);
            free(select);
            if (!sql && rc == SQLITE_OK)
                result =
                    fail(err, errlen, "damaged packed run: no columns for table '%.64s'", o->name);
        } else if (strcmp(o->type, "view") == 0) {
            sql = temp_view_sql(o->sql);
            if (!sql)
                result = fail(err, errlen, "damaged packed run: view '%.64s' has no definition",
                              o->name);
        } else {
            result = fail(err, errlen, "damaged packed run: object '%.64s' of type '%.16s'",
                          o->name, o->type);
        }
        bool trailing = false;
        if (sql && result == 0)
            rc = exec_one(db, sql, &trailing);
        free(sql);
        if (result == 0 && trailing)
            result =
                fail(err, errlen, "damaged packed run: view '%.64s' is more than a view", o->name);
        else if (result == 0 && rc != SQLITE_OK)
            result = fail(err, errlen, "damaged packed run: cannot read '%.64s' (sqlite: %s)",
                          o->name, sqlite3_errmsg(db));
    }
    if (result == 0 && count == 0)
        result =
            fail(err, errlen, "damaged packed run: process %" PRId64 " has no tables", process);
    for (size_t i = 0; i < count; i++) {
        free(objects[i].type);
        free(objects[i].name);
        free(objects[i].sql);
    }
    free(objects);
    return result;
}
