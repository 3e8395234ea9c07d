/*
 * testsql.c - helpers shared by the unit and integration tests (testsql.h).
 */
#include "testsql.h"

#include <check.h>
#include <ftw.h>
#include <stdio.h>

sqlite3 *tsql_open(const char *path, int flags)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, flags, NULL);
    ck_assert_msg(rc == SQLITE_OK, "cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "?");
    return db;
}

static sqlite3_stmt *first_row(sqlite3 *db, const char *sql, int *has_row)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
    *has_row = sqlite3_step(s) == SQLITE_ROW;
    return s;
}

int64_t tsql_int(sqlite3 *db, const char *sql)
{
    int has_row;
    sqlite3_stmt *s = first_row(db, sql, &has_row);
    int64_t v = has_row ? sqlite3_column_int64(s, 0) : INT64_MIN;
    sqlite3_finalize(s);
    return v;
}

const char *tsql_text(sqlite3 *db, const char *sql)
{
    static char buf[8192];
    int has_row;
    sqlite3_stmt *s = first_row(db, sql, &has_row);
    const unsigned char *t = has_row ? sqlite3_column_text(s, 0) : NULL;
    snprintf(buf, sizeof buf, "%s", !has_row ? "<none>" : t ? (const char *)t : "");
    sqlite3_finalize(s);
    return buf;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tsql_rmtree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
