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
 *
 * Each run gets a directory of its own inside DIR (runs.h), so that a DIR
 * used again never mixes two runs, and a manifest there (manifest.h) that
 * says what was launched, redacted like a trace: written when the command
 * starts, written again with how it ended. A manifest that cannot be
 * written costs a warning, never the run.
 */
#include "cli.h"
#include "cutrace/envcap.h"
#include "cutrace/redact.h"
#include "model/manifest.h"
#include "model/runs.h"
#include "out/shellquote.h"

#include <assert.h>
#include <ctype.h>
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
#include <time.h>
#include <unistd.h>

extern char **environ;

#define DEFAULT_DIR     "cutrace-trace"
#define LIBRARY_NAME    "libcutrace.so"
#define EXIT_RUN_FAILED 125
#define EXIT_NOT_EXEC   126
#define EXIT_NOT_FOUND  127

static const char usage[] =
    "usage: cutrace run [-o DIR] [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD with libcutrace.so preloaded, writing one trace file per process\n"
    "(CMD and every process it starts) to a new directory of this run inside DIR,\n"
    "DIR/run-<UTC start>-<host>-<pid>, with the run's manifest.json (the command,\n"
    "redacted; how it ended). CMD's output is untouched; when it ends, one line on\n"
    "stderr says where the traces are.\n"
    "\n"
    "options:\n"
    "  -o, --output DIR  directory of runs (default ./" DEFAULT_DIR ", created 0700)\n"
    "  -h, --help        show this help\n"
    "\n"
    "environment:\n"
    "  CUTRACE_LIB       the libcutrace.so to preload (default: next to the cutrace\n"
    "                    binary, then ../lib/ relative to it)\n"
    "  CUTRACE_DISABLE   removed from CMD's environment, so that it is traced\n"
    "  NVTX_INJECTION64_PATH  set to libcutrace.so, which records NVTX ranges and\n"
    "                    marks; a library already named there (Nsight Systems') is\n"
    "                    kept as CUTRACE_NVTX_CHAIN and gets every NVTX call too\n"
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
static void exec_child(char **command, const struct saved_signals *saved, int report_fd)
{
    restore_signals(saved);
    execvp(command[0], command);
    int err = errno;
    ssize_t ignored = write(report_fd, &err, sizeof(err));
    (void)ignored;
    _exit(err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND : EXIT_NOT_EXEC);
}

/*
 * The environment the command gets, set in cutrace's own (which nothing
 * else uses): LD_PRELOAD and CUTRACE_DIR, and no CUTRACE_DISABLE: an
 * inherited CUTRACE_DISABLE=1 (kept to silence a tracer preloaded by
 * default) would defeat the run the user asked for; the program may still
 * set it again for processes it wants left alone. Set before the fork so
 * that the manifest records what the command got.
 */
static int set_child_environment(const char *preload, const char *trace_dir)
{
    if (setenv("LD_PRELOAD", preload, 1) != 0 || setenv("CUTRACE_DIR", trace_dir, 1) != 0 ||
        unsetenv("CUTRACE_DISABLE") != 0) {
        cli_error(NULL, "cannot set the command's environment: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * NVTX's injection library (docs/nvtx.md): libcutrace.so. One already set
 * (Nsight Systems sets its own) is not taken over silently: it moves to
 * CUTRACE_NVTX_CHAIN, which libcutrace.so loads and forwards every NVTX
 * call to, and one note says so. A run inside a run finds its own library
 * there already and leaves it.
 */
static int set_nvtx_environment(const char *library)
{
    const char *old = getenv("NVTX_INJECTION64_PATH");
    if (old && *old && !same_file(old, library)) {
        if (setenv("CUTRACE_NVTX_CHAIN", old, 1) != 0)
            goto failed;
        char *quoted = shell_quote(old);
        fprintf(stderr,
                "cutrace: NVTX_INJECTION64_PATH was %s: cutrace records NVTX ranges and "
                "forwards every NVTX call to it\n",
                quoted);
        free(quoted);
    }
    if (setenv("NVTX_INJECTION64_PATH", library, 1) != 0)
        goto failed;
    return 0;
failed:
    cli_error(NULL, "cannot set the command's environment: %s", strerror(errno));
    return -1;
}

/* What run_child tells its caller besides the status. */
struct run_hooks {
    void (*started)(void *ctx, pid_t pid); /* the command is forked, not yet exec'd */
    void *ctx;
    int raw_status; /* waitpid's status, -1 when it was not reaped */
};

/* Runs the command and returns its shell-style status, or -1 with *exec_errno
 * set when it could not be started. */
static int run_child(char **command, struct run_hooks *hooks, int *exec_errno)
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
        exec_child(command, &saved, pipe_fds[1]);
    }
    child_pid = pid;
    sigprocmask(SIG_SETMASK, &saved.mask, NULL); /* forward from now on */
    close(pipe_fds[1]);
    hooks->started(hooks->ctx, pid);

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
    hooks->raw_status = waited == pid ? status : -1;

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

/* ---- the run's directory and manifest ---- */

static int64_t wall_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The host name as a file name's part: [A-Za-z0-9.-], at most 32 bytes. */
static void host_word(const char *host, char *out, size_t size)
{
    size_t o = 0;
    for (const char *c = host; *c && o + 1 < size && o < 32; c++)
        out[o++] = (isalnum((unsigned char)*c) || *c == '.' || *c == '-') ? *c : '_';
    out[o] = '\0';
    if (o == 0)
        snprintf(out, size, "host");
}

/*
 * A new directory for this run inside parent, 0700 like it:
 * run-<UTC start>-<host>-<pid>, so that `ls` sorts runs by time and two runs
 * started in the same second (here, or on another host sharing parent) never
 * meet; a name taken anyway (a pid reused within the second) gets a suffix.
 * Returns its name (malloc'd), or NULL after the error.
 */
static char *make_run_dir(const char *parent, const char *host, int64_t start_ns)
{
    time_t secs = (time_t)(start_ns / 1000000000);
    struct tm tm;
    char stamp[32], word[40];
    gmtime_r(&secs, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    host_word(host, word, sizeof word);
    for (int attempt = 0; attempt < 100; attempt++) {
        char *name = attempt ? xasprintf("run-%s-%s-%ld-%d", stamp, word, (long)getpid(), attempt)
                             : xasprintf("run-%s-%s-%ld", stamp, word, (long)getpid());
        char *path = cli_path_join(parent, name);
        int rc = mkdir(path, 0700);
        int err = errno;
        free(path);
        if (rc == 0)
            return name;
        free(name);
        if (err != EEXIST) {
            cli_error(parent, "cannot create the run's directory: %s", strerror(err));
            return NULL;
        }
    }
    cli_error(parent, "cannot create the run's directory: every name is taken");
    return NULL;
}

/* The launched command as the manifest keeps it: redacted like a trace's. */
static void redacted_argv(char **command, struct run_manifest *m)
{
    size_t len = 0, argc = 0;
    for (; command[argc]; argc++)
        len += strlen(command[argc]) + 1;
    char *joined = xmalloc(len ? len : 1), *p = joined;
    for (size_t i = 0; i < argc; i++) {
        size_t n = strlen(command[i]) + 1;
        memcpy(p, command[i], n);
        p += n;
    }
    size_t out_len = 0;
    char *redacted = ct_redact_argv(joined, len, &out_len);
    free(joined);
    if (!redacted) {
        fputs("cutrace: out of memory\n", stderr);
        exit(EXIT_RUN_FAILED);
    }
    m->argv = xcalloc(argc ? argc : 1, sizeof(*m->argv));
    for (size_t o = 0; o < out_len && m->argc < argc; o += strlen(redacted + o) + 1)
        m->argv[m->argc++] = xstrdup(redacted + o);
    assert(m->argc == argc);
    free(redacted);
}

/* The variables a trace records (envcap.h), as the command gets them. */
static void recorded_env(struct run_manifest *m)
{
    struct ct_env_capture cap;
    if (ct_env_capture(environ, &cap) != 0) {
        fputs("cutrace: out of memory\n", stderr);
        exit(EXIT_RUN_FAILED);
    }
    m->env = xcalloc(cap.count ? cap.count : 1, sizeof(*m->env));
    for (size_t i = 0; i < cap.count; i++) {
        m->env[i].name = xstrdup(cap.vars[i].name);
        m->env[i].value = xstrdup(cap.vars[i].value);
    }
    m->nenv = cap.count;
    ct_env_capture_free(&cap);
}

struct run_record {
    char *dir; /* the run's directory, absolute */
    struct run_manifest manifest;
    bool warned;
};

static void write_manifest(struct run_record *r)
{
    if (manifest_write(r->dir, &r->manifest) == 0 || r->warned)
        return;
    r->warned = true;
    fprintf(stderr, "cutrace: %s: cannot write the run manifest: %s\n", r->dir, strerror(errno));
}

static void command_started(void *ctx, pid_t pid)
{
    struct run_record *r = ctx;
    r->manifest.pid = pid;
    write_manifest(r);
}

/* How the command ended, from waitpid's status (-1: not known). */
static void command_ended(struct run_record *r, int raw_status)
{
    struct run_manifest *m = &r->manifest;
    if (raw_status == -1 || !(WIFEXITED(raw_status) || WIFSIGNALED(raw_status)))
        return; /* the start-only manifest says "running or killed" */
    m->ended = true;
    m->end_wall_ns = wall_now_ns();
    if (m->end_wall_ns < m->start_wall_ns)
        m->end_wall_ns = m->start_wall_ns; /* the clock was set back meanwhile */
    m->has_exit_status = WIFEXITED(raw_status);
    m->exit_status = m->has_exit_status ? WEXITSTATUS(raw_status) : 0;
    m->has_signal = WIFSIGNALED(raw_status);
    m->signal = m->has_signal ? WTERMSIG(raw_status) : 0;
    write_manifest(r);
}

/* Nothing ran: the run's directory goes again (it holds only the manifest). */
static void remove_run(struct run_record *r)
{
    char *file = cli_path_join(r->dir, MANIFEST_NAME);
    unlink(file);
    free(file);
    rmdir(r->dir);
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
    char *parent = realpath(dir, NULL);
    if (!parent) {
        cli_error(dir, "%s", strerror(errno));
        free(library);
        return EXIT_RUN_FAILED;
    }
    struct run_record run = {0};
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    run.manifest.start_wall_ns = wall_now_ns();
    char *run_name = make_run_dir(parent, host, run.manifest.start_wall_ns);
    char *preload = compose_preload(getenv("LD_PRELOAD"), library);
    int status = EXIT_RUN_FAILED;
    if (run_name) {
        run.dir = cli_path_join(parent, run_name);
        status = set_child_environment(preload, run.dir) == 0 && set_nvtx_environment(library) == 0
                     ? 0
                     : EXIT_RUN_FAILED;
    }
    if (status == 0) {
        run.manifest.cutrace_version = xstrdup(CUTRACE_VERSION);
        run.manifest.host = xstrdup(host);
        redacted_argv(command, &run.manifest);
        recorded_env(&run.manifest);
        struct run_hooks hooks = {.started = command_started, .ctx = &run, .raw_status = -1};
        int exec_errno = 0;
        status = run_child(command, &hooks, &exec_errno);
        if (status < 0) {
            remove_run(&run);
            status = exec_errno ? report_exec_failure(command[0], exec_errno) : EXIT_RUN_FAILED;
        } else {
            command_ended(&run, hooks.raw_status);
            size_t traces = runs_trace_files(run.dir);
            char *shown = cli_path_join(dir, run_name);
            char *quoted = shell_quote(shown);
            if (traces == 0)
                fprintf(stderr,
                        "cutrace: no trace written to %s: the command made no CUDA calls, or did "
                        "not load %s (static or setuid program?)\n",
                        quoted, LIBRARY_NAME);
            else
                fprintf(stderr, "cutrace: trace in %s (%zu file%s); next: cutrace summary %s\n",
                        quoted, traces, traces == 1 ? "" : "s", quoted);
            free(quoted);
            free(shown);
        }
    } else if (run_name) {
        rmdir(run.dir);
    }
    manifest_free(&run.manifest);
    free(run.dir);
    free(run_name);
    free(preload);
    free(parent);
    free(library);
    return status;
}
