/*
 * sqlfiles.h - SQLite's files in the trace directory, reached only through it.
 *
 * SQLite opens a database by path and makes its -journal, -wal and -shm
 * beside it by path too, with O_CREAT but not O_EXCL, and deletes and remakes
 * them as it goes (on close, on reopen). Each of those opens is a chance for
 * another user who can add names to the directory to have the trace written
 * into a file they hold open. The tracer's private copy of SQLite is given
 * its own open, unlink, stat, lstat and access (the unix VFS's documented
 * xSetSystemCall): names in the trace directory go through the directory's
 * descriptor, never follow a symlink, and a file opened there is refused
 * unless it is the tracer's own (ct_tracedir_owns). Other paths are left to
 * SQLite's own calls.
 */
#ifndef CUTRACE_SQLFILES_H
#define CUTRACE_SQLFILES_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The trace directory, as the confined calls ask it: `at` gives the
 * directory's descriptor and the name in it for a path there (-1 with errno
 * EXDEV for a path elsewhere), `owns` whether a file opened there is the
 * tracer's own. Passed in by the directory's owner (tracedir.c), which
 * installs the calls, so that this file needs nothing of it.
 */
struct ct_sqlfiles_dir {
    int (*at)(const char *path, const char **name);
    bool (*owns)(int fd);
};

/* Installs the calls, once, answering from dir (static storage; the first
 * call's is kept: the tracer has one trace directory); false (and a reason
 * in why) if SQLite refuses them. */
bool ct_sqlfiles_confine(const struct ct_sqlfiles_dir *dir, char *why, size_t cap);

/*
 * While set, an open of the name `from` in the trace directory opens `to`
 * there instead (both plain names in it; NULL, NULL: none). A trace file is
 * made under its hidden name through a connection that bears its final
 * name, so that the connection, once the file is renamed into place, goes
 * on as the writer's with its -wal and -shm named right: the schema is
 * parsed once, not again by a second open. Set and cleared around one
 * sqlite3_open by the only thread using SQLite then (the writer).
 */
void ct_sqlfiles_redirect(const char *from, const char *to);

#endif
