/*
 * rawinsert.c - the writer's baseline for `make bench`: the events rows of a
 * trace inserted again by plain SQLite, in the same run, so that the
 * writer's records/s and instructions per record have a floor to be held
 * against (what SQLite alone costs for those rows on this machine).
 *
 *   rawinsert TRACE.db OUT.db [ROWS_PER_COMMIT]   prints "<rows> <seconds>"
 *
 * Every row of TRACE.db's `events` (whatever its columns are: the writer may
 * change them) is read into memory first; then OUT.db (which must not exist)
 * gets the same table, created from the trace's own definition, with the
 * connection and pragmas of the tracer's store (no mutex, WAL,
 * synchronous=NORMAL), and the rows go in through one prepared INSERT,
 * committed every ROWS_PER_COMMIT rows (default 16384, the writer's batch).
 * Only the insert is timed, and only it runs inside raw_insert_rows, so
 * that callgrind can count it alone (--toggle-collect=raw_insert_rows).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

struct rows {
    sqlite3_value **v; /* n * cols values, row by row */
    long n;
    int cols;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(sqlite3 *db, const char *what)
{
    fprintf(stderr, "rawinsert: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
    return 1;
}

/* The table's definition and every row, from the trace. */
static int load(const char *path, char **ddl, struct rows *r)
{
    char uri[4200];
    snprintf(uri, sizeof uri, "file:%s?immutable=1", path);
    sqlite3 *db;
    sqlite3_stmt *s;
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK)
        return fail(db, path);
    if (sqlite3_prepare_v2(db,
                           "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'",
                           -1, &s, NULL) != SQLITE_OK ||
        sqlite3_step(s) != SQLITE_ROW)
        return fail(db, "the trace has no events table");
    *ddl = strdup((const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    if (sqlite3_prepare_v2(db, "SELECT * FROM events", -1, &s, NULL) != SQLITE_OK)
        return fail(db, "SELECT");
    r->cols = sqlite3_column_count(s);
    long cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (r->n == cap) {
            cap = cap ? 2 * cap : 4096;
            r->v = realloc(r->v, sizeof *r->v * (size_t)cap * (size_t)r->cols);
            if (!r->v)
                return fail(NULL, "rows");
        }
        for (int c = 0; c < r->cols; c++)
            r->v[r->n * r->cols + c] = sqlite3_value_dup(sqlite3_column_value(s, c));
        r->n++;
    }
    if (rc != SQLITE_DONE)
        return fail(db, "reading events");
    sqlite3_finalize(s);
    sqlite3_close(db);
    return 0;
}

__attribute__((noinline)) int raw_insert_rows(sqlite3 *db, sqlite3_stmt *ins, const struct rows *r,
                                              long per_commit);
__attribute__((noinline)) int raw_insert_rows(sqlite3 *db, sqlite3_stmt *ins, const struct rows *r,
                                              long per_commit)
{
    for (long i = 0; i < r->n; i++) {
        if (i % per_commit == 0 && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
            return 1;
        for (int c = 0; c < r->cols; c++)
            sqlite3_bind_value(ins, c + 1, r->v[i * r->cols + c]);
        if (sqlite3_step(ins) != SQLITE_DONE || sqlite3_reset(ins) != SQLITE_OK)
            return 1;
        if ((i + 1) % per_commit == 0 || i + 1 == r->n)
            if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
                return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fputs("usage: rawinsert TRACE.db OUT.db [ROWS_PER_COMMIT]\n", stderr);
        return 2;
    }
    long per_commit = argc == 4 ? atol(argv[3]) : 16384;
    if (per_commit < 1)
        return 2;
    char *ddl = NULL;
    struct rows r = {0};
    if (load(argv[1], &ddl, &r))
        return 1;
    assert(r.cols > 0);
    sqlite3 *db;
    if (sqlite3_open_v2(argv[2], &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_EXCLUSIVE |
                            SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK)
        return fail(db, argv[2]);
    if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(db, ddl, NULL, NULL, NULL) != SQLITE_OK)
        return fail(db, "creating the table");
    /* "INSERT INTO events VALUES(?, ?, ...)" with one ? per column. */
    char *sql = malloc(64 + 3 * (size_t)r.cols);
    if (!sql)
        return fail(NULL, "sql");
    strcpy(sql, "INSERT INTO events VALUES(?");
    for (int c = 1; c < r.cols; c++)
        strcat(sql, ", ?");
    strcat(sql, ")");
    sqlite3_stmt *ins;
    if (sqlite3_prepare_v2(db, sql, -1, &ins, NULL) != SQLITE_OK)
        return fail(db, "INSERT");
    double t0 = now_s();
    if (raw_insert_rows(db, ins, &r, per_commit))
        return fail(db, "inserting");
    double secs = now_s() - t0;
    sqlite3_finalize(ins);
    if (sqlite3_close(db) != SQLITE_OK)
        return fail(db, "closing");
    printf("%ld %.6f\n", r.n, secs);
    for (long i = 0; i < r.n * r.cols; i++)
        sqlite3_value_free(r.v[i]);
    free(r.v);
    free(sql);
    free(ddl);
    return 0;
}
