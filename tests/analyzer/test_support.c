/*
 * test_support.c - helpers shared by the analyzer's test suites: scratch
 * directories, running cutrace as a subprocess, damaging files, and a strict
 * JSON validator (see test_support.h).
 */
#include "test_support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

char *scratch_dir(void)
{
    const char *base = getenv("TMPDIR");
    char *dir = NULL;
    ck_assert_int_ge(asprintf(&dir, "%s/cutrace-test-XXXXXX", base && *base ? base : "/tmp"), 0);
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
    return dir;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

void scratch_remove(char *dir)
{
    if (!dir)
        return;
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static char *read_all(int fd, size_t *len)
{
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        if (used + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        ssize_t n = read(fd, buf + used, cap - used - 1);
        if (n < 0 && errno == EINTR)
            continue;
        ck_assert_int_ge(n, 0);
        if (n == 0)
            break;
        used += (size_t)n;
    }
    buf[used] = '\0';
    *len = used;
    return buf;
}

static int capture_file(void)
{
    char path[] = "/tmp/cutrace-capture-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    return fd;
}

struct proc_result run_cutrace(const char *const *args, const char *const *env)
{
    return run_cutrace_as(args, env, (uid_t)-1);
}

struct proc_result run_cutrace_as(const char *const *args, const char *const *env, uid_t uid)
{
    const char *bin = getenv("CUTRACE_BIN");
    if (!bin || !*bin)
        bin = "build/cutrace";
    size_t nargs = 0;
    while (args[nargs])
        nargs++;
    const char **argv = calloc(nargs + 2, sizeof(*argv));
    ck_assert_ptr_nonnull(argv);
    argv[0] = bin;
    for (size_t i = 0; i < nargs; i++)
        argv[i + 1] = args[i];

    int out = capture_file(), err = capture_file();
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        /* Permission bits stop only a process that is not root. */
        if (uid != (uid_t)-1 &&
            (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid(uid) != 0)) {
            dprintf(2, "test: cannot become uid %u: %s\n", (unsigned)uid, strerror(errno));
            _exit(121);
        }
        for (const char *const *e = env; e && *e; e++) {
            const char *eq = strchr(*e, '=');
            if (eq) {
                char *name = strndup(*e, (size_t)(eq - *e));
                setenv(name, eq + 1, 1);
                free(name);
            } else {
                unsetenv(*e);
            }
        }
        execv(bin, (char *const *)argv);
        dprintf(2, "test: cannot run %s: %s\n", bin, strerror(errno));
        _exit(120);
    }
    free(argv);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ck_assert_int_eq(errno, EINTR);

    struct proc_result r = {0};
    if (WIFEXITED(status)) {
        r.status = WEXITSTATUS(status);
    } else {
        r.signaled = true;
        r.status = 128 + WTERMSIG(status);
    }
    r.out = read_all(out, &r.out_len);
    r.err = read_all(err, &r.err_len);
    close(out);
    close(err);
    /* A sanitizer report means a bug, whatever the exit status says. */
    ck_assert_msg(!strstr(r.err, "Sanitizer") && !strstr(r.err, "runtime error:"),
                  "sanitizer report:\n%.1500s", r.err);
    ck_assert_msg(r.status != 99, "sanitizer exit status; stderr:\n%.1500s", r.err);
    return r;
}

void proc_result_free(struct proc_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

size_t count_lines(const char *text)
{
    size_t lines = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        lines++;
        if (!nl)
            break;
        p = nl + 1;
    }
    return lines;
}

void assert_one_line_error(const struct proc_result *r, const char *needle, const char *needle2)
{
    ck_assert_msg(!r->signaled, "killed by signal %d; stderr:\n%.1500s", r->status - 128, r->err);
    ck_assert_msg(r->status == 1, "exit %d, expected 1; stderr:\n%.1500s", r->status, r->err);
    ck_assert_msg(r->out_len == 0, "stdout not empty:\n%.1500s", r->out);
    ck_assert_msg(count_lines(r->err) == 1 && r->err_len > 0 && r->err[r->err_len - 1] == '\n',
                  "stderr is not exactly one line:\n%.1500s", r->err);
    ck_assert_msg(strncmp(r->err, "cutrace: ", 9) == 0, "stderr: %.1500s", r->err);
    ck_assert_msg(strstr(r->err, needle), "stderr lacks '%s': %.1500s", needle, r->err);
    if (needle2)
        ck_assert_msg(strstr(r->err, needle2), "stderr lacks '%s': %.1500s", needle2, r->err);
}

void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY);
    ck_assert_msg(in >= 0, "%s: %s", from, strerror(errno));
    size_t len;
    char *data = read_all(in, &len);
    close(in);
    write_file(to, data, len);
    free(data);
}

size_t file_size(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (size_t)st.st_size;
}

void truncate_file(const char *path, size_t size)
{
    ck_assert_int_eq(truncate(path, (off_t)size), 0);
}

void flip_bit(const char *path, size_t byte, int bit)
{
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char c;
    ck_assert_int_eq(pread(fd, &c, 1, (off_t)byte), 1);
    c ^= (unsigned char)(1u << bit);
    ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)byte), 1);
    close(fd);
}

char *compact(const char *json)
{
    char *out = malloc(strlen(json) + 1), *o = out;
    ck_assert_ptr_nonnull(out);
    bool in_string = false;
    for (const char *p = json; *p; p++) {
        if (in_string) {
            *o++ = *p;
            if (*p == '\\' && p[1])
                *o++ = *++p;
            else if (*p == '"')
                in_string = false;
        } else if (*p == '"') {
            in_string = true;
            *o++ = *p;
        } else if (*p != ' ' && *p != '\n') {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

char *squeeze(const char *text)
{
    char *out = malloc(strlen(text) + 1), *o = out;
    ck_assert_ptr_nonnull(out);
    for (const char *p = text; *p; p++)
        if (!(*p == ' ' && o > out && o[-1] == ' '))
            *o++ = *p;
    *o = '\0';
    return out;
}

void assert_width(const char *text, size_t limit)
{
    size_t width = 0, line = 1;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\n') {
            width = 0;
            line++;
        } else if ((*p & 0xc0) != 0x80) {
            ck_assert_msg(++width <= limit, "line %zu is wider than %zu columns:\n%.3000s", line,
                          limit, text);
        }
    }
}

const char *dummy_library(void)
{
    const char *lib = getenv("CUTRACE_TEST_LIB");
    ck_assert_msg(lib && *lib, "CUTRACE_TEST_LIB is not set (run through make analyzer-tests)");
    return lib;
}

static int is_run_name(const struct dirent *e)
{
    return strncmp(e->d_name, "run-", 4) == 0;
}

size_t list_runs(const char *dir, char ***runs)
{
    struct dirent **names;
    int n = scandir(dir, &names, is_run_name, alphasort);
    *runs = calloc(n > 0 ? (size_t)n : 1, sizeof(**runs));
    ck_assert_ptr_nonnull(*runs);
    for (int i = 0; i < n; i++) {
        ck_assert_int_ge(asprintf(&(*runs)[i], "%s/%s", dir, names[i]->d_name), 0);
        free(names[i]);
    }
    if (n >= 0)
        free(names);
    return n > 0 ? (size_t)n : 0;
}

void free_runs(char **runs, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(runs[i]);
    free(runs);
}

char *only_run(const char *dir)
{
    char **runs;
    size_t n = list_runs(dir, &runs);
    ck_assert_msg(n == 1, "%s holds %zu runs, expected 1", dir, n);
    char *run = runs[0];
    free(runs);
    return run;
}

/* ---- a strict JSON validator ---- */

struct json_parser {
    const char *p;
    int depth;
};

static bool parse_value(struct json_parser *j);

static void skip_ws(struct json_parser *j)
{
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
        j->p++;
}

static bool parse_literal(struct json_parser *j, const char *word)
{
    size_t n = strlen(word);
    if (strncmp(j->p, word, n) != 0)
        return false;
    j->p += n;
    return true;
}

static bool parse_string(struct json_parser *j)
{
    if (*j->p != '"')
        return false;
    j->p++;
    for (;;) {
        unsigned char c = (unsigned char)*j->p;
        if (c == '"') {
            j->p++;
            return true;
        }
        if (c < 0x20)
            return false; /* includes the terminating NUL */
        if (c == '\\') {
            j->p++;
            char e = *j->p;
            if (e == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", j->p[i]) || !j->p[i])
                        return false;
                j->p += 5;
            } else if (e && strchr("\"\\/bfnrt", e)) {
                j->p++;
            } else {
                return false;
            }
            continue;
        }
        if (c < 0x80) {
            j->p++;
            continue;
        }
        /* Multi-byte UTF-8: the lead byte fixes the length. */
        int len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
        if (len == 0 || c > 0xf4)
            return false;
        for (int i = 1; i < len; i++)
            if (((unsigned char)j->p[i] & 0xc0) != 0x80)
                return false;
        j->p += len;
    }
}

static bool parse_number(struct json_parser *j)
{
    const char *p = j->p;
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return false;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    j->p = p;
    return true;
}

static bool parse_container(struct json_parser *j, char close, bool object)
{
    if (++j->depth > 64)
        return false;
    j->p++;
    skip_ws(j);
    if (*j->p == close) {
        j->p++;
        j->depth--;
        return true;
    }
    for (;;) {
        skip_ws(j);
        if (object) {
            if (!parse_string(j))
                return false;
            skip_ws(j);
            if (*j->p != ':')
                return false;
            j->p++;
        }
        if (!parse_value(j))
            return false;
        skip_ws(j);
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p == close) {
            j->p++;
            j->depth--;
            return true;
        }
        return false;
    }
}

static bool parse_value(struct json_parser *j)
{
    skip_ws(j);
    switch (*j->p) {
    case '{':
        return parse_container(j, '}', true);
    case '[':
        return parse_container(j, ']', false);
    case '"':
        return parse_string(j);
    case 't':
        return parse_literal(j, "true");
    case 'f':
        return parse_literal(j, "false");
    case 'n':
        return parse_literal(j, "null");
    default:
        return parse_number(j);
    }
}

bool json_valid(const char *text)
{
    struct json_parser j = {text, 0};
    if (!parse_value(&j))
        return false;
    skip_ws(&j);
    return *j.p == '\0';
}
