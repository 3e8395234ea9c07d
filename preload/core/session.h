/*
 * session.h - one traced process: its trace files, ring, writer and lifetime.
 *
 * A session is configured when the library loads (it only reads the
 * environment then), starts at the process's first CUDA event (creating the
 * trace files), and ends with a flush when the process exits, calls _exit or
 * exec. A forked child starts a session of its own.
 */
#ifndef CUTRACE_SESSION_H
#define CUTRACE_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "cutrace/format.h"

struct ct_mark;

/* False when this process is not traced (disabled, setuid, or failed). */
bool ct_session_tracing(void);

/* The next per-process sequence number (starts at 1). */
uint64_t ct_session_next_seq(void);
/* The last one taken: how many calls have started by now (a load, no add). */
uint64_t ct_session_seq_now(void);

/* Appends a finished record; creates the trace on the first one. */
void ct_session_append(struct ct_record *rec);

/*
 * An "entered" mark for a call that can block (ring.h): taken before the
 * real function runs, creating the trace if this is its first event, and
 * freed once the call's record is appended. NULL when the process is not
 * traced, has no file ring, or every mark is taken.
 */
struct ct_mark *ct_session_mark_enter(const struct ct_record *rec);
void ct_session_mark_leave(struct ct_mark *mark);

/* The process is about to end (end_state "exit", "_exit"). */
void ct_session_finish(const char *end_state);
/* The status it gave exit() or _exit(), stored (meta exit_status) by the finish. */
void ct_session_note_exit_status(int status);
/* The process is about to exec with this environment (environ for execv). */
void ct_session_before_exec(char *const envp[]);
/* An exec failed: the process goes on being traced. */
void ct_session_resume(void);

#endif
