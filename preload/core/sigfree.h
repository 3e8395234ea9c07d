/*
 * sigfree.h - threads of the tracer's own that no signal is delivered to.
 *
 * Writing a file can raise a signal: a write or posix_fallocate past
 * RLIMIT_FSIZE sends SIGXFSZ, whose default action kills the process, to the
 * thread that made the call. So every write to a trace file happens on a
 * thread that blocks all signals: the signal stays pending on that thread
 * and is discarded with it, the call fails with EFBIG, and the program's own
 * threads, masks and handlers never see it, as without the tracer.
 */
#ifndef CUTRACE_SIGFREE_H
#define CUTRACE_SIGFREE_H

#include <pthread.h>
#include <stdbool.h>

/* pthread_create for a thread that blocks every signal; returns its error. */
int ct_sigfree_create(pthread_t *thread, void *(*fn)(void *), void *arg);

/*
 * Runs fn(arg) on such a thread and waits for it. False, with errno set,
 * when no thread could be made: fn did not run.
 */
bool ct_sigfree_run(void (*fn)(void *), void *arg);

#endif
