/*
 * testutil.c - helpers for the unit tests (see testutil.h).
 */
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *tu_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char *path;
    ck_assert_int_ge(asprintf(&path, "%s/cutrace-unit-XXXXXX", base && *base ? base : "/tmp"), 0);
    ck_assert_ptr_nonnull(mkdtemp(path));
    return path;
}

char *tu_empty_file(const char *dir, const char *name)
{
    char *path;
    ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return path;
}
