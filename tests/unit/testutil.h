/*
 * testutil.h - small helpers for the unit tests: scratch directories and
 * files (SQL helpers are in tests/support/testsql.h).
 */
#ifndef CUTRACE_TESTUTIL_H
#define CUTRACE_TESTUTIL_H

#include "../support/testsql.h"

/* A fresh directory under $TMPDIR (or /tmp); the caller frees the string. */
char *tu_tmpdir(void);
/* Creates dir/name as an empty file and returns its malloc'd path. */
char *tu_empty_file(const char *dir, const char *name);

#endif
