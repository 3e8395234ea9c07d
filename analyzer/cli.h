/*
 * cli.h - what every cutrace subcommand shares: its entry point signature,
 * the exit codes, uniform option and error reporting, and allocation helpers
 * that turn out-of-memory into a clean exit instead of a crash.
 *
 * A subcommand is one file (analyzer/cmd/NAME.c) defining
 *     int cmd_NAME(int argc, char **argv);
 * declared below, plus one line in the dispatch table in analyzer/cutrace.c.
 * argv[0] is the subcommand's name; parse options with cli_getopt() so every
 * subcommand reports bad options the same way and answers --help.
 */
#ifndef CUTRACE_ANALYZER_CLI_H
#define CUTRACE_ANALYZER_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>

/* Exit codes of the report subcommands (`run` passes on its child's instead). */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_BAD_INPUT = 1, /* a trace, directory or file could not be used */
    CLI_EXIT_USAGE = 2,     /* wrong options or arguments */
};

struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary; /* one line for `cutrace help` */
};

/* The dispatch table (cutrace.c) and its lookup, for help and tests. */
const struct cli_command *cli_find_command(const char *name);

/* Subcommand entry points: one per file, one line each. */
int cmd_summary(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_collectives(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_budget(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_sites(int argc, char **argv);

/*
 * getopt_long with cutrace's conventions, for a loop over one argv: options
 * may follow operands unless shortopts starts with '+'; -h/--help prints
 * `usage` to stdout and returns 'h' (the command then exits 0); an unknown
 * option or a missing argument prints one line to stderr and returns '?'
 * (the command then exits CLI_EXIT_USAGE). The first call of a loop resets
 * getopt's state, so a command can be run more than once in a process.
 * longopts must contain {"help", no_argument, NULL, 'h'}.
 */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
               const char *usage);

/*
 * The arguments of a plain report: `cutrace NAME [--json] PATH`, parsed with
 * cli_getopt (options anywhere). Returns CLI_PARSED when the command should
 * go on, else the exit code it should return (after --help, or a usage error
 * naming `operand`, e.g. "trace directory").
 */
struct cli_report_args {
    bool json;
    const char *path;
};
#define CLI_PARSED (-1)
int cli_report_args(int argc, char **argv, const char *usage, const char *operand,
                    struct cli_report_args *out);

/* "cutrace NAME: message" and a hint to --help on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "cutrace: subject: message" on stderr, one line (subject may be NULL). */
void cli_error(const char *subject, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_verror(const char *subject, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Allocation that cannot return NULL: out of memory ends the process (exit 1). */
void *xmalloc(size_t size);
void *xcalloc(size_t count, size_t size);
/* Grows an array to hold at least `need` elements of `elem` bytes; *cap is updated. */
void *xgrow(void *array, size_t *cap, size_t need, size_t elem);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "dir/name" (no doubled '/' when dir already ends in one), malloc'd. */
char *cli_path_join(const char *dir, const char *name);

#endif
