/*
 * progress.h - the one progress line of a long load, on stderr: "cutrace:
 * loading 3/8 traces, 1.2M events", rewritten in place with \r at most four
 * times a second, shown only once the load has run for about two seconds
 * and only when stderr is a terminal (tests and pipes capture stderr and
 * expect it empty), and cleared when the load ends, before any error or
 * the report is printed.
 *
 * CUTRACE_PROGRESS_AFTER_MS (milliseconds, default 2000) moves the two
 * seconds, so that a test on a pseudo-terminal can see the line on a small
 * load. One line per process: the state is global, like stderr.
 */
#ifndef CUTRACE_ANALYZER_OUT_PROGRESS_H
#define CUTRACE_ANALYZER_OUT_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* Starts the clock of a load (a second begin restarts it). */
void progress_begin(void);
/* Where the load is: cheap enough to call every few thousand events. */
void progress_update(size_t traces_done, size_t traces, int64_t events);
/* Clears the line if one was shown; harmless when none was. */
void progress_end(void);

#endif
