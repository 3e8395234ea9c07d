/*
 * cli.c - the conventions every cutrace subcommand follows: how options are
 * parsed and rejected, how errors are worded, and allocation that ends the
 * process cleanly when memory runs out (a report half-printed by a crash is
 * worse than a one-line error).
 */
#include "cli.h"

#include <assert.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_verror(const char *subject, const char *fmt, va_list ap)
{
    /* One line, always: scripts and tests rely on errors being grep-able. */
    char message[1024];
    vsnprintf(message, sizeof(message), fmt, ap);
    for (char *c = message; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    if (subject)
        fprintf(stderr, "cutrace: %s: %s\n", subject, message);
    else
        fprintf(stderr, "cutrace: %s\n", message);
}

void cli_error(const char *subject, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cli_verror(subject, fmt, ap);
    va_end(ap);
}

int cli_usage_error(const char *command, const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    fprintf(stderr, "cutrace %s: %s (see 'cutrace %s --help')\n", command, message, command);
    return CLI_EXIT_USAGE;
}

/* The argv of the getopt loop in progress, so that a new loop resets getopt. */
static char **getopt_argv;

void cli_report_init(struct cli_report_opts *o)
{
    *o = (struct cli_report_opts){.format = CLI_FORMAT_TEXT};
}

bool cli_report_option(struct cli_report_opts *o, int c, const char *arg)
{
    switch (c) {
    case CLI_OPT_JSON:
        o->json_given = true;
        o->format = CLI_FORMAT_JSON;
        return true;
    case CLI_OPT_CSV:
        o->csv_given = true;
        o->format = CLI_FORMAT_CSV;
        o->csv_arg = arg;
        return true;
    case CLI_OPT_FAIL_ON_PROBLEM:
        o->fail_on_problem = true;
        return true;
    case CLI_OPT_RANK:
        o->rank = arg;
        return true;
    case CLI_OPT_PID:
        o->pid = arg;
        return true;
    case CLI_OPT_HOST:
        o->host = arg;
        return true;
    case CLI_OPT_GPU:
        o->gpu = arg;
        return true;
    default:
        return false;
    }
}

bool cli_report_filtered(const struct cli_report_opts *o)
{
    return o->rank || o->pid || o->host || o->gpu;
}

int cli_report_finish(struct cli_report_opts *o, const char *command, const char *const *csv_tables)
{
    if (o->json_given && o->csv_given)
        return cli_usage_error(command, "--json and --csv exclude each other");
    if (o->csv_given) {
        if (!csv_tables || !csv_tables[0])
            return cli_usage_error(command, "this report has no table for --csv");
        o->csv_table = 0;
        if (o->csv_arg) {
            size_t i = 0;
            while (csv_tables[i] && strcmp(csv_tables[i], o->csv_arg) != 0)
                i++;
            if (!csv_tables[i]) {
                char names[256] = "";
                for (size_t k = 0; csv_tables[k]; k++)
                    snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
                             k ? ", " : "", csv_tables[k]);
                return cli_usage_error(command, "--csv=%s: no such table (tables: %s)", o->csv_arg,
                                       names);
            }
            o->csv_table = i;
        }
    }
    if (o->gpu && !o->gpu[0])
        return cli_usage_error(command, "--gpu needs a uuid prefix or an index");
    const struct {
        const char *name, *value;
        bool list;
    } filters[] = {{"--rank", o->rank, true},
                   {"--pid", o->pid, true},
                   {"--host", o->host, false},
                   {"--gpu", o->gpu, false}};
    for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
        const char *v = filters[i].value;
        if (!v)
            continue;
        if (!v[0])
            return cli_usage_error(command, "%s needs a value", filters[i].name);
        struct cli_range *ranges;
        size_t n;
        if (filters[i].list) {
            if (cli_parse_ranges(v, &ranges, &n) != 0)
                return cli_usage_error(command, "%s %s: expected numbers and ranges like 0,2,4-7",
                                       filters[i].name, v);
            free(ranges);
        }
    }
    return CLI_PARSED;
}

static bool parse_id(const char **p, int64_t *out)
{
    if (!isdigit((unsigned char)**p))
        return false;
    int64_t v = 0;
    while (isdigit((unsigned char)**p)) {
        int digit = **p - '0';
        if (v > (INT64_MAX - digit) / 10)
            return false;
        v = v * 10 + digit;
        (*p)++;
    }
    *out = v;
    return true;
}

int cli_parse_ranges(const char *text, struct cli_range **ranges, size_t *n)
{
    assert(text && ranges && n);
    struct cli_range *list = NULL;
    size_t count = 0, cap = 0;
    const char *p = text;
    for (;;) {
        struct cli_range r;
        if (!parse_id(&p, &r.lo))
            goto bad;
        r.hi = r.lo;
        if (*p == '-') {
            p++;
            if (!parse_id(&p, &r.hi) || r.hi < r.lo)
                goto bad;
        }
        list = xgrow(list, &cap, count + 1, sizeof(*list));
        list[count++] = r;
        if (*p == '\0')
            break;
        if (*p++ != ',')
            goto bad;
    }
    *ranges = list;
    *n = count;
    return 0;
bad:
    free(list);
    *ranges = NULL;
    *n = 0;
    return -1;
}

bool cli_ranges_contain(const struct cli_range *ranges, size_t n, int64_t value)
{
    for (size_t i = 0; i < n; i++)
        if (value >= ranges[i].lo && value <= ranges[i].hi)
            return true;
    return false;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
               const char *usage)
{
    assert(argc >= 1 && argv && argv[0]);
    if (argv != getopt_argv) {
        getopt_argv = argv;
        optind = 0; /* glibc: full re-initialisation */
    }
    opterr = 0;

    /* A leading ':' (after an optional '+') makes getopt tell a missing
     * argument (':') from an unknown option ('?'). */
    char opts[128];
    int in_order = shortopts[0] == '+';
    int n = snprintf(opts, sizeof(opts), "%s:%s", in_order ? "+" : "", shortopts + in_order);
    assert(n > 0 && (size_t)n < sizeof(opts));
    (void)n;

    int c = getopt_long(argc, argv, opts, longopts, NULL);
    const char *command = argv[0];
    /* After an error getopt has stepped past the offending word. */
    const char *word = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    int is_long = strncmp(word, "--", 2) == 0;
    switch (c) {
    case -1:
        getopt_argv = NULL;
        return -1;
    case 'h':
        fputs(usage, stdout);
        getopt_argv = NULL;
        return 'h';
    case '?':
        /* glibc leaves optopt 0 for an unknown long option. */
        if (optopt)
            cli_usage_error(command, "unknown option '-%c'", optopt);
        else
            cli_usage_error(command, "unknown option '%s'", word);
        getopt_argv = NULL;
        return '?';
    case ':':
        if (is_long || !optopt)
            cli_usage_error(command, "option '%s' needs a value", word);
        else
            cli_usage_error(command, "option '-%c' needs a value", optopt);
        getopt_argv = NULL;
        return '?';
    default:
        return c;
    }
}

void cli_vformat_line(char *buf, size_t size, const char *fmt, va_list ap)
{
    assert(size > 0);
    vsnprintf(buf, size, fmt, ap);
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = ' ';
}

static void out_of_memory(void)
{
    fputs("cutrace: out of memory\n", stderr);
    exit(CLI_EXIT_BAD_INPUT);
}

void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        out_of_memory();
    return p;
}

void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        out_of_memory();
    return p;
}

void *xgrow(void *array, size_t *cap, size_t need, size_t elem)
{
    assert(elem > 0);
    if (need <= *cap)
        return array;
    size_t grown = *cap ? *cap : 8;
    while (grown < need) {
        if (grown > SIZE_MAX / 2)
            out_of_memory();
        grown *= 2;
    }
    if (grown > SIZE_MAX / elem)
        out_of_memory();
    void *p = realloc(array, grown * elem);
    if (!p)
        out_of_memory();
    *cap = grown;
    return p;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (!p)
        out_of_memory();
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = NULL;
    int n = vasprintf(&p, fmt, ap);
    va_end(ap);
    if (n < 0)
        out_of_memory();
    return p;
}

char *cli_path_join(const char *dir, const char *name)
{
    size_t len = strlen(dir);
    if (len > 0 && dir[len - 1] == '/')
        return xasprintf("%s%s", dir, name);
    return xasprintf("%s/%s", dir, name);
}

int cli_report_parse(int argc, char **argv, const char *usage, const char *const *csv_tables,
                     struct cli_report_opts *o, const char **path)
{
    static const struct option options[] = {
        CLI_FILTER_OPTIONS,
        CLI_FORMAT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    cli_report_init(o);
    int c;
    while ((c = cli_getopt(argc, argv, "h", options, usage)) != -1) {
        if (cli_report_option(o, c, optarg))
            continue;
        return c == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    if (cli_report_operands(o, argc, argv, optind) != CLI_PARSED)
        return CLI_EXIT_USAGE;
    *path = o->paths[0];
    return cli_report_finish(o, argv[0], csv_tables);
}

int cli_report_operands(struct cli_report_opts *o, int argc, char **argv, int first)
{
    if (first >= argc)
        return cli_usage_error(argv[0], "missing trace directory");
    o->paths = (const char *const *)argv + first;
    o->npaths = (size_t)(argc - first);
    return CLI_PARSED;
}
