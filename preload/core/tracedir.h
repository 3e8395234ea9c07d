/*
 * tracedir.h - the process's trace directory: resolved once, checked, held open.
 *
 * Trace files hold every recorded call, the command line and the environment,
 * so they must never be readable by another user, and a symlink on the way
 * (clusters mount /home -> /mnt/home) must not stop tracing. The directory is
 * resolved component by component with O_NOFOLLOW (symlinks are read and
 * their targets walked, never followed blindly), missing components are made
 * 0700, and the result is opened and checked: owned by the effective user,
 * not writable by group or others unless sticky. From then on every name in
 * it is reached through that descriptor (tracefile.c for the tracer's own
 * files, sqlfiles.c for SQLite's), never through the path again.
 */
#ifndef CUTRACE_TRACEDIR_H
#define CUTRACE_TRACEDIR_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Makes `dir` (absolute) the process's trace directory, creating what is
 * missing, and confines SQLite's files to it. 0, or -1 with errno and a
 * sentence naming the directory in `why` (EPERM: it is not trusted). Called
 * again with the same `dir` while the directory is held it keeps it (a forked
 * child). Not concurrent with the trace directory's users: a session calls it
 * before its writer starts.
 */
int ct_tracedir_use(const char *dir, char *why, size_t cap);

/*
 * Gives the directory up: its descriptor is closed if it is still ours (a
 * process whose trace could not be made keeps no descriptor of the tracer's:
 * under a tiny RLIMIT_NOFILE the program's next open() must get the number it
 * gets untraced). Then none is in use.
 */
void ct_tracedir_release(void);

/* Its canonical path (no symlink, "." or ".."), "" while none is in use. */
const char *ct_tracedir_path(void);

/*
 * For `path` = <canonical path>/<name> (one component): a descriptor of the
 * directory, checked to still be the directory that was resolved, and *name;
 * for the directory itself, its descriptor and ".". -1 with errno EXDEV when
 * the path lies elsewhere, ESTALE when the directory cannot be found again
 * (the program closed the descriptor and the directory is gone or changed).
 */
int ct_tracedir_at(const char *path, const char **name);

/*
 * True if fd, opened in the trace directory, is the tracer's own file: a
 * regular file of the effective user with no other link. A file another user
 * planted (in a sticky directory) fails this and is never written.
 */
bool ct_tracedir_owns(int fd);

#endif
