/*
 * shellquote.h - words and command lines as a POSIX shell reads them back,
 * for what a user may paste: the trace directory in `cutrace run`'s closing
 * line, and the launched command of a run manifest, which must read exactly
 * like the tracer's process.cmdline (preload/core/procinfo.c quotes with the
 * same rule) so that a flag is found in both the same way.
 */
#ifndef CUTRACE_ANALYZER_SHELLQUOTE_H
#define CUTRACE_ANALYZER_SHELLQUOTE_H

#include <stddef.h>

/* word as it is when it needs no quotes, else in single quotes with each
 * ' written '\'' (malloc'd; "" becomes ''). */
char *shell_quote(const char *word);

/* The words joined by single spaces, each shell_quote'd (malloc'd; "" for none). */
char *shell_join(char *const *words, size_t count);

#endif
