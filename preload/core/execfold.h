/*
 * execfold.h - the trace of a program image that exec replaced, completed by
 * the image that replaced it.
 *
 * An exec can fail, and the process then goes on: until it has succeeded,
 * the old image must keep its ring (crash safety for the rest of the
 * process) and must not tell its trace "exec". After it has succeeded,
 * nothing of the old image runs. So the old image leaves a marker,
 * <dir>/.exec-<pid>, a symlink naming its ring, and notes "exec" in the
 * ring; a successful exec closes the ring's O_CLOEXEC descriptor and so
 * drops its lock. The new image, when it loads libcutrace (the environment
 * is inherited), finds the marker of its own pid with one readlink, and
 * does what `cutrace recover` would: the ring's uncommitted records go into
 * the trace, meta end_state becomes what the ring says, the trace is sealed
 * (one self-contained file), and the ring and the marker are deleted. A new
 * image that is not traced leaves the ring to `cutrace recover` (which every
 * report runs first); its marker is removed by the next traced process of
 * that pid.
 */
#ifndef CUTRACE_EXECFOLD_H
#define CUTRACE_EXECFOLD_H

#include <stdint.h>

/* Before an exec: the marker naming ring_path (in dir); 0, or -1 with errno. */
int ct_execfold_mark(const char *dir, int64_t pid, const char *ring_path);

/* The exec failed: the marker goes. */
void ct_execfold_unmark(const char *dir, int64_t pid);

/*
 * At library load: completes the trace of the image this process replaced,
 * if it left a marker. Its file writes run on a signal-free thread
 * (sigfree.h); errno is preserved; nothing is said on stderr (a ring left
 * behind is folded by `cutrace recover`, so nothing is lost).
 */
void ct_execfold_complete(const char *dir, int64_t pid);

#endif
