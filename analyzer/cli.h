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
#include <stdint.h>

/* Exit codes of the report subcommands (`run` passes on its child's instead). */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_BAD_INPUT = 1, /* a trace, directory or file could not be used */
    CLI_EXIT_USAGE = 2,     /* wrong options or arguments, a filter that matches nothing */
    CLI_EXIT_PROBLEM = 3,   /* --fail-on-problem: the report found what it calls a problem */
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
int cmd_ls(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_export(int argc, char **argv);

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

/* What the parsing helpers below return when the command should go on. */
#define CLI_PARSED (-1)

/*
 * The options every report shares, parsed once here so that they read and
 * behave the same in every subcommand (docs/cli.md, "Conventions"):
 *
 *   --json                one JSON document instead of text
 *   --csv[=TABLE]         a table as CSV (RFC 4180), raw numbers; the main
 *                         table without TABLE (the command lists its tables)
 *   --fail-on-problem     exit CLI_EXIT_PROBLEM when the report finds a problem
 *   --rank/--pid LIST     only these processes: "0,2,4-7"
 *   --host LIST           only processes of these hosts: "node1,node2"
 *   --gpu UUID|INDEX      only this GPU (model/gpumodel.h: gm_select_gpu)
 *
 * A report puts CLI_FORMAT_OPTIONS (and CLI_FILTER_OPTIONS where it lists
 * processes or GPUs) in its getopt table, the matching _HELP lines in its
 * usage, hands every option cli_getopt returns to cli_report_option first,
 * and calls cli_report_finish after the loop. Filters are matched against
 * the loaded model by model/filter.h; tables are written by out/csv.h.
 */
enum cli_report_option_code {
    CLI_OPT_JSON = 0x200, /* above any short option character */
    CLI_OPT_CSV,
    CLI_OPT_FAIL_ON_PROBLEM,
    CLI_OPT_RANK,
    CLI_OPT_PID,
    CLI_OPT_HOST,
    CLI_OPT_GPU,
};
#define CLI_FORMAT_OPTIONS                                                                         \
    {"json", no_argument, NULL, CLI_OPT_JSON}, {"csv", optional_argument, NULL, CLI_OPT_CSV},      \
    {                                                                                              \
        "fail-on-problem", no_argument, NULL, CLI_OPT_FAIL_ON_PROBLEM                              \
    }
#define CLI_FILTER_OPTIONS                                                                         \
    {"rank", required_argument, NULL, CLI_OPT_RANK},                                               \
        {"pid", required_argument, NULL, CLI_OPT_PID},                                             \
        {"host", required_argument, NULL, CLI_OPT_HOST},                                           \
    {                                                                                              \
        "gpu", required_argument, NULL, CLI_OPT_GPU                                                \
    }

/* The help lines of the shared options: every usage lists its options in
 * these two columns (the option from column 2, its words from column 32). */
#define CLI_FORMAT_HELP                                                                            \
    "  --json                        one JSON document with raw numbers (bytes, ns)\n"             \
    "  --csv[=TABLE]                 a table as CSV with raw numbers (tables below)\n"             \
    "  --fail-on-problem             exit 3 when the report finds a problem (below)\n"
#define CLI_FILTER_HELP                                                                            \
    "  --rank LIST                   only the processes of these ranks: 0,2,4-7\n"                 \
    "  --pid LIST                    only these processes: 4242,4300-4310\n"                       \
    "  --host LIST                   only the processes of these hosts: node1,node2\n"             \
    "  --gpu UUID|INDEX              only this GPU: a uuid prefix, or its index\n"
#define CLI_HELP_HELP "  -h, --help                    show this help\n"
/* The budget's inputs, as the reports that replay a budget besides `cutrace
 * budget` (diff, report) list them; budget.c says more of each. */
#define CLI_BUDGET_INPUTS_HELP                                                                     \
    "  --cell-size BYTES             KV bytes per token (default 70272)\n"                         \
    "  --burst-min BYTES             smallest weight burst (default 1 GiB)\n"                      \
    "  --cuda-graph-estimate BYTES   vLLM: subtract this for CUDA graphs\n"                        \
    "  --server-version X.Y.Z        the server's release: chooses its code path\n"                \
    "  --page-size N                 SGLang: tokens per KV page\n"                                 \
    "  --max-total-tokens N          SGLang: cap on the pool\n"                                    \
    "  --num-layers N                the model's layers (SGLang) or KV layers (vLLM)\n"            \
    "  --draft-num-layers D          SGLang: the draft model's layers\n"                           \
    "  --multimodal                  SGLang: the model is multimodal\n"                            \
    "  --block-size N                vLLM: tokens per KV block\n"                                  \
    "  --block-bytes BYTES           vLLM: one layer's bytes per block\n"                          \
    "  --max-model-len N             vLLM: for its one-request check\n"
/* What a report's DIR... operands may be (cli_report_operands). */
#define CLI_PATHS_HELP                                                                             \
    "DIR... is one run: directories of traces, trace files or packed runs\n"                       \
    "(cutrace pack), in any mix; a trace given twice is refused.\n"
/* The exit-code table of a report's help; `problem` says what --fail-on-problem
 * counts as one ("a rank's verdict does not fit"). */
#define CLI_EXIT_HELP(problem)                                                                     \
    "exit status:\n"                                                                               \
    "  0  ok\n"                                                                                    \
    "  1  bad input: a trace, directory or file that cannot be used\n"                             \
    "  2  usage error: a wrong option or argument, a filter that matches nothing\n"                \
    "  3  with --fail-on-problem: " problem "\n"

enum cli_format { CLI_FORMAT_TEXT, CLI_FORMAT_JSON, CLI_FORMAT_CSV };

/* A range of ranks or pids, both ends included. */
struct cli_range {
    int64_t lo, hi;
};

struct cli_report_opts {
    enum cli_format format;
    const char *csv_arg; /* --csv=TABLE as given, NULL: the main table */
    size_t csv_table;    /* after cli_report_finish: index into the command's tables */
    bool fail_on_problem;
    const char *rank, *pid, *host, *gpu; /* the filters as given, NULL: not given */
    bool json_given, csv_given;
    /* The run's paths: directories, trace files or packed runs (argv's). */
    const char *const *paths;
    size_t npaths;
};

/* Zeroes o: text, no filter. */
void cli_report_init(struct cli_report_opts *o);
/* Takes option c when it is one of the shared ones (returns true). */
bool cli_report_option(struct cli_report_opts *o, int c, const char *arg);
/*
 * After the option loop: refuses --json with --csv, an empty filter, a LIST
 * that is not one, a --csv=TABLE not among `csv_tables` (NULL-terminated,
 * the main table first; NULL: the command has no CSV table). Returns
 * CLI_PARSED, or CLI_EXIT_USAGE after the one-line usage error.
 */
int cli_report_finish(struct cli_report_opts *o, const char *command,
                      const char *const *csv_tables);
/* True when some filter of o is given. */
bool cli_report_filtered(const struct cli_report_opts *o);

/*
 * The operands of a report after its option loop: one or more paths of one
 * run (directories, trace files, packed runs) into o->paths. Returns
 * CLI_PARSED, or CLI_EXIT_USAGE after "missing trace directory".
 */
int cli_report_operands(struct cli_report_opts *o, int argc, char **argv, int first);

/*
 * The whole command line of a report that takes only the shared options and
 * the paths of one run: the loop above, then the operands into o->paths
 * and the first into *path. Returns CLI_PARSED, or the exit code the
 * command should return (0 after --help, CLI_EXIT_USAGE after the one-line
 * usage error).
 */
int cli_report_parse(int argc, char **argv, const char *usage, const char *const *csv_tables,
                     struct cli_report_opts *o, const char **path);

/*
 * Parses "0,2,4-7" (decimal numbers >= 0, ranges lo-hi with lo <= hi,
 * separated by commas, nothing else) into *ranges (malloc'd, *n of them).
 * Returns 0, or -1 for anything else (nothing is allocated).
 */
int cli_parse_ranges(const char *text, struct cli_range **ranges, size_t *n);
bool cli_ranges_contain(const struct cli_range *ranges, size_t n, int64_t value);

/* "cutrace NAME: message" and a hint to --help on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Formats into buf (size > 0) as one line: control characters (from
 * SQLite's or a file's words) become spaces. */
void cli_vformat_line(char *buf, size_t size, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

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
