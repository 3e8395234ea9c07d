/*
 * manifest.c - the run manifest's format, both ways (manifest.h): written
 * with the CLI's JSON writer, read back with SQLite's JSON functions, which
 * the analyzer links already (no JSON parser of its own to get wrong).
 *
 * The text is untrusted (a manifest travels with the traces it describes):
 * every key is checked for its type and range, and the first problem found
 * becomes the one-line error.
 */
#include "model/manifest.h"

#include "cli.h"
#include "out/json.h"
#include "out/shellquote.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- parsing ---- */

struct parse {
    sqlite3 *db;
    sqlite3_stmt *value; /* json_type and json_extract of ?2 in ?1 */
    sqlite3_stmt *each;  /* json_each of ?2 in ?1 */
    const char *name;
    bool failed;
};

static int fail(struct parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct parse *p, const char *fmt, ...)
{
    if (p->failed)
        return -1;
    p->failed = true;
    va_list ap;
    va_start(ap, fmt);
    char *why = NULL;
    if (vasprintf(&why, fmt, ap) < 0)
        why = NULL;
    va_end(ap);
    cli_error(p->name, "invalid run manifest: %s", why ? why : "out of memory");
    free(why);
    return -1;
}

/* json_type of the value at `path` ("integer", "text", "object", ...), NULL
 * when absent; the statement stays on the row for the value. */
static const char *step_value(struct parse *p, const char *path)
{
    sqlite3_reset(p->value);
    if (sqlite3_bind_text(p->value, 2, path, -1, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_step(p->value) != SQLITE_ROW)
        return NULL;
    return (const char *)sqlite3_column_text(p->value, 0);
}

/* A text without NUL bytes, copied; a JSON "\u0000" would cut it short. */
static int copy_text(struct parse *p, sqlite3_stmt *st, int col, const char *what, char **out)
{
    const char *s = (const char *)sqlite3_column_text(st, col);
    int n = sqlite3_column_bytes(st, col);
    if (!s || memchr(s, '\0', (size_t)n))
        return fail(p, "%s holds a NUL character", what);
    *out = xstrndup(s, (size_t)n);
    return 0;
}

static int get_string(struct parse *p, const char *key, bool required, char **out)
{
    char path[64];
    snprintf(path, sizeof path, "$.%s", key);
    const char *type = step_value(p, path);
    if (!type)
        return required ? fail(p, "no \"%s\"", key) : 0;
    if (strcmp(type, "text") != 0)
        return fail(p, "\"%s\" is %s, not a string", key, type);
    return copy_text(p, p->value, 1, key, out);
}

static int get_int(struct parse *p, const char *key, bool required, int64_t lo, int64_t hi,
                   bool *present, int64_t *out)
{
    char path[64];
    snprintf(path, sizeof path, "$.%s", key);
    const char *type = step_value(p, path);
    if (present)
        *present = type != NULL;
    if (!type)
        return required ? fail(p, "no \"%s\"", key) : 0;
    if (strcmp(type, "integer") != 0)
        return fail(p, "\"%s\" is %s, not an integer", key, type);
    if (sqlite3_column_type(p->value, 1) != SQLITE_INTEGER)
        return fail(p, "\"%s\" is an integer too large for 64 bits", key);
    int64_t v = sqlite3_column_int64(p->value, 1);
    if (v < lo || v > hi)
        return fail(p, "\"%s\" is %" PRId64 ", outside %" PRId64 "..%" PRId64, key, v, lo, hi);
    *out = v;
    return 0;
}

static int get_argv(struct parse *p, struct run_manifest *m)
{
    const char *type = step_value(p, "$.argv");
    if (!type)
        return fail(p, "no \"argv\"");
    if (strcmp(type, "array") != 0)
        return fail(p, "\"argv\" is %s, not an array", type);
    sqlite3_reset(p->each);
    sqlite3_bind_text(p->each, 2, "$.argv", -1, SQLITE_STATIC);
    size_t cap = 0;
    while (!p->failed && sqlite3_step(p->each) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(p->each, 1);
        if (!t || strcmp(t, "text") != 0)
            return fail(p, "\"argv\" item %zu is %s, not a string", m->argc, t ? t : "null");
        m->argv = xgrow(m->argv, &cap, m->argc + 1, sizeof(*m->argv));
        m->argv[m->argc] = NULL;
        if (copy_text(p, p->each, 2, "an \"argv\" item", &m->argv[m->argc]) != 0)
            return -1;
        m->argc++;
    }
    if (m->argc == 0)
        return fail(p, "\"argv\" is empty");
    return 0;
}

static int get_env(struct parse *p, struct run_manifest *m)
{
    const char *type = step_value(p, "$.env");
    if (!type)
        return 0; /* a run whose command got none of the recorded variables may leave it out */
    if (strcmp(type, "object") != 0)
        return fail(p, "\"env\" is %s, not an object", type);
    sqlite3_reset(p->each);
    sqlite3_bind_text(p->each, 2, "$.env", -1, SQLITE_STATIC);
    size_t cap = 0;
    while (!p->failed && sqlite3_step(p->each) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(p->each, 1);
        const char *key = (const char *)sqlite3_column_text(p->each, 0);
        if (!t || strcmp(t, "text") != 0)
            return fail(p, "\"env\" value of %.64s is %s, not a string", key ? key : "?",
                        t ? t : "null");
        m->env = xgrow(m->env, &cap, m->nenv + 1, sizeof(*m->env));
        struct manifest_env *e = &m->env[m->nenv++];
        memset(e, 0, sizeof(*e));
        if (copy_text(p, p->each, 0, "an \"env\" name", &e->name) != 0 ||
            copy_text(p, p->each, 2, "an \"env\" value", &e->value) != 0)
            return -1;
        if (e->name[0] == '\0' || strchr(e->name, '='))
            return fail(p, "\"env\" has the name '%.64s', not a variable name", e->name);
    }
    return 0;
}

static int get_end(struct parse *p, struct run_manifest *m)
{
    bool has_end = false;
    int64_t v = 0;
    if (get_int(p, "end_wall_ns", false, 0, INT64_MAX, &has_end, &m->end_wall_ns) != 0 ||
        get_int(p, "exit_status", false, 0, 255, &m->has_exit_status, &v) != 0)
        return -1;
    m->exit_status = (int)v;
    if (get_int(p, "signal", false, 1, 255, &m->has_signal, &v) != 0)
        return -1;
    m->signal = (int)v;
    if (!has_end && (m->has_exit_status || m->has_signal))
        return fail(p, "an exit status or signal without \"end_wall_ns\"");
    if (has_end && m->has_exit_status == m->has_signal)
        return fail(p, "\"end_wall_ns\" needs exactly one of \"exit_status\" and \"signal\"");
    if (has_end && m->end_wall_ns < m->start_wall_ns)
        return fail(p, "\"end_wall_ns\" is before \"start_wall_ns\"");
    m->ended = has_end;
    return 0;
}

static int parse_fields(struct parse *p, const char *text, size_t len, struct run_manifest *m)
{
    if (memchr(text, '\0', len))
        return fail(p, "not JSON text (a NUL byte)");
    if (sqlite3_prepare_v2(p->db, "SELECT json_type(?1, ?2), json_extract(?1, ?2)", -1, &p->value,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(p->db, "SELECT key, type, value FROM json_each(?1, ?2)", -1, &p->each,
                           NULL) != SQLITE_OK)
        return fail(p, "SQLite: %s", sqlite3_errmsg(p->db));
    /* Bound once: json() of ?1 is parsed per call, and manifests are small. */
    sqlite3_bind_text(p->value, 1, text, (int)len, SQLITE_STATIC);
    sqlite3_bind_text(p->each, 1, text, (int)len, SQLITE_STATIC);
    sqlite3_stmt *valid = NULL;
    int ok = 0;
    if (sqlite3_prepare_v2(p->db, "SELECT json_valid(?1) AND json_type(?1) = 'object'", -1, &valid,
                           NULL) == SQLITE_OK &&
        sqlite3_bind_text(valid, 1, text, (int)len, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(valid) == SQLITE_ROW)
        ok = sqlite3_column_int(valid, 0);
    sqlite3_finalize(valid);
    if (!ok)
        return fail(p, len == 0 ? "empty file" : "not a JSON object");
    if (get_int(p, "format", true, 1, INT64_MAX, NULL, &m->format) != 0)
        return -1;
    if (m->format > MANIFEST_FORMAT)
        return fail(p, "format %" PRId64 " is newer than this cutrace reads (%d); update cutrace",
                    m->format, MANIFEST_FORMAT);
    if (get_string(p, "cutrace_version", true, &m->cutrace_version) != 0 || get_argv(p, m) != 0 ||
        get_env(p, m) != 0 || get_string(p, "host", true, &m->host) != 0 ||
        get_int(p, "pid", true, 1, INT32_MAX, NULL, &m->pid) != 0 ||
        get_int(p, "start_wall_ns", true, 0, INT64_MAX, NULL, &m->start_wall_ns) != 0 ||
        get_end(p, m) != 0)
        return -1;
    return 0;
}

int manifest_parse(const char *text, size_t len, const char *name, struct run_manifest *out)
{
    memset(out, 0, sizeof(*out));
    struct parse p = {.name = name};
    if (len > MANIFEST_MAX_BYTES)
        return fail(&p, "%zu bytes, more than a manifest can be (%u)", len, MANIFEST_MAX_BYTES);
    if (sqlite3_open_v2(":memory:", &p.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) !=
        SQLITE_OK) {
        sqlite3_close(p.db);
        return fail(&p, "cannot open an in-memory SQLite database");
    }
    int rc = parse_fields(&p, text, len, out);
    sqlite3_finalize(p.value);
    sqlite3_finalize(p.each);
    sqlite3_close(p.db);
    if (rc != 0 || p.failed) {
        manifest_free(out);
        return -1;
    }
    out->cmdline = shell_join(out->argv, out->argc);
    out->text = xstrndup(text, len);
    out->text_len = len;
    return 0;
}

void manifest_free(struct run_manifest *m)
{
    for (size_t i = 0; i < m->argc; i++)
        free(m->argv[i]);
    free(m->argv);
    for (size_t i = 0; i < m->nenv; i++) {
        free(m->env[i].name);
        free(m->env[i].value);
    }
    free(m->env);
    free(m->cutrace_version);
    free(m->cmdline);
    free(m->host);
    free(m->text);
    memset(m, 0, sizeof(*m));
}

/* ---- finding ---- */

/* The whole file, or NULL after the error (ENOENT: quietly, *missing set). */
static char *read_manifest_file(const char *file, size_t *len, bool *missing)
{
    *missing = false;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) {
            *missing = true;
            return NULL;
        }
        cli_error(file, "cannot read the run manifest: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MANIFEST_MAX_BYTES) {
        cli_error(file, "invalid run manifest: %s",
                  st.st_size > MANIFEST_MAX_BYTES ? "larger than a manifest can be"
                                                  : "not a regular file");
        close(fd);
        return NULL;
    }
    size_t cap = (size_t)st.st_size + 1, used = 0;
    char *text = xmalloc(cap);
    for (;;) {
        if (used + 1 >= cap) {
            if (cap > MANIFEST_MAX_BYTES + 1u)
                break; /* grew while read: parse refuses the size */
            text = xgrow(text, &cap, cap * 2, 1);
        }
        ssize_t n = read(fd, text + used, cap - used - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cli_error(file, "cannot read the run manifest: %s", strerror(errno));
            close(fd);
            free(text);
            return NULL;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    text[used] = '\0';
    *len = used;
    return text;
}

/* Where the manifest of path would be, NULL where none can be. */
static char *manifest_path_for(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return NULL;
    if (S_ISDIR(st.st_mode))
        return cli_path_join(path, MANIFEST_NAME);
    size_t len = strlen(path);
    if (!S_ISREG(st.st_mode) || len < 3 || strcmp(path + len - 3, ".db") != 0)
        return NULL;
    const char *slash = strrchr(path, '/');
    if (!slash)
        return xstrdup(MANIFEST_NAME);
    char *dir = xstrndup(path, (size_t)(slash - path) + 1);
    char *file = cli_path_join(dir, MANIFEST_NAME);
    free(dir);
    return file;
}

int manifest_find(const char *path, struct run_manifest *out)
{
    memset(out, 0, sizeof(*out));
    char *file = manifest_path_for(path);
    if (!file)
        return 0;
    size_t len = 0;
    bool missing = false;
    char *text = read_manifest_file(file, &len, &missing);
    int rc = missing ? 0 : -1;
    if (text)
        rc = manifest_parse(text, len, file, out) == 0 ? 1 : -1;
    free(text);
    free(file);
    return rc;
}

/* ---- writing ---- */

static void write_json(FILE *f, const struct run_manifest *m)
{
    struct json_writer w;
    json_init(&w, f);
    json_object_begin(&w);
    json_kv_int(&w, "format", MANIFEST_FORMAT);
    json_kv_string(&w, "cutrace_version", m->cutrace_version);
    json_key(&w, "argv");
    json_array_begin(&w);
    for (size_t i = 0; i < m->argc; i++)
        json_string(&w, m->argv[i]);
    json_array_end(&w);
    json_key(&w, "env");
    json_object_begin(&w);
    for (size_t i = 0; i < m->nenv; i++)
        json_kv_string(&w, m->env[i].name, m->env[i].value);
    json_object_end(&w);
    json_kv_string(&w, "host", m->host);
    json_kv_int(&w, "pid", m->pid);
    json_kv_int(&w, "start_wall_ns", m->start_wall_ns);
    if (m->ended) {
        json_kv_int(&w, "end_wall_ns", m->end_wall_ns);
        if (m->has_signal)
            json_kv_int(&w, "signal", m->signal);
        else
            json_kv_int(&w, "exit_status", m->exit_status);
    }
    json_object_end(&w);
    json_finish(&w);
}

int manifest_write(const char *dir, const struct run_manifest *m)
{
    assert(m->argc >= 1 && m->host && m->cutrace_version);
    char *tmp = xasprintf("%s/.%s.XXXXXX", dir, MANIFEST_NAME);
    int fd = mkostemp(tmp, O_CLOEXEC); /* 0600 */
    if (fd < 0) {
        int err = errno;
        free(tmp);
        errno = err;
        return -1;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int err = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        errno = err;
        return -1;
    }
    write_json(f, m);
    /* fsync: a manifest that survives the run's machine going down with it. */
    int rc = fflush(f) == 0 && !ferror(f) && fsync(fd) == 0 ? 0 : -1;
    int err = errno;
    if (fclose(f) != 0 && rc == 0) {
        rc = -1;
        err = errno;
    }
    char *final = cli_path_join(dir, MANIFEST_NAME);
    if (rc == 0 && rename(tmp, final) != 0) {
        rc = -1;
        err = errno;
    }
    if (rc != 0)
        unlink(tmp);
    free(final);
    free(tmp);
    errno = err;
    return rc;
}

/* ---- reading it ---- */

bool manifest_launched(const struct run_manifest *m, const char *host, int64_t pid)
{
    return m && pid == m->pid && (!host || !host[0] || strcmp(host, m->host) == 0);
}

char *manifest_ending(const struct run_manifest *m, char *buf, size_t size)
{
    if (!m->ended)
        snprintf(buf, size, "running or killed");
    else if (m->has_exit_status)
        snprintf(buf, size, "exit %d", m->exit_status);
    else if (sigabbrev_np(m->signal))
        snprintf(buf, size, "killed by SIG%s", sigabbrev_np(m->signal));
    else
        snprintf(buf, size, "killed by signal %d", m->signal);
    return buf;
}
