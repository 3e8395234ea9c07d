/*
 * harness.c - process spawning, trace inspection and report reading for
 * integration tests.
 */
#include "harness.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *build_path(const char *rel)
{
    static char slots[8][4096];
    static int next;
    const char *build = getenv("CUTRACE_TEST_BUILD");
    ck_assert_msg(build && *build, "CUTRACE_TEST_BUILD is not set");
    char *out = slots[next++ % 8];
    snprintf(out, 4096, "%s/%s", build, rel);
    return out;
}

void world_init(struct world *w)
{
    memset(w, 0, sizeof *w);
    const char *tmp = getenv("TMPDIR");
    ck_assert_int_ge(asprintf(&w->root, "%s/cutrace-it-XXXXXX", tmp && *tmp ? tmp : "/tmp"), 0);
    ck_assert_ptr_nonnull(mkdtemp(w->root));
    ck_assert_int_ge(asprintf(&w->trace_dir, "%s/trace", w->root), 0);
    ck_assert_int_ge(asprintf(&w->state, "%s/gpu-state", w->root), 0);
    w->cwd = strdup(w->root);
}

void world_free(struct world *w)
{
    tsql_rmtree(w->root);
    free(w->root);
    free(w->trace_dir);
    free(w->state);
    free(w->cwd);
}

static void child_env(struct world *w, bool traced)
{
    setenv("LD_LIBRARY_PATH", build_path("fake"), 1);
    setenv("CUTRACE_FAKE_STATE", w->state, 1);
    setenv("CUTRACE_FAKE_GPUS", "2", 1);
    setenv("CUTRACE_FAKE_GPU_MEM", "96G", 1);
    setenv("CUTRACE_FAKE_CTX_MEM", "512M", 1);
    setenv("CUTRACE_DIR", w->trace_dir, 1);
    unsetenv("LD_PRELOAD");
    if (traced)
        setenv("LD_PRELOAD", build_path("libcutrace.so"), 1);
    for (int i = 0; i < 8 && w->extra_env[i]; i++) {
        char *kv = strdup(w->extra_env[i]);
        char *eq = strchr(kv, '=');
        if (eq) {
            *eq = '\0';
            if (eq[1])
                setenv(kv, eq + 1, 1);
            else
                unsetenv(kv);
        }
        free(kv);
    }
}

static pid_t spawn_to(struct world *w, bool traced, const char *const argv[], int out_fd,
                      int err_fd)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child_env(w, traced);
        /* No core files from the crash tests. */
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        if (w->fsize_limit > 0) {
            struct rlimit fsize = {(rlim_t)w->fsize_limit, (rlim_t)w->fsize_limit};
            setrlimit(RLIMIT_FSIZE, &fsize);
        }
        if (chdir(w->cwd) != 0)
            _exit(125);
        if (out_fd >= 0)
            dup2(out_fd, 1);
        if (err_fd >= 0)
            dup2(err_fd, 2);
        if (w->nofile_limit > 0) {
            closefrom(3);
            struct rlimit nofile = {(rlim_t)w->nofile_limit, (rlim_t)w->nofile_limit};
            setrlimit(RLIMIT_NOFILE, &nofile);
        }
        execv(argv[0], (char *const *)argv);
        _exit(126);
    }
    return pid;
}

pid_t spawn_prog(struct world *w, bool traced, const char *const argv[])
{
    int devnull = open("/dev/null", O_WRONLY);
    pid_t pid = spawn_to(w, traced, argv, devnull, -1);
    close(devnull);
    return pid;
}

int wait_prog(pid_t pid, int timeout_s)
{
    int status = 0;
    for (int waited_ms = 0;; waited_ms += 5) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (waited_ms > timeout_s * 1000) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            ck_abort_msg("program %d ran over %d s (deadlock?)", (int)pid, timeout_s);
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *slurp(int fd, size_t *len)
{
    lseek(fd, 0, SEEK_SET);
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (used + 1 >= cap)
            buf = realloc(buf, cap *= 2);
        ssize_t n = read(fd, buf + used, cap - used - 1);
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    buf[used] = '\0';
    *len = used;
    return buf;
}

struct running start_prog(struct world *w, bool traced, const char *const argv[])
{
    struct running p;
    p.out = tmpfile();
    p.err = tmpfile();
    ck_assert(p.out && p.err);
    p.pid = spawn_to(w, traced, argv, fileno(p.out), fileno(p.err));
    return p;
}

struct run finish_prog(struct running *p, int timeout_s)
{
    struct run r;
    r.status = wait_prog(p->pid, timeout_s);
    r.out = slurp(fileno(p->out), &r.out_len);
    r.err = slurp(fileno(p->err), &r.err_len);
    fclose(p->out);
    fclose(p->err);
    return r;
}

struct run run_prog(struct world *w, bool traced, const char *const argv[], int timeout_s)
{
    struct running p = start_prog(w, traced, argv);
    return finish_prog(&p, timeout_s);
}

void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t list_traces(struct world *w, char ***paths)
{
    *paths = NULL;
    DIR *d = opendir(w->trace_dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".db") != 0)
            continue;
        *paths = realloc(*paths, (n + 1) * sizeof **paths);
        ck_assert_int_ge(asprintf(&(*paths)[n], "%s/%s", w->trace_dir, e->d_name), 0);
        n++;
    }
    closedir(d);
    qsort(*paths, n, sizeof **paths, by_name);
    return n;
}

void free_list(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

size_t count_lines(const char *s)
{
    size_t n = 0;
    for (const char *p = s; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        n += len > 0;
        p += len + (nl != NULL);
    }
    return n;
}

size_t count_occurrences(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

char *replace_all(const char *text, const char *from, const char *to)
{
    size_t n = strlen(from), len = 0, cap = strlen(text) + 1;
    char *out = malloc(cap);
    for (const char *p = text; *p;) {
        bool hit = strncmp(p, from, n) == 0;
        size_t add = hit ? strlen(to) : 1;
        if (len + add + 1 > cap)
            out = realloc(out, cap = 2 * (len + add + 1));
        memcpy(out + len, hit ? to : p, add);
        len += add;
        p += hit ? n : 1;
    }
    out[len] = '\0';
    return out;
}

char *report_without_paths(struct world *w, const char *const args[], const char *path,
                           const char *trace_prefix, int *status)
{
    const char *full[10];
    size_t n = 0;
    for (; args[n]; n++)
        full[n] = args[n];
    full[n++] = path;
    full[n] = NULL;
    struct run r = harness_cutrace(w, full);
    *status = r.status;
    char header[4600];
    snprintf(header, sizeof header, "%s: ", path); /* "report of PATH: ..." */
    char *h = replace_all(r.out, header, "RUN: ");
    char *a = replace_all(h, trace_prefix, "RUN/");
    free(h);
    char *b = replace_all(a, path, "RUN");
    /* The traces' environment names the run's directory (CUTRACE_DIR). */
    char *c = replace_all(b, w->trace_dir, "RUN");
    free(a);
    free(b);
    run_free(&r);
    return c;
}

const char *source_path(const char *rel)
{
    static char slots[8][4096];
    static int next;
    const char *src = getenv("CUTRACE_TEST_SRC");
    ck_assert_msg(src && *src, "CUTRACE_TEST_SRC is not set");
    char *out = slots[next++ % 8];
    snprintf(out, 4096, "%s/%s", src, rel);
    return out;
}

struct run harness_cutrace(struct world *w, const char *const args[])
{
    const char *argv[12] = {build_path("cutrace")};
    for (int i = 0; args[i]; i++) {
        ck_assert_int_lt(i, 10);
        argv[i + 1] = args[i];
    }
    return run_prog(w, false, argv, 120);
}

/* json_type and json_extract of path in json, stepped to its row. */
static sqlite3_stmt *report_json_at(sqlite3 **db, const char *json, const char *path)
{
    ck_assert_int_eq(sqlite3_open(":memory:", db), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(
        sqlite3_prepare_v2(*db, "SELECT json_type(?1, ?2), json_extract(?1, ?2)", -1, &q, NULL),
        SQLITE_OK);
    sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, path, -1, SQLITE_STATIC);
    ck_assert_msg(sqlite3_step(q) == SQLITE_ROW, "%s: %s in:\n%.2000s", path, sqlite3_errmsg(*db),
                  json);
    return q;
}

int64_t report_json_int(const char *json, const char *path)
{
    sqlite3 *db;
    sqlite3_stmt *q = report_json_at(&db, json, path);
    const char *type = (const char *)sqlite3_column_text(q, 0);
    ck_assert_msg(type && strcmp(type, "integer") == 0, "%s is %s, not an integer, in:\n%.2000s",
                  path, type ? type : "absent", json);
    int64_t v = sqlite3_column_int64(q, 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

char *report_json_text(const char *json, const char *path)
{
    sqlite3 *db;
    sqlite3_stmt *q = report_json_at(&db, json, path);
    const char *type = (const char *)sqlite3_column_text(q, 0);
    ck_assert_msg(type && (strcmp(type, "text") == 0 || strcmp(type, "null") == 0),
                  "%s is %s, not text, in:\n%.2000s", path, type ? type : "absent", json);
    const char *v = (const char *)sqlite3_column_text(q, 1);
    char *out = v ? strdup(v) : NULL;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return out;
}
