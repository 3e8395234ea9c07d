/*
 * cli.c - the conventions every cutrace subcommand follows: how options are
 * parsed and rejected, how errors are worded, and allocation that ends the
 * process cleanly when memory runs out (a report half-printed by a crash is
 * worse than a one-line error).
 */
#include "cli.h"

#include <assert.h>
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

int cli_report_args(int argc, char **argv, const char *usage, const char *operand,
                    struct cli_report_args *out)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    out->json = false;
    out->path = NULL;
    int c;
    while ((c = cli_getopt(argc, argv, "h", options, usage)) != -1) {
        switch (c) {
        case 'j':
            out->json = true;
            break;
        case 'h':
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage_error(argv[0], "missing %s", operand);
    if (argc - optind > 1)
        return cli_usage_error(argv[0], "one %s expected, got %d arguments", operand,
                               argc - optind);
    out->path = argv[optind];
    return CLI_PARSED;
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
