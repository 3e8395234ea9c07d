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

/* Installs the calls, once; false (and a reason in why) if SQLite refuses them. */
bool ct_sqlfiles_confine(char *why, size_t cap);

#endif
