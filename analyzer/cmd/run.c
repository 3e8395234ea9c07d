/*
 * run.c - `cutrace run [-o DIR] [--] CMD ARGS...`: run a program with
 * libcutrace.so preloaded and its traces written to DIR.
 *
 * It behaves like the program itself as far as a shell or a supervisor can
 * tell: nothing on stdout, the program's exit status (128+N when it died of
 * signal N), 127/126 when it cannot be started, Ctrl-C delivered to the
 * program (the parent ignores SIGINT and SIGQUIT while waiting, as system(3)
 * does) and SIGTERM/SIGHUP sent to cutrace passed on to it. Failures of
 * cutrace itself before the program starts exit 125, like env(1) and
 * nice(1), so they cannot be mistaken for the program's own status.
 */
#include "cli.h"
#include "model/traceset.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_DIR     "cutrace-trace"
#define LIBRARY_NAME    "libcutrace.so"
#define EXIT_RUN_FAILED 125
#define EXIT_NOT_EXEC   126
#define EXIT_NOT_FOUND  127

static const char usage[] =
    "usage: cutrace run [-o DIR] [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD with libcutrace.so preloaded, writing one trace file per process\n"
    "(CMD and every process it starts) to DIR. CMD's output is untouched; when it\n"
    "ends, one line on stderr says where the traces are.\n"
    "\n"
    "options:\n"
    "  -o, --output DIR  trace directory (default ./" DEFAULT_DIR ", created 0700)\n"
    "  -h, --help        show this help\n"
    "\n"
    "environment:\n"
    "  CUTRACE_LIB       the libcutrace.so to preload (default: next to the cutrace\n"
    "                    binary, then ../lib/ relative to it)\n"
    "  CUTRACE_DISABLE   removed from CMD's environment, so that it is traced\n"
    "\n"
    "exit status: CMD's own, or 128+N if it died of signal N; 126 CMD not\n"
    "executable; 127 CMD not found; 125 cutrace could not set up the run;\n"
    "2 usage error\n";

/* ---- finding the library ---- */

static bool is_readable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

/* The absolute path of libcutrace.so, or NULL after printing why not. */
static char *find_library(void)
{
    const char *override = getenv("CUTRACE_LIB");
    if (override && override[0]) {
        if (!is_readable_file(override)) {
            cli_error(NULL, "CUTRACE_LIB=%s: not a readable file", override);
            return NULL;
        }
        char *resolved = realpath(override, NULL);
        if (!resolved)
            cli_error(NULL, "CUTRACE_LIB=%s: %s", override, strerror(errno));
        return resolved;
    }

    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        cli_error(NULL, "cannot locate the cutrace binary (%s); set CUTRACE_LIB", strerror(errno));
        return NULL;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    assert(slash);
    *slash = '\0';
    /* Build tree: build/cutrace beside build/libcutrace.so; installed:
     * PREFIX/bin/cutrace and PREFIX/lib/libcutrace.so. */
    char *beside = xasprintf("%s/%s", exe, LIBRARY_NAME);
    char *installed = xasprintf("%s/../lib/%s", exe, LIBRARY_NAME);
    char *found = NULL;
    if (is_readable_file(beside))
        found = realpath(beside, NULL);
    else if (is_readable_file(installed))
        found = realpath(installed, NULL);
    if (!found)
        cli_error(NULL, "cannot find %s (looked for %s and %s); set CUTRACE_LIB", LIBRARY_NAME,
                  beside, installed);
    free(beside);
    free(installed);
    return found;
}

/* ---- the environment of the child ---- */

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/*
 * LD_PRELOAD with the library first, keeping every existing entry; unchanged
 * if the library is already there (by path or as the same file), since a
 * tracer loaded twice would record every call twice.
 */
static char *compose_preload(const char *existing, const char *library)
{
    if (!existing)
        existing = "";
    char *copy = xstrdup(existing);
    bool present = false, has_entries = false;
    char *save = NULL;
    /* ld.so separates entries with spaces or colons. */
    for (char *entry = strtok_r(copy, " :", &save); entry; entry = strtok_r(NULL, " :", &save)) {
        has_entries = true;
        if (strcmp(entry, library) == 0 || same_file(entry, library))
            present = true;
    }
    free(copy);
    if (present)
        return xstrdup(existing);
    if (!has_entries)
        return xstrdup(library);
    return xasprintf("%s:%s", library, existing);
}

/* mkdir -p, the last component private (0700): traces hold command lines
 * and environment variables. */
static int make_trace_dir(const char *dir)
{
    char *path = xstrdup(dir);
    int rc = 0;
    for (char *p = path + 1; rc == 0; p++) {
        bool last = *p == '\0';
        if (*p != '/' && !last)
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, last ? 0700 : 0777) != 0 && errno != EEXIST)
            rc = -1;
        *p = saved;
        if (last)
            break;
    }
    struct stat st;
    if (rc == 0 && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        errno = ENOTDIR;
        rc = -1;
    }
    if (rc != 0)
        cli_error(dir, "cannot create the trace directory: %s", strerror(errno));
    free(path);
    return rc;
}

struct name_list {
    char **names;
    size_t count, cap;
};

static void list_traces(const char *dir, struct name_list *list)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (!trace_set_is_trace_name(entry->d_name))
            continue;
        list->names = xgrow(list->names, &list->cap, list->count + 1, sizeof(*list->names));
        list->names[list->count++] = xstrdup(entry->d_name);
    }
    closedir(d);
}

static bool list_contains(const struct name_list *list, const char *name)
{
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->names[i], name) == 0)
            return true;
    return false;
}

static void list_free(struct name_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->names[i]);
    free(list->names);
    memset(list, 0, sizeof(*list));
}

/* The directory as a shell word, so the suggested command can be pasted. */
static char *shell_quote(const char *word)
{
    bool plain = word[0] != '\0';
    for (const char *c = word; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,=:@%", *c))
            plain = false;
    if (plain)
        return xstrdup(word);
    size_t len = 2;
    for (const char *c = word; *c; c++)
        len += *c == '\'' ? 4 : 1;
    char *quoted = xmalloc(len + 1), *out = quoted;
    *out++ = '\'';
    for (const char *c = word; *c; c++) {
        if (*c == '\'') {
            memcpy(out, "'\\''", 4);
            out += 4;
        } else {
            *out++ = *c;
        }
    }
    *out++ = '\'';
    *out = '\0';
    return quoted;
}

/* ---- running the child ---- */

static volatile sig_atomic_t child_pid;

static void forward_signal(int sig)
{
    int saved = errno;
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
    errno = saved;
}

struct saved_signals {
    struct sigaction intr, quit, term, hup;
    sigset_t mask;
};

/* SIGTERM and SIGHUP stay blocked until the child's pid is known, so one
 * that arrives right after fork is forwarded rather than lost. */
static void prepare_signals(struct saved_signals *saved)
{
    sigset_t forwarded;
    sigemptyset(&forwarded);
    sigaddset(&forwarded, SIGTERM);
    sigaddset(&forwarded, SIGHUP);
    sigprocmask(SIG_BLOCK, &forwarded, &saved->mask);
    struct sigaction ignore = {.sa_handler = SIG_IGN}, forward = {.sa_handler = forward_signal};
    sigemptyset(&ignore.sa_mask);
    sigemptyset(&forward.sa_mask);
    forward.sa_flags = SA_RESTART;
    sigaction(SIGINT, &ignore, &saved->intr);
    sigaction(SIGQUIT, &ignore, &saved->quit);
    sigaction(SIGTERM, &forward, &saved->term);
    sigaction(SIGHUP, &forward, &saved->hup);
}

static void restore_signals(const struct saved_signals *saved)
{
    sigaction(SIGINT, &saved->intr, NULL);
    sigaction(SIGQUIT, &saved->quit, NULL);
    sigaction(SIGTERM, &saved->term, NULL);
    sigaction(SIGHUP, &saved->hup, NULL);
    sigprocmask(SIG_SETMASK, &saved->mask, NULL);
}

/* In the child after fork: set up the environment and exec. On failure the
 * errno travels to the parent through the close-on-exec pipe. */
static void exec_child(char **command, const char *preload, const char *trace_dir,
                       const struct saved_signals *saved, int report_fd)
{
    restore_signals(saved);
    int err = 0;
    /* An inherited CUTRACE_DISABLE=1 (kept to silence a tracer preloaded by
     * default) would defeat the run the user asked for; the program may
     * still set it again for processes it wants left alone. */
    if (setenv("LD_PRELOAD", preload, 1) != 0 || setenv("CUTRACE_DIR", trace_dir, 1) != 0 ||
        unsetenv("CUTRACE_DISABLE") != 0)
        err = errno;
    else {
        execvp(command[0], command);
        err = errno;
    }
    ssize_t ignored = write(report_fd, &err, sizeof(err));
    (void)ignored;
    _exit(err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND : EXIT_NOT_EXEC);
}

/* Runs the command and returns its shell-style status, or -1 with *exec_errno
 * set when it could not be started. */
static int run_child(char **command, const char *preload, const char *trace_dir, int *exec_errno)
{
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        *exec_errno = errno;
        return -1;
    }
    struct saved_signals saved;
    prepare_signals(&saved);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        *exec_errno = errno;
        restore_signals(&saved);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(pipe_fds[0]);
        exec_child(command, preload, trace_dir, &saved, pipe_fds[1]);
    }
    child_pid = pid;
    sigprocmask(SIG_SETMASK, &saved.mask, NULL); /* forward from now on */
    close(pipe_fds[1]);

    int err = 0;
    ssize_t n;
    do
        n = read(pipe_fds[0], &err, sizeof(err));
    while (n < 0 && errno == EINTR);
    close(pipe_fds[0]);

    int status = 0;
    pid_t waited;
    do
        waited = waitpid(pid, &status, 0);
    while (waited < 0 && errno == EINTR);
    child_pid = 0;
    restore_signals(&saved);

    if (n == (ssize_t)sizeof(err)) {
        *exec_errno = err;
        return -1;
    }
    if (waited < 0)
        return EXIT_RUN_FAILED;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return EXIT_RUN_FAILED;
}

static int report_exec_failure(const char *command, int err)
{
    if ((err == ENOENT) && !strchr(command, '/')) {
        cli_error(command, "command not found");
        return EXIT_NOT_FOUND;
    }
    cli_error(command, "%s", strerror(err));
    return err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND : EXIT_NOT_EXEC;
}

int cmd_run(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = DEFAULT_DIR;
    int c;
    /* '+': options end at the command, whose own options are its business. */
    while ((c = cli_getopt(argc, argv, "+o:h", options, usage)) != -1) {
        switch (c) {
        case 'o':
            dir = optarg;
            break;
        case 'h':
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage_error(argv[0], "missing the command to run");
    if (dir[0] == '\0')
        return cli_usage_error(argv[0], "empty trace directory name");
    char **command = &argv[optind];

    char *library = find_library();
    if (!library)
        return EXIT_RUN_FAILED;
    if (strpbrk(library, " :")) {
        cli_error(library, "LD_PRELOAD cannot name a path containing ' ' or ':'; set CUTRACE_LIB "
                           "to a copy elsewhere");
        free(library);
        return EXIT_RUN_FAILED;
    }
    if (make_trace_dir(dir) != 0) {
        free(library);
        return EXIT_RUN_FAILED;
    }
    /* Absolute, so that processes that change directory write to the same place. */
    char *trace_dir = realpath(dir, NULL);
    if (!trace_dir) {
        cli_error(dir, "%s", strerror(errno));
        free(library);
        return EXIT_RUN_FAILED;
    }
    char *preload = compose_preload(getenv("LD_PRELOAD"), library);

    struct name_list before = {0}, after = {0};
    list_traces(trace_dir, &before);
    int exec_errno = 0;
    int status = run_child(command, preload, trace_dir, &exec_errno);
    if (status < 0) {
        status = exec_errno ? report_exec_failure(command[0], exec_errno) : EXIT_RUN_FAILED;
    } else {
        list_traces(trace_dir, &after);
        size_t fresh = 0;
        for (size_t i = 0; i < after.count; i++)
            if (!list_contains(&before, after.names[i]))
                fresh++;
        char *quoted = shell_quote(dir);
        if (fresh == 0)
            fprintf(stderr,
                    "cutrace: no trace written to %s: the command made no CUDA calls, or did not "
                    "load %s (static or setuid program?)\n",
                    quoted, LIBRARY_NAME);
        else if (before.count > 0)
            fprintf(stderr,
                    "cutrace: trace in %s (%zu file%s, plus %zu from earlier runs); next: cutrace "
                    "summary %s\n",
                    quoted, fresh, fresh == 1 ? "" : "s", before.count, quoted);
        else
            fprintf(stderr, "cutrace: trace in %s (%zu file%s); next: cutrace summary %s\n", quoted,
                    fresh, fresh == 1 ? "" : "s", quoted);
        free(quoted);
    }
    list_free(&before);
    list_free(&after);
    free(preload);
    free(trace_dir);
    free(library);
    return status;
}
