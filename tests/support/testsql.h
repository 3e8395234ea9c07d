/*
 * testsql.h - helpers the unit and integration tests share: one-value SQL
 * queries against a trace, and removing scratch directories.
 */
#ifndef CUTRACE_TESTSQL_H
#define CUTRACE_TESTSQL_H

#include <sqlite3.h>
#include <stdint.h>

/* Opens a trace (SQLITE_OPEN_READONLY or _READWRITE); fails the test if it cannot. */
sqlite3 *tsql_open(const char *path, int flags);
/* First column of the first row as an integer; INT64_MIN if there is no row. */
int64_t tsql_int(sqlite3 *db, const char *sql);
/* The same as text in a static buffer: "" for NULL, "<none>" if there is no row. */
const char *tsql_text(sqlite3 *db, const char *sql);
/* Removes a directory tree (scratch directories of a test). */
void tsql_rmtree(const char *dir);

#endif
