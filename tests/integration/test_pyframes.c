/*
 * test_pyframes.c - the `pyframes` suite: Python frames of CUDA calls made
 * with the GIL released (ctypes.CDLL, a C extension with
 * Py_BEGIN_ALLOW_THREADS, as PyTorch) on every CPython 3.10-3.14 the
 * machine has (tests/python/pythons.sh; an absent one is said "skipped").
 *
 * tests/python/roads.py makes the calls on many roads (threads, a C thread,
 * generators, coroutines, deep recursion, methods, lambdas, comprehensions,
 * functools.partial, under sys.setprofile and sys.settrace) and writes what
 * traceback.extract_stack() saw at each call; every call's Python frames in
 * the trace must equal that, frame by frame (file, line, function). Then:
 * `cutrace sites` names the Python functions, the folded stacks put the
 * Python frames where the interpreter ran them, a second interpreter, the
 * fallbacks (CPython 3.9, CUTRACE_PYFRAMES=api, a wrong layout table
 * imposed with CUTRACE_PYFRAMES=layout:3.N) and a stress run under the
 * ASan build of the tracer (tests/python/stress.py, check_frames.py).
 *
 * Needs `make python-pyframes-prep` (tests/python/pyframes.mk): the
 * extension per interpreter and build/asan/libcutrace.so.
 */
#include <check.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "pythons.h"
#include "suites.h"

#define MAX_PYTHONS   8
#define DEFAULT_DEPTH 32  /* CUTRACE_STACK_DEPTH's default */
#define DEEP_DEPTH    128 /* its maximum: whole stacks, for the folded checks */
#define MAX_REPORTED  12  /* mismatches spelled out per check */

/* ---- the interpreters ---- */

static struct python pythons[MAX_PYTHONS];
static size_t npythons;
static char pythons_note[4096]; /* pythons.sh's "skipped: ..." lines, or why it failed */

/* Runs pythons.sh when the suite is made: the loop tests need the count. */
static void find_pythons(void)
{
    npythons = pythons_find(pythons, MAX_PYTHONS, pythons_note, sizeof pythons_note);
}

static int minor_of(const char *version)
{
    return atoi(version + 2);
}

/* ---- reading what roads.py expected ---- */

struct xframe {
    char *file;
    int64_t line;
    char *func;
    int c; /* 1 entered from C, 0 by a plain Python call, -1 unknown */
};

struct xcall {
    char *api, *road, *ctx;
    int64_t size, ptr; /* -1: none */
    bool gil, kept;
    size_t nframes;
    struct xframe *frames; /* innermost first */
};

struct xset {
    char python[32];
    size_t n;
    struct xcall *calls;
};

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 >= cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

static char *col_dup(sqlite3_stmt *q, int col)
{
    const unsigned char *t = sqlite3_column_text(q, col);
    return strdup(t ? (const char *)t : "");
}

static int64_t col_int_or(sqlite3_stmt *q, int col, int64_t none)
{
    return sqlite3_column_type(q, col) == SQLITE_NULL ? none : sqlite3_column_int64(q, col);
}

/* The JSON is parsed by SQLite's JSON functions, one row per frame. */
static void load_expect(const char *path, struct xset *x)
{
    memset(x, 0, sizeof *x);
    char *json = read_file(path);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    sqlite3_stmt *q;
    const char *sql =
        "SELECT c.key, json_extract(c.value, '$.api'), json_extract(c.value, '$.road'),"
        " json_extract(c.value, '$.ctx'), json_extract(c.value, '$.size'),"
        " json_extract(c.value, '$.ptr'), json_extract(c.value, '$.gil'),"
        " json_extract(c.value, '$.kept'), json_array_length(c.value, '$.frames'),"
        " json_extract(f.value, '$[0]'), json_extract(f.value, '$[1]'),"
        " json_extract(f.value, '$[2]'), json_extract(f.value, '$[3]'),"
        " json_extract(?1, '$.python'), json_array_length(?1, '$.calls')"
        " FROM json_each(?1, '$.calls') c, json_each(c.value, '$.frames') f"
        " ORDER BY c.key, f.key";
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(db));
    sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
    int64_t last = -1;
    size_t total = 0;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t key = sqlite3_column_int64(q, 0);
        if (!x->calls) {
            total = (size_t)sqlite3_column_int64(q, 14);
            x->calls = calloc(total ? total : 1, sizeof *x->calls);
            snprintf(x->python, sizeof x->python, "%s", sqlite3_column_text(q, 13));
        }
        ck_assert_int_lt(key, (int64_t)total);
        struct xcall *c = &x->calls[key];
        if (key != last) {
            ck_assert_int_eq(key, (int64_t)x->n);
            x->n++;
            last = key;
            c->api = col_dup(q, 1);
            c->road = col_dup(q, 2);
            c->ctx = col_dup(q, 3);
            c->size = col_int_or(q, 4, -1);
            c->ptr = col_int_or(q, 5, -1);
            c->gil = sqlite3_column_int(q, 6) != 0;
            c->kept = sqlite3_column_int(q, 7) != 0;
            c->frames = calloc((size_t)sqlite3_column_int64(q, 8) + 1, sizeof *c->frames);
        }
        struct xframe *f = &c->frames[c->nframes++];
        f->file = col_dup(q, 9);
        f->line = sqlite3_column_int64(q, 10);
        f->func = col_dup(q, 11);
        f->c = (int)col_int_or(q, 12, -1);
    }
    ck_assert_msg(rc == SQLITE_DONE, "%s: %s", path, sqlite3_errmsg(db));
    ck_assert_msg(x->n == total && total > 0, "%s: %zu calls with frames of %zu", path, x->n,
                  total);
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(json);
}

static void free_expect(struct xset *x)
{
    for (size_t i = 0; i < x->n; i++) {
        struct xcall *c = &x->calls[i];
        for (size_t k = 0; k < c->nframes; k++) {
            free(c->frames[k].file);
            free(c->frames[k].func);
        }
        free(c->frames);
        free(c->api);
        free(c->road);
        free(c->ctx);
    }
    free(x->calls);
}

/* ---- the trace's side ---- */

struct tframe {
    char *file, *func;
    int64_t line, instr, entry; /* -1: NULL */
};

struct tcall {
    int64_t seq, size, ptr, stack_id;
    char *api;
    size_t nframes, nnative;
    struct tframe *frames; /* the python ones, innermost first */
};

struct tset {
    size_t n;
    struct tcall *calls;
};

static void load_trace(sqlite3 *db, struct tset *t)
{
    memset(t, 0, sizeof *t);
    sqlite3_stmt *q, *fq, *nq;
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT seq, api, size, ptr, stack_id FROM calls"
                                        " WHERE NOT nested AND api IN ('cudaMalloc', 'cudaFree',"
                                        " 'cudaMemGetInfo') ORDER BY seq",
                                        -1, &q, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT file, line, symbol, instr, entry FROM stacks"
                                        " WHERE stack_id = ?1 AND kind = 'python' ORDER BY depth",
                                        -1, &fq, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT count(*) FROM stacks WHERE stack_id = ?1 AND"
                                        " kind = 'native'",
                                        -1, &nq, NULL),
                     SQLITE_OK);
    size_t cap = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        if (t->n == cap)
            t->calls = realloc(t->calls, (cap = cap ? 2 * cap : 256) * sizeof *t->calls);
        struct tcall *c = &t->calls[t->n++];
        memset(c, 0, sizeof *c);
        c->seq = sqlite3_column_int64(q, 0);
        c->api = col_dup(q, 1);
        c->size = sqlite3_column_int64(q, 2);
        c->ptr = sqlite3_column_int64(q, 3);
        c->stack_id = sqlite3_column_int64(q, 4);
        size_t fcap = 0;
        sqlite3_bind_int64(fq, 1, c->stack_id);
        while (c->stack_id != 0 && sqlite3_step(fq) == SQLITE_ROW) {
            if (c->nframes == fcap)
                c->frames = realloc(c->frames, (fcap = fcap ? 2 * fcap : 16) * sizeof *c->frames);
            struct tframe *f = &c->frames[c->nframes++];
            f->file = sqlite3_column_type(fq, 0) == SQLITE_NULL ? NULL : col_dup(fq, 0);
            f->line = col_int_or(fq, 1, -1);
            f->func = sqlite3_column_type(fq, 2) == SQLITE_NULL ? NULL : col_dup(fq, 2);
            f->instr = col_int_or(fq, 3, -1);
            f->entry = col_int_or(fq, 4, -1);
        }
        sqlite3_reset(fq);
        sqlite3_bind_int64(nq, 1, c->stack_id);
        if (sqlite3_step(nq) == SQLITE_ROW)
            c->nnative = (size_t)sqlite3_column_int64(nq, 0);
        sqlite3_reset(nq);
    }
    sqlite3_finalize(q);
    sqlite3_finalize(fq);
    sqlite3_finalize(nq);
}

static void free_trace(struct tset *t)
{
    for (size_t i = 0; i < t->n; i++) {
        for (size_t k = 0; k < t->calls[i].nframes; k++) {
            free(t->calls[i].frames[k].file);
            free(t->calls[i].frames[k].func);
        }
        free(t->calls[i].frames);
        free(t->calls[i].api);
    }
    free(t->calls);
}

/* ---- comparing them ---- */

/* What a call's Python frames must be. */
enum want {
    WANT_ALL,   /* exactly the expected ones (the innermost `depth`) */
    WANT_RIGHT, /* none, or exactly the expected ones */
    WANT_NONE,  /* none */
};

/* How the frames were read: raw ones have instr and entry, API ones neither. */
enum read_kind { READ_RAW, READ_API, READ_ANY };

struct mismatches {
    size_t n;
    char text[8192];
};

static void note(struct mismatches *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct mismatches *m, const char *fmt, ...)
{
    if (m->n++ >= MAX_REPORTED)
        return;
    size_t len = strlen(m->text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->text + len, sizeof m->text - len, fmt, ap);
    va_end(ap);
    len = strlen(m->text);
    if (len + 1 < sizeof m->text) {
        m->text[len] = '\n';
        m->text[len + 1] = '\0';
    }
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path ? path : "(null)";
}

/* One call: "#12 cudaMalloc cdll size 1052672 in thread". */
static void describe(char *buf, size_t cap, size_t i, const struct xcall *x)
{
    if (x->size >= 0)
        snprintf(buf, cap, "#%zu %s %s size %lld in %s", i, x->api, x->road, (long long)x->size,
                 x->ctx);
    else
        snprintf(buf, cap, "#%zu %s %s in %s", i, x->api, x->road, x->ctx);
}

/* Whether the trace's frames equal the innermost `depth` expected ones. */
static bool frames_equal(const struct xcall *x, const struct tcall *t, int depth, char *why,
                         size_t cap)
{
    size_t want = x->nframes < (size_t)depth ? x->nframes : (size_t)depth;
    if (t->nframes != want) {
        snprintf(why, cap,
                 "%zu python frames where %zu were expected (innermost: expected %s:%lld"
                 " %s, got %s:%lld %s)",
                 t->nframes, want, base_name(x->frames[0].file), (long long)x->frames[0].line,
                 x->frames[0].func, t->nframes ? base_name(t->frames[0].file) : "-",
                 t->nframes ? (long long)t->frames[0].line : 0LL,
                 t->nframes && t->frames[0].func ? t->frames[0].func : "-");
        return false;
    }
    for (size_t k = 0; k < want; k++) {
        const struct xframe *e = &x->frames[k];
        const struct tframe *g = &t->frames[k];
        if (!g->file || !g->func || strcmp(e->file, g->file) != 0 || e->line != g->line ||
            strcmp(e->func, g->func) != 0) {
            snprintf(why, cap, "frame %zu: expected %s:%lld %s, got %s:%lld %s", k, e->file,
                     (long long)e->line, e->func, g->file ? g->file : "(null)", (long long)g->line,
                     g->func ? g->func : "(null)");
            return false;
        }
    }
    return true;
}

struct tally {
    size_t with_frames, without;
};

/*
 * Every expected call against the trace's calls of the same rank (roads.py
 * makes them one at a time, so the orders agree; api, size and pointer say
 * the pairing is right). want_of() says what each call's frames must be.
 */
static struct tally compare(const char *label, const struct xset *x, const struct tset *t,
                            int depth, enum read_kind read,
                            enum want (*want_of)(const struct xcall *))
{
    struct mismatches m = {0};
    struct tally tally = {0, 0};
    ck_assert_msg(t->n == x->n, "%s: the trace has %zu memory calls, roads.py made %zu", label,
                  t->n, x->n);
    for (size_t i = 0; i < x->n; i++) {
        const struct xcall *e = &x->calls[i];
        const struct tcall *g = &t->calls[i];
        char what[256], why[1024];
        describe(what, sizeof what, i, e);
        ck_assert_msg(strcmp(e->api, g->api) == 0, "%s: %s: the trace's call %zu is %s", label,
                      what, i, g->api);
        if (strcmp(e->api, "cudaMalloc") == 0)
            ck_assert_msg(g->size == e->size && g->ptr == e->ptr,
                          "%s: %s: the trace's call has size %lld ptr %llx", label, what,
                          (long long)g->size, (unsigned long long)g->ptr);
        if (strcmp(e->api, "cudaFree") == 0)
            ck_assert_msg(g->ptr == e->ptr, "%s: %s: the trace's free is of %llx, not %llx", label,
                          what, (unsigned long long)g->ptr, (unsigned long long)e->ptr);
        enum want want = want_of(e);
        if (g->nframes)
            tally.with_frames++;
        else
            tally.without++;
        if (want == WANT_NONE) {
            if (g->nframes)
                note(&m, "%s: %zu python frames where none can be read (innermost %s:%lld %s)",
                     what, g->nframes, base_name(g->frames[0].file), (long long)g->frames[0].line,
                     g->frames[0].func ? g->frames[0].func : "(null)");
            continue;
        }
        if (want == WANT_RIGHT && g->nframes == 0)
            continue;
        if (!frames_equal(e, g, depth, why, sizeof why)) {
            note(&m, "%s: %s", what, why);
            continue;
        }
        for (size_t k = 0; k < g->nframes; k++) {
            const struct tframe *f = &g->frames[k];
            if (read == READ_RAW && (f->instr < 0 || f->entry < 0)) {
                note(&m, "%s: frame %zu (%s) read without the GIL has instr %lld entry %lld", what,
                     k, f->func, (long long)f->instr, (long long)f->entry);
                break;
            }
            if (read == READ_API && (f->instr >= 0 || f->entry >= 0)) {
                note(&m, "%s: frame %zu (%s) read through the API has instr %lld entry %lld", what,
                     k, f->func, (long long)f->instr, (long long)f->entry);
                break;
            }
        }
    }
    ck_assert_msg(m.n == 0, "%s: %zu of %zu calls have wrong Python frames:\n%s%s", label, m.n,
                  x->n, m.text, m.n > MAX_REPORTED ? "...\n" : "");
    return tally;
}

static enum want want_all(const struct xcall *x)
{
    (void)x;
    return WANT_ALL;
}

/* Only with the GIL held (the API fallback). */
static enum want want_gil_only(const struct xcall *x)
{
    return x->gil ? WANT_ALL : WANT_NONE;
}

/* A wrong table: the GIL-held calls through the API, the others right or none. */
static enum want want_gil_or_right(const struct xcall *x)
{
    return x->gil ? WANT_ALL : WANT_RIGHT;
}

/* 3.10 and 3.11 cannot tell which interpreter a thread runs while it has
 * released the GIL (pyframes.c): a sub-interpreter's calls may lack frames. */
static enum want want_sub_optional(const struct xcall *x)
{
    return strcmp(x->ctx, "subinterpreter") == 0 ? WANT_RIGHT : WANT_ALL;
}

/* ---- running roads.py ---- */

static void python_env(struct world *w, const struct python *py)
{
    static char pythonpath[MAX_PYTHONS][4200];
    size_t i = (size_t)(py - pythons);
    snprintf(pythonpath[i], sizeof pythonpath[i], "PYTHONPATH=%s/python/%s",
             getenv("CUTRACE_TEST_BUILD"), py->version);
    w->extra_env[0] = pythonpath[i];
    w->extra_env[1] = "PYTHONDONTWRITEBYTECODE=1";
}

static void require_extension(const struct python *py)
{
    char rel[64];
    snprintf(rel, sizeof rel, "python/%s/cutrace_nogil.built", py->version);
    ck_assert_msg(access(build_path(rel), R_OK) == 0,
                  "CPython %s: %s is missing: run `make python-pyframes-prep`", py->version,
                  build_path(rel));
}

/* A roads.py run in its own world: its expectations in <root>/expect.json. */
struct roads_run {
    struct world w;
    char expect[4200];
    struct running p;
    struct run r;
};

static void roads_start(struct roads_run *rr, const char *python, const struct python *env_py,
                        bool traced, const char *const *env, const char *opt)
{
    world_init(&rr->w);
    if (env_py)
        python_env(&rr->w, env_py);
    size_t k = 0;
    while (k < 8 && rr->w.extra_env[k])
        k++;
    for (size_t i = 0; env && env[i] && k < 8; i++)
        rr->w.extra_env[k++] = env[i];
    snprintf(rr->expect, sizeof rr->expect, "%s/expect.json", rr->w.root);
    const char *argv[] = {python, source_path("tests/python/roads.py"), rr->expect, opt, NULL};
    rr->p = start_prog(&rr->w, traced, argv);
}

static void roads_finish(struct roads_run *rr, const char *label)
{
    rr->r = finish_prog(&rr->p, 180);
    ck_assert_msg(rr->r.status == 0, "%s: roads.py exited %d:\n%s", label, rr->r.status, rr->r.err);
}

static void roads_free(struct roads_run *rr)
{
    run_free(&rr->r);
    world_free(&rr->w);
}

/* The traced run changed nothing the program can see. */
static void assert_unchanged(const char *label, const struct run *plain, const struct run *traced)
{
    ck_assert_int_eq(traced->status, plain->status);
    ck_assert_msg(strcmp(traced->out, plain->out) == 0, "%s: stdout differs:\n%s\nuntraced:\n%s",
                  label, traced->out, plain->out);
    ck_assert_msg(strcmp(traced->err, plain->err) == 0, "%s: stderr differs:\n%s\nuntraced:\n%s",
                  label, traced->err, plain->err);
}

/* Unchanged but for exactly one "cutrace: " line on stderr (a fallback's warning). */
static void assert_unchanged_but_warning(const char *label, const struct run *plain,
                                         const struct run *traced)
{
    ck_assert_int_eq(traced->status, plain->status);
    ck_assert_msg(strcmp(traced->out, plain->out) == 0, "%s: stdout differs:\n%s\nuntraced:\n%s",
                  label, traced->out, plain->out);
    size_t warnings = 0;
    char *rest = calloc(1, traced->err_len + 1);
    for (const char *p = traced->err; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
        if (strncmp(p, "cutrace: ", 9) == 0)
            warnings++;
        else
            strncat(rest, p, len);
        p += len;
    }
    ck_assert_msg(warnings == 1, "%s: %zu \"cutrace: \" lines on stderr, expected one:\n%s", label,
                  warnings, traced->err);
    ck_assert_msg(strcmp(rest, plain->err) == 0, "%s: stderr differs:\n%s\nuntraced:\n%s", label,
                  traced->err, plain->err);
    free(rest);
}

static sqlite3 *only_trace(struct world *w)
{
    char **files;
    size_t n = list_traces(w, &files);
    ck_assert_msg(n == 1, "%zu traces in %s, expected one", n, w->trace_dir);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    free_list(files, n);
    return db;
}

static const char *python_frames_meta(sqlite3 *db)
{
    return tsql_text(db, "SELECT value FROM meta WHERE key = 'python_frames'");
}

static void assert_meta_prefix(const char *label, sqlite3 *db, const char *prefix)
{
    const char *how = python_frames_meta(db);
    ck_assert_msg(strncmp(how, prefix, strlen(prefix)) == 0,
                  "%s: meta python_frames is \"%s\", expected \"%s...\"", label, how, prefix);
}

static struct run cutrace(struct world *w, const char *const *args)
{
    const char *argv[12] = {build_path("cutrace")};
    for (int i = 0; args[i] && i < 10; i++)
        argv[i + 1] = args[i];
    return run_prog(w, false, argv, 120);
}

/* ---- the folded stacks ---- */

struct folded {
    char *copy;
    size_t n;
    char **tok; /* gpuN, pid N, frames outermost first, the API */
};

/* A Python frame in a folded line: "function (file.py:LINE)" (stacks.c). */
static bool is_python_token(const char *t)
{
    size_t len = strlen(t);
    return len > 3 && t[len - 1] == ')' && strstr(t, " (") != NULL;
}

static void folded_split(const char *line, size_t len, struct folded *f)
{
    f->copy = strndup(line, len);
    char *space = strrchr(f->copy, ' '); /* " BYTES" */
    if (space)
        *space = '\0';
    f->n = 0;
    f->tok = NULL;
    size_t cap = 0;
    for (char *save, *t = strtok_r(f->copy, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        if (f->n == cap)
            f->tok = realloc(f->tok, (cap = cap ? 2 * cap : 64) * sizeof *f->tok);
        f->tok[f->n++] = t;
    }
}

/* The line whose Python frames are exactly `want` (outermost first), split. */
static bool folded_find(const char *out, char *const *want, size_t nwant, struct folded *found)
{
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        struct folded f;
        folded_split(p, len, &f);
        size_t k = 0;
        bool same = true;
        for (size_t i = 0; i < f.n && same; i++) {
            if (!is_python_token(f.tok[i]))
                continue;
            same = k < nwant && strcmp(f.tok[i], want[k]) == 0;
            k++;
        }
        if (same && k == nwant) {
            *found = f;
            return true;
        }
        free(f.tok);
        free(f.copy);
        p += len + (nl != NULL);
    }
    return false;
}

/*
 * Each kept allocation's folded stack (CUTRACE_STACK_DEPTH=128: whole
 * stacks) has the Python frames where the interpreter ran them: all of
 * them, in order; after the innermost only native frames, the road's C
 * call among them (ctypes' PyCFuncPtr_call, the extension's nogil_malloc);
 * native frames before the outermost; no eval loop left unreplaced; and
 * between two Python frames native frames exactly where a C function
 * entered the interpreter again (every frame on 3.10; on 3.11+ where
 * roads.py knows: next() on a generator, functools.partial, the C thread,
 * and none between plain Python calls).
 */
static void check_folded(const char *label, const struct python *py, const struct xset *x,
                         const struct tset *t, const char *out)
{
    struct mismatches m = {0};
    size_t checked = 0;
    bool v310 = minor_of(py->version) == 10;
    for (size_t i = 0; i < x->n; i++) {
        const struct xcall *e = &x->calls[i];
        if (!e->kept)
            continue;
        char what[256];
        describe(what, sizeof what, i, e);
        size_t np = e->nframes;
        char **want = calloc(np, sizeof *want);
        for (size_t k = 0; k < np; k++) {
            const struct xframe *f = &e->frames[np - 1 - k];
            ck_assert_int_ge(
                asprintf(&want[k], "%s (%s:%lld)", f->func, base_name(f->file), (long long)f->line),
                0);
        }
        struct folded f;
        if (!folded_find(out, want, np, &f)) {
            note(&m, "%s: no folded stack has its Python frames, innermost %s", what, want[np - 1]);
            goto next;
        }
        checked++;
        size_t first = f.n, last = 0;
        for (size_t k = 0; k < f.n; k++) {
            if (is_python_token(f.tok[k])) {
                first = first < k ? first : k;
                last = k;
            }
        }
        /* After the innermost Python frame: the C call, native only. */
        const char *marker = strcmp(e->road, "ext") == 0 ? "nogil_malloc" : "PyCFuncPtr_call";
        bool has_marker = false;
        for (size_t k = last + 1; k + 1 < f.n; k++)
            has_marker = has_marker || strcmp(f.tok[k], marker) == 0;
        if (!has_marker)
            note(&m, "%s: no %s between %s and the API", what, marker, f.tok[last]);
        /* A native stack cut by the depth limit leaves Python frames unplaced. */
        bool whole = t->calls[i].nnative < DEEP_DEPTH;
        if (!whole)
            goto done;
        if (first < 3)
            note(&m, "%s: the outermost Python frame %s has no native frame before it", what,
                 f.tok[first]);
        for (size_t k = 2; k < f.n; k++)
            if (strcmp(f.tok[k], "_PyEval_EvalFrameDefault") == 0) {
                note(&m, "%s: an eval loop at position %zu has no Python frames", what, k);
                break;
            }
        if (strcmp(e->ctx, "c_thread") == 0) {
            bool thread_fn = false;
            for (size_t k = 2; k < first; k++)
                thread_fn = thread_fn || strcmp(f.tok[k], "cutrace_nogil_thread_main") == 0;
            if (!thread_fn)
                note(&m, "%s: cutrace_nogil_thread_main is not below %s", what, f.tok[first]);
        }
        /* Native frames between consecutive Python frames. */
        size_t prev = first, pyk = 0;
        for (size_t k = first + 1; k <= last; k++) {
            if (!is_python_token(f.tok[k]))
                continue;
            pyk++;
            size_t gap = k - prev - 1;
            const struct xframe *inner = &e->frames[np - 1 - pyk];
            if (v310 && gap == 0)
                note(&m, "%s: no eval loop between %s and %s (3.10: one per frame)", what,
                     f.tok[prev], f.tok[k]);
            else if (!v310 && inner->c == 1 && gap == 0)
                note(&m, "%s: %s was entered from C but follows %s directly", what, f.tok[k],
                     f.tok[prev]);
            else if (!v310 && inner->c == 0 && gap != 0)
                note(&m,
                     "%s: %s was called by %s in the same eval loop, but %zu native frames"
                     " lie between",
                     what, f.tok[k], f.tok[prev], gap);
            prev = k;
        }
    done:
        free(f.tok);
        free(f.copy);
    next:
        for (size_t k = 0; k < np; k++)
            free(want[k]);
        free(want);
    }
    ck_assert_msg(m.n == 0, "%s: %zu folded-stack problems:\n%s%s", label, m.n, m.text,
                  m.n > MAX_REPORTED ? "...\n" : "");
    ck_assert_uint_gt(checked, 20);
}

/* `cutrace sites --json`: each kept CDLL or extension allocation's site is
 * its innermost Python frame, "roads.py:LINE function". */
static void check_sites(const char *label, struct world *w, const struct xset *x)
{
    const char *args[] = {"sites", "--json", "--top", "0", w->trace_dir, NULL};
    struct run r = cutrace(w, args);
    ck_assert_msg(r.status == 0, "%s: cutrace sites: %s", label, r.err);
    struct mismatches m = {0};
    size_t checked = 0;
    for (size_t i = 0; i < x->n; i++) {
        const struct xcall *e = &x->calls[i];
        if (!e->kept || strcmp(e->road, "pydll") == 0)
            continue;
        char site[512];
        snprintf(site, sizeof site, "\"site\": \"%s:%lld %s\"", base_name(e->frames[0].file),
                 (long long)e->frames[0].line, e->frames[0].func);
        checked++;
        if (!strstr(r.out, site)) {
            char what[256];
            describe(what, sizeof what, i, e);
            note(&m, "%s: no %s", what, site);
        }
    }
    ck_assert_msg(m.n == 0, "%s: %zu sites missing from `cutrace sites --json`:\n%s\n%.4000s",
                  label, m.n, m.text, r.out);
    ck_assert_uint_gt(checked, 20);
    run_free(&r);
}

/* ---- the tests ---- */

START_TEST(test_interpreters_found)
{
    for (size_t i = 0; i < npythons; i++)
        fprintf(stderr, "pyframes: CPython %s: %s\n", pythons[i].version, pythons[i].path);
    /* Visible, never silent: an absent version (or why none was found). */
    for (const char *p = pythons_note; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len)
            fprintf(stderr, "pyframes: %.*s\n", (int)len, p);
        p += len + (nl != NULL);
    }
    if (npythons == 0)
        fprintf(stderr, "pyframes: skipped: no CPython 3.10-3.14 found: nothing to test\n");
}
END_TEST

/* Every road, traced at the default depth and at 128: frames, sites, folded stacks. */
START_TEST(test_roads_frames)
{
    const struct python *py = &pythons[_i];
    require_extension(py);
    char label[64];
    struct roads_run plain, traced, deep;
    const char *deep_env[] = {"CUTRACE_STACK_DEPTH=128", NULL};
    roads_start(&plain, py->path, py, false, NULL, NULL);
    roads_start(&traced, py->path, py, true, NULL, NULL);
    roads_start(&deep, py->path, py, true, deep_env, NULL);
    snprintf(label, sizeof label, "CPython %s untraced", py->version);
    roads_finish(&plain, label);
    snprintf(label, sizeof label, "CPython %s traced", py->version);
    roads_finish(&traced, label);
    assert_unchanged(label, &plain.r, &traced.r);
    snprintf(label, sizeof label, "CPython %s traced, depth 128", py->version);
    roads_finish(&deep, label);
    assert_unchanged(label, &plain.r, &deep.r);

    struct xset x;
    struct tset t;
    snprintf(label, sizeof label, "CPython %s", py->version);
    load_expect(traced.expect, &x);
    sqlite3 *db = only_trace(&traced.w);
    assert_meta_prefix(label, db, "without the GIL");
    load_trace(db, &t);
    sqlite3_close(db);
    struct tally tally = compare(label, &x, &t, DEFAULT_DEPTH, READ_RAW, want_all);
    ck_assert_uint_eq(tally.without, 0);
    check_sites(label, &traced.w, &x);
    size_t ncalls = x.n;
    free_trace(&t);
    free_expect(&x);

    snprintf(label, sizeof label, "CPython %s, depth 128", py->version);
    load_expect(deep.expect, &x);
    db = only_trace(&deep.w);
    assert_meta_prefix(label, db, "without the GIL");
    load_trace(db, &t);
    sqlite3_close(db);
    compare(label, &x, &t, DEEP_DEPTH, READ_RAW, want_all);
    const char *folded_args[] = {"sites", "--folded", deep.w.trace_dir, NULL};
    struct run r = cutrace(&deep.w, folded_args);
    ck_assert_msg(r.status == 0, "%s: cutrace sites --folded: %s", label, r.err);
    check_folded(label, py, &x, &t, r.out);
    run_free(&r);
    free_trace(&t);
    free_expect(&x);
    fprintf(stderr, "pyframes: CPython %s: %zu calls on every road: Python frames right\n",
            py->version, ncalls);
    roads_free(&plain);
    roads_free(&traced);
    roads_free(&deep);
}
END_TEST

/* A second interpreter: the program unchanged, its frames right where present. */
START_TEST(test_subinterpreter)
{
    const struct python *py = &pythons[_i];
    require_extension(py);
    char label[64];
    snprintf(label, sizeof label, "CPython %s sub-interpreter", py->version);
    struct roads_run plain, traced;
    roads_start(&plain, py->path, py, false, NULL, "--subinterp");
    roads_start(&traced, py->path, py, true, NULL, "--subinterp");
    roads_finish(&plain, label);
    roads_finish(&traced, label);
    assert_unchanged(label, &plain.r, &traced.r);
    struct xset x;
    struct tset t;
    load_expect(traced.expect, &x);
    sqlite3 *db = only_trace(&traced.w);
    load_trace(db, &t);
    sqlite3_close(db);
    bool may_lack = minor_of(py->version) < 12;
    /* Say what was seen, per road, before judging it. */
    size_t sub[3] = {0, 0, 0}, framed[3] = {0, 0, 0};
    const char *roads[3] = {"cdll", "ext", "pydll"};
    for (size_t i = 0; i < x.n; i++) {
        if (strcmp(x.calls[i].ctx, "subinterpreter") != 0)
            continue;
        for (int k = 0; k < 3; k++) {
            if (strcmp(x.calls[i].road, roads[k]) == 0) {
                sub[k]++;
                framed[k] += t.calls[i].nframes > 0;
            }
        }
    }
    ck_assert_uint_gt(sub[0] + sub[1] + sub[2], 0);
    fprintf(stderr,
            "pyframes: CPython %s: sub-interpreter calls with Python frames: CDLL %zu of %zu,"
            " extension %zu of %zu, PyDLL %zu of %zu%s\n",
            py->version, framed[0], sub[0], framed[1], sub[1], framed[2], sub[2],
            may_lack ? " (absent is allowed before 3.12)" : "");
    compare(label, &x, &t, DEFAULT_DEPTH, READ_ANY, may_lack ? want_sub_optional : want_all);
    free_trace(&t);
    free_expect(&x);
    roads_free(&plain);
    roads_free(&traced);
}
END_TEST

/*
 * Another version's table imposed (CUTRACE_PYFRAMES=layout:3.N, every
 * table of 3.10-3.14 but the interpreter's own): the checks must refuse
 * it: one warning, the program unchanged, the API with the GIL held from
 * then on, and no Python frame recorded that is wrong.
 */
START_TEST(test_wrong_layout_falls_back)
{
    const struct python *py = &pythons[_i];
    require_extension(py);
    int minor = minor_of(py->version);
    int others[5], nothers = 0;
    for (int m = 10; m <= 14; m++)
        if (m != minor)
            others[nothers++] = m;
    struct roads_run plain, wrong[5];
    char env[5][40];
    roads_start(&plain, py->path, py, false, NULL, NULL);
    for (int k = 0; k < nothers; k++) {
        snprintf(env[k], sizeof env[k], "CUTRACE_PYFRAMES=layout:3.%d", others[k]);
        const char *e[] = {env[k], NULL};
        roads_start(&wrong[k], py->path, py, true, e, NULL);
    }
    char label[256];
    snprintf(label, sizeof label, "CPython %s untraced", py->version);
    roads_finish(&plain, label);
    for (int k = 0; k < nothers; k++) {
        snprintf(label, sizeof label, "CPython %s with %s", py->version, env[k]);
        roads_finish(&wrong[k], label);
        assert_unchanged_but_warning(label, &plain.r, &wrong[k].r);
        struct xset x;
        struct tset t;
        load_expect(wrong[k].expect, &x);
        sqlite3 *db = only_trace(&wrong[k].w);
        char *how = strdup(python_frames_meta(db));
        load_trace(db, &t);
        sqlite3_close(db);
        fprintf(stderr, "pyframes: CPython %s with %s: python_frames: %s\n", py->version, env[k],
                how);
        ck_assert_msg(strncmp(how, "with the GIL held only (API)", 28) == 0,
                      "%s: meta python_frames is \"%s\", expected the API fallback", label, how);
        compare(label, &x, &t, DEFAULT_DEPTH, READ_ANY, want_gil_or_right);
        free(how);
        free_trace(&t);
        free_expect(&x);
        roads_free(&wrong[k]);
    }
    roads_free(&plain);
}
END_TEST

static const struct python *python_for_api_mode(void)
{
    for (size_t i = 0; i < npythons; i++)
        if (strcmp(pythons[i].version, "3.12") == 0)
            return &pythons[i];
    return npythons ? &pythons[npythons - 1] : NULL;
}

/* CUTRACE_PYFRAMES=api: only calls made with the GIL held get frames, and
 * the user, who asked for it, is not warned. */
START_TEST(test_api_mode)
{
    const struct python *py = python_for_api_mode();
    if (!py) {
        fprintf(stderr, "pyframes: skipped: CUTRACE_PYFRAMES=api (no CPython 3.10-3.14)\n");
        return;
    }
    if (strcmp(py->version, "3.12") != 0)
        fprintf(stderr, "pyframes: CUTRACE_PYFRAMES=api on CPython %s (3.12 is absent)\n",
                py->version);
    require_extension(py);
    char label[64];
    snprintf(label, sizeof label, "CPython %s CUTRACE_PYFRAMES=api", py->version);
    struct roads_run plain, api;
    const char *env[] = {"CUTRACE_PYFRAMES=api", NULL};
    roads_start(&plain, py->path, py, false, NULL, NULL);
    roads_start(&api, py->path, py, true, env, NULL);
    roads_finish(&plain, label);
    roads_finish(&api, label);
    assert_unchanged(label, &plain.r, &api.r); /* asked for: no warning */
    struct xset x;
    struct tset t;
    load_expect(api.expect, &x);
    sqlite3 *db = only_trace(&api.w);
    assert_meta_prefix(label, db, "with the GIL held only (API)");
    ck_assert_ptr_nonnull(strstr(python_frames_meta(db), "CUTRACE_PYFRAMES=api"));
    load_trace(db, &t);
    sqlite3_close(db);
    struct tally tally = compare(label, &x, &t, DEFAULT_DEPTH, READ_API, want_gil_only);
    ck_assert_uint_gt(tally.with_frames, 20);
    free_trace(&t);
    free_expect(&x);
    roads_free(&plain);
    roads_free(&api);
}
END_TEST

/* CPython 3.9 has no layout: the API fallback, one warning, nothing else changes. */
START_TEST(test_unknown_version)
{
    const char *home = getenv("HOME");
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s/.pyenv/versions/3.9*/bin/python3.9",
             home ? home : "/root");
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        fprintf(stderr, "pyframes: skipped: the unknown-version fallback (no %s)\n", pattern);
        globfree(&g);
        return;
    }
    const char *python = g.gl_pathv[g.gl_pathc - 1];
    char label[64] = "CPython 3.9";
    struct roads_run plain, traced;
    roads_start(&plain, python, NULL, false, NULL, "--no-ext");
    roads_start(&traced, python, NULL, true, NULL, "--no-ext");
    roads_finish(&plain, label);
    roads_finish(&traced, label);
    assert_unchanged_but_warning(label, &plain.r, &traced.r);
    struct xset x;
    struct tset t;
    load_expect(traced.expect, &x);
    sqlite3 *db = only_trace(&traced.w);
    assert_meta_prefix(label, db, "with the GIL held only (API)");
    load_trace(db, &t);
    sqlite3_close(db);
    struct tally tally = compare(label, &x, &t, DEFAULT_DEPTH, READ_API, want_gil_only);
    ck_assert_uint_gt(tally.with_frames, 20);
    fprintf(stderr,
            "pyframes: %s (%s): API fallback, %zu PyDLL calls with frames, %zu CDLL"
            " calls without\n",
            label, python, tally.with_frames, tally.without);
    free_trace(&t);
    free_expect(&x);
    roads_free(&plain);
    roads_free(&traced);
    globfree(&g);
}
END_TEST

static const char *asan_runtime(void)
{
    static char path[4096];
    const char *cc = getenv("CC");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "%s -print-file-name=libasan.so", cc && *cc ? cc : "gcc");
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(fgets(path, sizeof path, p));
    pclose(p);
    path[strcspn(path, "\n")] = '\0';
    ck_assert_msg(path[0] == '/', "%s: %s", cmd, path);
    return path;
}

/* 16 threads, code objects dying, gc and forks, under ASan: every frame real. */
START_TEST(test_stress_under_asan)
{
    const struct python *py = &pythons[_i];
    ck_assert_msg(access(build_path("asan/libcutrace.so"), R_OK) == 0,
                  "%s is missing: run `make python-pyframes-prep`",
                  build_path("asan/libcutrace.so"));
    char label[64];
    snprintf(label, sizeof label, "CPython %s stress (ASan)", py->version);
    static char preload[8400];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s:%s", asan_runtime(),
             build_path("asan/libcutrace.so"));
    const char *argv[] = {py->path, source_path("tests/python/stress.py"), NULL};
    struct world plain_w, asan_w;
    world_init(&plain_w);
    world_init(&asan_w);
    asan_w.extra_env[0] = preload;
    asan_w.extra_env[1] = "ASAN_OPTIONS=detect_leaks=0:abort_on_error=0";
    asan_w.extra_env[2] = "UBSAN_OPTIONS=print_stacktrace=1";
    /* A forked child inherits the shadow of the threads that did not survive
     * the fork, poisoned where the tracer's instrumented frames were live on
     * their stacks. glibc puts those stacks in its stack cache and, once the
     * cache is over its 40 MiB (16 threads are 128 MiB), munmaps the excess
     * at the child's next thread exit (the tracer's start thread); a later
     * mmap placed there (the writer's -shm) then looks poisoned to ASan,
     * whose report crashes describing a thread that is gone (CHECK
     * "ptr[0] == kCurrentStackFrameMagic"; google/sanitizers#836, ASan's
     * known false positives after fork with threads). A cache that holds
     * them all keeps them mapped until a new thread reuses one, which ASan
     * clears. Seen once in CI (a child's writer, in SQLite's memset of its
     * new wal-index page); 16 threads parked in an instrumented frame, a fork,
     * a thread joined and an mmap show it on every run without this. */
    asan_w.extra_env[3] = "GLIBC_TUNABLES=glibc.pthread.stack_cache_size=1073741824";
    struct running pp = start_prog(&plain_w, false, argv);
    struct running ap = start_prog(&asan_w, false, argv);
    struct run plain = finish_prog(&pp, 180);
    struct run traced = finish_prog(&ap, 300);
    ck_assert_msg(plain.status == 0, "%s untraced: %d:\n%s", label, plain.status, plain.err);
    ck_assert_msg(traced.status == 0 && !strstr(traced.err, "Sanitizer") &&
                      !strstr(traced.err, "runtime error"),
                  "%s: exit %d:\n%s", label, traced.status, traced.err);
    assert_unchanged(label, &plain, &traced);

    const char *check[] = {py->path,
                           source_path("tests/python/check_frames.py"),
                           asan_w.trace_dir,
                           source_path("tests/python/stress.py"),
                           "stdlib:threading",
                           "--min-traces",
                           "4",
                           NULL};
    struct run r = run_prog(&asan_w, false, check, 120);
    ck_assert_msg(r.status == 0, "%s: check_frames.py:\n%s%s", label, r.out, r.err);
    fprintf(stderr, "pyframes: %s: %s", label,
            strstr(r.out, "checked ") ? strstr(r.out, "checked ") : r.out);
    run_free(&r);
    run_free(&plain);
    run_free(&traced);
    world_free(&plain_w);
    world_free(&asan_w);
}
END_TEST

Suite *pyframes_suite(void)
{
    find_pythons();
    Suite *s = suite_create("pyframes");
    TCase *tc = tcase_create("pyframes");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_interpreters_found);
    tcase_add_loop_test(tc, test_roads_frames, 0, (int)npythons);
    tcase_add_loop_test(tc, test_subinterpreter, 0, (int)npythons);
    tcase_add_loop_test(tc, test_wrong_layout_falls_back, 0, (int)npythons);
    tcase_add_test(tc, test_api_mode);
    tcase_add_test(tc, test_unknown_version);
    tcase_add_loop_test(tc, test_stress_under_asan, 0, (int)npythons);
    suite_add_tcase(s, tc);
    return s;
}
