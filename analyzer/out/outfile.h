/*
 * outfile.h - a report's output file (-o FILE): written whole or not at all.
 *
 * `cutrace report`, `diff --html` and `cutrace export` write files a reader
 * opens while they may still be written (a browser, ui.perfetto.dev). One
 * routine for all: the bytes go to a hidden name beside FILE
 * (.NAME.tmp-PID, as `cutrace pack` names its own), renamed over FILE once
 * complete, so a failed write never leaves half a file where a reader
 * expects one, and two runs writing beside each other never share a
 * temporary.
 */
#ifndef CUTRACE_OUT_OUTFILE_H
#define CUTRACE_OUT_OUTFILE_H

#include <stdio.h>

/*
 * Writes path through write(out, ctx), which returns 0, -1 after saying
 * why on stderr (cli_error), or another value for a failed write (said
 * here). Returns 0, or -1 after the one-line error. A path that is a
 * symbolic link or not a regular file (/dev/stdout, a pipe) is written in
 * place, through the link: a rename would replace the link or the device
 * node itself.
 */
int out_write_file(const char *path, int (*write)(FILE *out, void *ctx), void *ctx);

#endif
