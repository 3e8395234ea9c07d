/*
 * stacks.c - loading, symbolizing and merging a trace's call stacks
 * (stacks.h).
 *
 * Everything read here is untrusted: stack rows may be missing, repeated
 * or out of order, kinds unknown, parents cyclic, entry markers and
 * instruction offsets any value. Such rows are skipped or cut short, such
 * values read as "unknown", never trusted to index anything.
 */
#include "symbols/stacks.h"
#include "symbols/symcache.h"

#include "cli.h"
#include "model/modules.h"
#include "cutrace/pylines.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES      512 /* per stack; the tracer writes at most 256 */
#define MAX_PARENT_HOPS 64

/* The interpreter's eval loop: where Python frames run (3.9 to 3.13). */
static const char *const EVAL_LOOPS[] = {"_PyEval_EvalFrameDefault"};

/* ---- interned strings ---- */

struct strings {
    char **slots;
    size_t cap, n;
};

static uint64_t hash_text(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static const char *intern(struct strings *st, const char *s)
{
    if (!s)
        return NULL;
    if (2 * (st->n + 1) > st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 256;
        char **slots = xcalloc(cap, sizeof(*slots));
        for (size_t i = 0; i < st->cap; i++) {
            if (!st->slots[i])
                continue;
            size_t k = hash_text(st->slots[i]) & (cap - 1);
            while (slots[k])
                k = (k + 1) & (cap - 1);
            slots[k] = st->slots[i];
        }
        free(st->slots);
        st->slots = slots;
        st->cap = cap;
    }
    size_t k = hash_text(s) & (st->cap - 1);
    for (; st->slots[k]; k = (k + 1) & (st->cap - 1))
        if (strcmp(st->slots[k], s) == 0)
            return st->slots[k];
    st->slots[k] = xstrdup(s);
    st->n++;
    return st->slots[k];
}

static void strings_free(struct strings *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->cap; i++)
        free(st->slots[i]);
    free(st->slots);
    free(st);
}

/* ---- loading ---- */

struct module_id {
    const char *path, *build_id; /* interned */
};

struct loader {
    struct trace *t;
    struct symbolizer *sym;
    struct stack_set *out;
    struct strings *strings;
    struct module_id *modules;
    size_t nmodules, modules_cap;
    size_t stacks_cap;
    struct symcache cache; /* names given by earlier runs, when valid for this trace */
    bool entries;          /* the stacks view has format 5's instr and entry columns */
    bool linetables;       /* and the trace has py_linetables, with its columns */
};

/* The tables and views of format 4 that stacks_load reads. */
static const char *const STACK_OBJECTS[] = {"stacks", "stack_frames", "loaded_modules", "py_code",
                                            "symbols"};

static int present(struct trace *t, bool *yes)
{
    *yes = false;
    if (t->format_version < 4)
        return 0;
    for (size_t i = 0; i < sizeof(STACK_OBJECTS) / sizeof(STACK_OBJECTS[0]); i++) {
        sqlite3_stmt *q = trace_query(t,
                                      "SELECT count(*) FROM sqlite_schema WHERE type IN"
                                      " ('table', 'view') AND name = ?",
                                      "t", STACK_OBJECTS[i]);
        if (!q)
            return -1;
        int rc = trace_step(t, q);
        int64_t n = rc == 1 ? col_int(q, 0, 0) : 0;
        sqlite3_finalize(q);
        if (rc < 0)
            return -1;
        if (n == 0)
            return trace_fail(t,
                              "incomplete cutrace trace: format %" PRId64
                              " without its stack tables (no table or view '%s')",
                              t->format_version, STACK_OBJECTS[i]);
    }
    *yes = true;
    return 0;
}

static int load_config(struct loader *l)
{
    sqlite3_stmt *q = trace_query(l->t, "SELECT value FROM meta WHERE key = 'stacks'", "");
    if (!q)
        return -1;
    int rc = trace_step(l->t, q);
    if (rc == 1)
        l->out->config = col_text(q, 0);
    sqlite3_finalize(q);
    return rc < 0 ? -1 : 0;
}

static int load_modules(struct loader *l)
{
    sqlite3_stmt *q =
        trace_query(l->t, "SELECT path, build_id FROM loaded_modules ORDER BY load_id", "");
    if (!q)
        return -1;
    int rc;
    while ((rc = trace_step(l->t, q)) == 1) {
        char *path = col_text(q, 0), *build_id = col_text(q, 1);
        if (path) {
            const char *p = intern(l->strings, path);
            const char *b = intern(l->strings, build_id ? build_id : "");
            size_t i = 0;
            while (i < l->nmodules && l->modules[i].path != p)
                i++;
            if (i == l->nmodules) {
                l->modules =
                    xgrow(l->modules, &l->modules_cap, l->nmodules + 1, sizeof(*l->modules));
                l->nmodules++;
            }
            l->modules[i] = (struct module_id){p, b}; /* the latest load wins */
        }
        free(path);
        free(build_id);
    }
    sqlite3_finalize(q);
    return rc < 0 ? -1 : 0;
}

static const char *build_id_of(const struct loader *l, const char *path)
{
    for (size_t i = 0; i < l->nmodules; i++)
        if (l->modules[i].path == path)
            return l->modules[i].build_id;
    return "";
}

static bool is_eval_loop(const struct stack_frame *f)
{
    if (f->kind != STACK_NATIVE || !f->symbol)
        return false;
    for (size_t i = 0; i < sizeof(EVAL_LOOPS) / sizeof(EVAL_LOOPS[0]); i++)
        if (strcmp(f->symbol, EVAL_LOOPS[i]) == 0)
            return true;
    return false;
}

/*
 * Without entry markers (format 4, or frames read through CPython's API):
 * puts the Python frames in place of the interpreter's eval-loop frames as
 * well as the counts allow. Up to 3.10 each Python frame has an eval loop
 * of its own, so the counts match and the placement is exact. From 3.11 one
 * eval loop runs several Python frames (calls between Python functions do
 * not re-enter it) and the public API does not say which: with one eval
 * loop in the stack all frames go there (exact); with several, the inner
 * loops get one frame each and the outermost the rest (a guess, flagged).
 * Without any eval loop in view (native unwinding off, or cut short by the
 * depth limit) the Python frames follow the native ones.
 */
static void merge_guessed(struct stack *st, struct stack_frame *natives, size_t nn,
                          struct stack_frame *pythons, size_t np)
{
    size_t evals = 0;
    for (size_t i = 0; i < nn; i++)
        evals += is_eval_loop(&natives[i]);
    size_t out = 0, py = 0, seen = 0;
    st->placement_guessed = evals > 1 && np > 0 && evals != np;
    for (size_t i = 0; i < nn; i++) {
        if (np == 0 || !is_eval_loop(&natives[i])) {
            st->frames[out++] = natives[i];
            continue;
        }
        seen++;
        size_t take = seen < evals ? 1 : np - py; /* the outermost loop takes the rest */
        if (take > np - py)
            take = np - py;
        if (take == 0) {
            st->frames[out++] = natives[i];
            continue;
        }
        for (size_t k = 0; k < take; k++)
            st->frames[out++] = pythons[py++];
    }
    while (py < np)
        st->frames[out++] = pythons[py++];
    st->nframes = out;
}

/*
 * With entry markers (format 5, frames read from the interpreter's own
 * structures): each eval-loop invocation ran the Python frames from where
 * the previous one stopped up to its entry frame, so the Python frames,
 * innermost first, split into runs each ending at (and including) an entry
 * frame, and the k-th run belongs to the k-th eval loop, innermost first.
 * That is exact at any depth. The outermost run may lack its entry frame
 * (the Python frames were cut by the depth limit): it still belongs to the
 * next eval loop. Runs left over when the eval loops in view are used up
 * (the native stack was cut, or not recorded) follow the native frames in
 * order; eval loops left over (the Python frames were cut) stay native.
 */
static void merge_exact(struct stack *st, struct stack_frame *natives, size_t nn,
                        struct stack_frame *pythons, size_t np)
{
    size_t out = 0, py = 0;
    for (size_t i = 0; i < nn; i++) {
        if (py == np || !is_eval_loop(&natives[i])) {
            st->frames[out++] = natives[i];
            continue;
        }
        bool entry = false;
        while (py < np && !entry) {
            entry = pythons[py].entry == 1;
            st->frames[out++] = pythons[py++];
        }
    }
    while (py < np)
        st->frames[out++] = pythons[py++];
    st->nframes = out;
}

/* Puts the Python frames where the interpreter ran them: in place of its
 * eval-loop frames (docs/stacks.md, "Merging"). */
static void merge(struct stack *st, struct stack_frame *natives, size_t nn,
                  struct stack_frame *pythons, size_t np)
{
    st->nnative = nn;
    st->npython = np;
    st->frames = xcalloc(nn + np ? nn + np : 1, sizeof(*st->frames));
    /* One frame of unknown entry (read through the API, or a damaged value)
     * and the markers cannot say where the runs end: all or nothing. */
    bool markers = np > 0;
    for (size_t i = 0; i < np && markers; i++)
        markers = pythons[i].entry == 0 || pythons[i].entry == 1;
    if (markers)
        merge_exact(st, natives, nn, pythons, np);
    else
        merge_guessed(st, natives, nn, pythons, np);
}

static void finish_stack(struct loader *l, int64_t id, struct stack_frame *frames, size_t n)
{
    if (id <= 0 || n == 0)
        return;
    struct stack_frame *natives = xcalloc(n, sizeof(*natives));
    struct stack_frame *pythons = xcalloc(n, sizeof(*pythons));
    size_t nn = 0, np = 0;
    for (size_t i = 0; i < n; i++) {
        if (frames[i].kind == STACK_NATIVE)
            natives[nn++] = frames[i];
        else
            pythons[np++] = frames[i];
    }
    struct stack_set *s = l->out;
    s->stacks = xgrow(s->stacks, &l->stacks_cap, s->nstacks + 1, sizeof(*s->stacks));
    struct stack *st = &s->stacks[s->nstacks++];
    memset(st, 0, sizeof(*st));
    st->id = id;
    st->config = s->config;
    merge(st, natives, nn, pythons, np);
    free(natives);
    free(pythons);
}

/* Why a frame in no recorded module has no name. */
static const char NO_MODULE[] = "the address is in no module the trace recorded";

static void name_native(struct loader *l, struct stack_frame *f)
{
    if (f->symbol)
        return;
    if (!f->module) {
        f->unnamed = NO_MODULE;
        return;
    }
    const char *cached = l->sym ? symcache_lookup(&l->cache, f->ip) : NULL;
    if (cached) {
        f->symbol = intern(l->strings, cached);
        f->from_cache = true;
        return;
    }
    if (!l->sym) {
        char *why = xasprintf("%s: not looked up", module_basename(f->module));
        f->unnamed = intern(l->strings, why);
        free(why);
        return;
    }
    const char *build_id = build_id_of(l, f->module);
    uint64_t off = 0;
    /* A return address: the call is the instruction before it. */
    const char *name =
        symbolizer_lookup(l->sym, f->module, build_id, f->offset ? f->offset - 1 : 0, &off);
    if (name) {
        f->symbol = intern(l->strings, name);
        f->symbol_offset = off + 1;
        f->named_now = true;
        return;
    }
    const char *problem = symbolizer_problem(l->sym, f->module, build_id);
    if (problem && !l->out->unnamed_example)
        l->out->unnamed_example = xasprintf("%s: %s", module_basename(f->module), problem);
    /* No problem with the module: it names functions, just none here (a
     * stripped module names only its exported ones). */
    char *why = xasprintf("%s: %s", module_basename(f->module),
                          problem ? problem : "no function symbol at this address");
    f->unnamed = intern(l->strings, why);
    free(why);
}

/* A count from one query; -1 with t->error set. */
static int64_t count_of(struct trace *t, const char *sql)
{
    sqlite3_stmt *q = trace_query(t, sql, "");
    if (!q)
        return -1;
    int rc = trace_step(t, q);
    int64_t n = rc == 1 ? col_int(q, 0, 0) : 0;
    sqlite3_finalize(q);
    return rc < 0 ? -1 : n;
}

/* Which of format 5's additions the trace has. A format-5 trace without
 * them loads as format 4 did (damage elsewhere is caught by the query). */
static int format5_parts(struct loader *l)
{
    l->entries = l->linetables = false;
    if (l->t->format_version < 5)
        return 0;
    int64_t n = count_of(l->t, "SELECT count(*) FROM pragma_table_info('stacks')"
                               " WHERE name IN ('instr', 'entry')");
    if (n < 0)
        return -1;
    l->entries = n == 2;
    n = l->entries ? count_of(l->t, "SELECT count(*) FROM pragma_table_info('py_linetables')"
                                    " WHERE name IN ('code_id', 'format', 'first_line', 'bytes')")
                   : 0;
    if (n < 0)
        return -1;
    l->linetables = n == 4;
    return 0;
}

/* The line of the instruction at offset from the line table in columns
 * col (format), col + 1 (first line), col + 2 (the table); 0 when there is
 * none. Any bytes are safe input for ct_pylines_line. */
static int64_t line_from_table(sqlite3_stmt *q, int col, uint64_t offset)
{
    if (sqlite3_column_type(q, col) != SQLITE_INTEGER ||
        sqlite3_column_type(q, col + 1) != SQLITE_INTEGER)
        return 0;
    int64_t format = sqlite3_column_int64(q, col);
    if (format < 0 || format > UINT32_MAX)
        return 0;
    const uint8_t *table = sqlite3_column_blob(q, col + 2);
    int len = sqlite3_column_bytes(q, col + 2);
    if (!table || len <= 0)
        return 0;
    int64_t line = ct_pylines_line((unsigned)format, sqlite3_column_int64(q, col + 1), table,
                                   (size_t)len, offset);
    return line > 0 ? line : 0;
}

/* An integer column as trace contents have it: anything but an integer in
 * [lo, hi] reads as unknown. */
static int64_t col_ranged(sqlite3_stmt *q, int col, int64_t lo, int64_t hi, int64_t unknown)
{
    if (sqlite3_column_type(q, col) != SQLITE_INTEGER)
        return unknown;
    int64_t v = sqlite3_column_int64(q, col);
    return v >= lo && v <= hi ? v : unknown;
}

static int load_frames(struct loader *l)
{
    if (format5_parts(l) != 0)
        return -1;
    sqlite3_stmt *q;
    if (l->linetables)
        /* The line table of a frame whose line the writer could not take
         * from it (the table came after the frame): decoded here. */
        q = trace_query(l->t,
                        "SELECT s.stack_id, s.depth, s.kind, s.ip, s.module, s.offset, s.symbol,"
                        " s.file, s.line, s.instr, s.entry, t.format, t.first_line, t.bytes"
                        " FROM stacks s LEFT JOIN stack_frames f ON s.kind = 'python'"
                        " AND s.line IS NULL AND s.instr IS NOT NULL AND f.stack_id = s.stack_id"
                        " AND f.depth = s.depth LEFT JOIN py_linetables t"
                        " ON t.code_id = (f.value >> 32) ORDER BY s.stack_id, s.depth",
                        "");
    else if (l->entries)
        q = trace_query(l->t,
                        "SELECT stack_id, depth, kind, ip, module, offset, symbol, file, line,"
                        " instr, entry FROM stacks ORDER BY stack_id, depth",
                        "");
    else
        q = trace_query(l->t,
                        "SELECT stack_id, depth, kind, ip, module, offset, symbol, file, line"
                        " FROM stacks ORDER BY stack_id, depth",
                        "");
    if (!q)
        return -1;
    struct stack_frame frames[MAX_FRAMES];
    size_t n = 0;
    int64_t current = 0, last_depth = -1;
    int rc;
    while ((rc = trace_step(l->t, q)) == 1) {
        int64_t id = col_int(q, 0, 0), depth = col_int(q, 1, -1);
        if (id != current) {
            finish_stack(l, current, frames, n);
            current = id;
            n = 0;
            last_depth = -1;
        }
        char *kind = col_text(q, 2);
        bool python = kind && strcmp(kind, "python") == 0;
        bool native = kind && strcmp(kind, "native") == 0;
        free(kind);
        if ((!python && !native) || depth <= last_depth || n == MAX_FRAMES)
            continue; /* unknown, repeated or beyond the limit */
        last_depth = depth;
        struct stack_frame *f = &frames[n++];
        memset(f, 0, sizeof(*f));
        char *text;
        if (native) {
            f->kind = STACK_NATIVE;
            f->ip = (uint64_t)col_int(q, 3, 0);
            f->module = intern(l->strings, text = col_text(q, 4));
            free(text);
            f->offset = (uint64_t)col_int(q, 5, 0);
            f->symbol = intern(l->strings, text = col_text(q, 6));
            free(text);
            name_native(l, f);
        } else {
            f->kind = STACK_PYTHON;
            f->symbol = intern(l->strings, text = col_text(q, 6));
            free(text);
            f->file = intern(l->strings, text = col_text(q, 7));
            free(text);
            f->line = col_int(q, 8, 0);
            if (f->line < 0)
                f->line = 0;
            f->instr = l->entries ? col_ranged(q, 9, 0, INT64_MAX, -1) : -1;
            f->entry = l->entries ? (int)col_ranged(q, 10, 0, 1, -1) : -1;
            if (f->line == 0 && f->instr >= 0 && l->linetables)
                f->line = line_from_table(q, 11, (uint64_t)f->instr);
        }
    }
    finish_stack(l, current, frames, n);
    sqlite3_finalize(q);
    return rc < 0 ? -1 : 0;
}

static int compare_stacks(const void *a, const void *b)
{
    const struct stack *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/*
 * What a names cache must be valid for: this cutrace (its symbolizer), the
 * trace (its file name: host, pid and start time) and every module it
 * loaded, by path and build id, so that a module rebuilt under the same
 * path changes the key. A hash: the list can be hundreds of modules.
 */
static uint64_t fnv(uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s;; p++) {
        h = (h ^ *p) * 0x100000001b3ull;
        if (!*p)
            return h;
    }
}

static char *cache_key(const struct loader *l)
{
    uint64_t h = fnv(0xcbf29ce484222325ull, CUTRACE_VERSION);
    h = fnv(h, l->t->file);
    for (size_t i = 0; i < l->nmodules; i++)
        h = fnv(fnv(h, l->modules[i].path), l->modules[i].build_id);
    return xasprintf("cutrace %s, %zu modules, %016" PRIx64, CUTRACE_VERSION, l->nmodules, h);
}

int stacks_load(struct trace *t, struct symbolizer *sym, struct stack_set *out)
{
    memset(out, 0, sizeof(*out));
    struct loader l = {.t = t, .sym = sym, .out = out};
    l.strings = xcalloc(1, sizeof(struct strings));
    out->strings = l.strings;
    bool yes;
    if (present(t, &yes) != 0) {
        stacks_free(out);
        return -1;
    }
    if (!yes)
        return 0;
    out->present = true;
    int rc = load_config(&l);
    if (rc == 0)
        rc = load_modules(&l);
    if (rc == 0 && sym) {
        out->cache_key = cache_key(&l);
        symcache_load(&l.cache, t->path, out->cache_key);
    }
    if (rc == 0)
        rc = load_frames(&l);
    symcache_free(&l.cache);
    free(l.modules);
    if (rc != 0) {
        stacks_free(out); /* a damaged trace leaves nothing half loaded */
        return rc;
    }
    if (out->nstacks > 1)
        qsort(out->stacks, out->nstacks, sizeof(*out->stacks), compare_stacks);
    return 0;
}

void stacks_free(struct stack_set *s)
{
    for (size_t i = 0; i < s->nstacks; i++)
        free(s->stacks[i].frames);
    free(s->stacks);
    free(s->config);
    free(s->unnamed_example);
    free(s->cache_key);
    strings_free(s->strings);
    memset(s, 0, sizeof(*s));
}

const struct stack *stacks_by_id(const struct stack_set *s, int64_t id)
{
    size_t lo = 0, hi = s->nstacks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->stacks[mid].id == id)
            return &s->stacks[mid];
        if (s->stacks[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- words ---- */

static const char *base_name(const char *path)
{
    if (!path)
        return "";
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

/* The CUDA layers a site looks past: the call was made through them. */
static bool in_cuda_layer(const struct stack_frame *f)
{
    const char *name = base_name(f->module);
    return strncmp(name, "libcudart", 9) == 0 || strncmp(name, "libcuda.so", 10) == 0 ||
           strncmp(name, "libcutrace", 10) == 0;
}

char *stack_frame_text(const struct stack_frame *f)
{
    if (f->kind == STACK_PYTHON) {
        if (f->line > 0)
            return xasprintf("%s:%" PRId64 " %s", base_name(f->file), f->line,
                             f->symbol ? f->symbol : "?");
        return xasprintf("%s %s", base_name(f->file), f->symbol ? f->symbol : "?");
    }
    if (f->symbol)
        return xasprintf("%s+0x%" PRIx64 " (%s)", f->symbol, f->symbol_offset,
                         base_name(f->module));
    if (f->module)
        return xasprintf("%s+0x%" PRIx64, base_name(f->module), f->offset);
    return xasprintf("0x%" PRIx64, f->ip);
}

char *stack_frame_folded(const struct stack_frame *f)
{
    char *text;
    if (f->kind == STACK_PYTHON)
        text = f->line > 0 ? xasprintf("%s (%s:%" PRId64 ")", f->symbol ? f->symbol : "?",
                                       base_name(f->file), f->line)
                           : xasprintf("%s (%s)", f->symbol ? f->symbol : "?", base_name(f->file));
    else if (f->symbol)
        text = xstrdup(f->symbol);
    else if (f->module)
        text = xasprintf("%s+0x%" PRIx64, base_name(f->module), f->offset);
    else
        text = xasprintf("0x%" PRIx64, f->ip);
    for (char *c = text; *c; c++)
        if (*c == ';' || (unsigned char)*c < 0x20 || *c == 0x7f)
            *c = *c == ';' ? ':' : '?';
    return text;
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/*
 * Glue between Python and C: the frames every call from Python passes
 * through, which say nothing about who made it. libffi and ctypes' module
 * (a ctypes call), the interpreter's call machinery in libpython3*.so or in
 * a python3* executable (a statically linked interpreter).
 */
static bool is_python_glue(const struct stack_frame *f)
{
    if (!f->module)
        return false;
    const char *name = base_name(f->module);
    bool so = strstr(name, ".so") != NULL;
    return starts_with(name, "libffi.so") || (starts_with(name, "_ctypes") && so) ||
           (starts_with(name, "libpython3") && so) || (starts_with(name, "python3") && !so);
}

/*
 * Glue too: the C library, where every process and thread starts
 * (__libc_start_main, start_thread, clone3). Without this the site of a
 * Python process whose Python frames were not read would be
 * __libc_start_call_main; a program's own frames, callbacks from the C
 * library included, are always inner to these.
 */
static bool is_glue(const struct stack_frame *f)
{
    if (!f->module)
        return false;
    const char *name = base_name(f->module);
    return is_python_glue(f) || starts_with(name, "libc.so") || starts_with(name, "libc-2.") ||
           starts_with(name, "libpthread") || starts_with(name, "ld-linux");
}

/* PyTorch's dispatch: passed over only below a Python frame, so that a C++
 * program's own c10::cuda::CUDACachingAllocator frames stay sites. */
static bool is_torch_dispatch(const struct stack_frame *f)
{
    const char *name = base_name(f->module);
    return f->module && (starts_with(name, "libc10") || starts_with(name, "libtorch"));
}

/* The meta 'stacks' word that says how Python frames were read ("python=off"),
 * else all of it, for a note. */
static char *python_setting(const char *config)
{
    if (!config)
        return xstrdup("the trace does not say how (no meta 'stacks')");
    for (const char *p = config; (p = strstr(p, "python=")) != NULL; p++)
        if (p == config || p[-1] == ' ')
            return xstrndup(p, strcspn(p, " "));
    return xstrdup(config);
}

static char *unnamed_note(const struct stack_frame *f)
{
    if (f->kind != STACK_NATIVE || f->symbol)
        return NULL;
    return xasprintf("not named: %s", f->unnamed ? f->unnamed : "unknown why");
}

static char *native_site(const struct stack_frame *f)
{
    if (f->symbol)
        return xasprintf("%s (%s)", f->symbol, base_name(f->module));
    if (f->module)
        return xasprintf("%s+0x%" PRIx64, base_name(f->module), f->offset);
    return xasprintf("0x%" PRIx64, f->ip);
}

char *stacks_site(const struct stack *st, const char *api, enum site_kind *kind, char **note)
{
    *kind = SITE_NONE;
    if (note)
        *note = NULL;
    if (!st || st->nframes == 0)
        return NULL;
    /* The innermost Python frame that is not a wrapper named like the API. */
    const struct stack_frame *best = NULL;
    bool python = false;
    for (size_t i = 0; i < st->nframes && !best; i++) {
        const struct stack_frame *f = &st->frames[i];
        python |= f->kind == STACK_PYTHON;
        if (f->kind == STACK_PYTHON && !(api && f->symbol && strcmp(f->symbol, api) == 0))
            best = f;
    }
    if (best) {
        *kind = SITE_PYTHON;
        if (best->line > 0)
            return xasprintf("%s:%" PRId64 " %s", base_name(best->file), best->line,
                             best->symbol ? best->symbol : "?");
        return xasprintf("%s %s", base_name(best->file), best->symbol ? best->symbol : "?");
    }
    /* The innermost native frame of the program's own code; failing that,
     * the innermost one outside the CUDA layers (glue, or PyTorch's
     * dispatch below a Python wrapper named like the API). */
    const struct stack_frame *site = NULL, *fallback = NULL;
    bool interpreter = false; /* glue of Python's among the frames passed over */
    for (size_t i = 0; i < st->nframes && !site; i++) {
        const struct stack_frame *f = &st->frames[i];
        if (f->kind != STACK_NATIVE || in_cuda_layer(f))
            continue;
        if (!fallback)
            fallback = f;
        interpreter |= is_python_glue(f);
        if (!is_glue(f) && !(python && is_torch_dispatch(f)))
            site = f;
    }
    if (!site && !fallback)
        return NULL;
    *kind = SITE_NATIVE;
    const struct stack_frame *f = site ? site : fallback;
    if (note) {
        char *unnamed = unnamed_note(f);
        if (!site && interpreter && !python) {
            char *how = python_setting(st->config);
            *note = xasprintf("only the interpreter's own frames: its Python frames were not"
                              " read: %s%s%s",
                              how, unnamed ? "; " : "", unnamed ? unnamed : "");
            free(how);
            free(unnamed);
        } else {
            *note = unnamed;
        }
    }
    return native_site(f);
}

char *stacks_call_site(const struct stack_set *s, int64_t stack_id, const char *api,
                       enum site_kind *kind, char **note)
{
    return stacks_site(stacks_by_id(s, stack_id), api, kind, note);
}

const struct stack_frame *stacks_find_python(const struct stack *st, const char *const *names,
                                             size_t nnames)
{
    if (!st)
        return NULL;
    for (size_t i = 0; i < st->nframes; i++) {
        const struct stack_frame *f = &st->frames[i];
        if (f->kind != STACK_PYTHON || !f->symbol)
            continue;
        for (size_t k = 0; k < nnames; k++)
            if (strcmp(f->symbol, names[k]) == 0)
                return f;
    }
    return NULL;
}

void stacks_json_frames(struct json_writer *w, const struct stack *st)
{
    json_array_begin(w);
    for (size_t i = 0; st && i < st->nframes; i++) {
        const struct stack_frame *f = &st->frames[i];
        json_object_begin(w);
        json_kv_string(w, "kind", f->kind == STACK_PYTHON ? "python" : "native");
        json_kv_string(w, "symbol", f->symbol);
        if (f->kind == STACK_PYTHON) {
            json_kv_string(w, "file", f->file);
            if (f->line > 0)
                json_kv_int(w, "line", f->line);
            else
                json_kv_null(w, "line");
        } else {
            json_kv_string(w, "module", f->module);
            if (f->module)
                json_kv_uint(w, "offset", f->offset);
            else
                json_kv_null(w, "offset");
            json_kv_address(w, "ip", f->ip); /* addresses are "0x..." strings in every report */
        }
        json_object_end(w);
    }
    json_array_end(w);
}

void stacks_python_frames(struct trace *t, int64_t seq, stacks_python_visit visit, void *ctx)
{
    bool yes = false;
    char saved[sizeof(t->error)];
    memcpy(saved, t->error, sizeof(saved));
    if (present(t, &yes) != 0 || !yes) {
        memcpy(t->error, saved, sizeof(saved)); /* not this report's problem */
        return;
    }
    int64_t stack_id = 0;
    for (int hop = 0; hop < MAX_PARENT_HOPS && seq > 0 && stack_id <= 0; hop++) {
        sqlite3_stmt *q =
            trace_query(t, "SELECT parent_seq, stack_id FROM calls WHERE seq = ?", "i", seq);
        if (!q)
            break;
        int64_t parent = 0;
        if (trace_step(t, q) == 1) {
            parent = col_int(q, 0, 0);
            stack_id = col_int(q, 1, 0);
        }
        sqlite3_finalize(q);
        seq = parent > 0 && parent < seq ? parent : 0;
    }
    sqlite3_stmt *q = stack_id > 0 ? trace_query(t,
                                                 "SELECT symbol, file, line FROM stacks"
                                                 " WHERE stack_id = ? AND kind = 'python'"
                                                 " ORDER BY depth",
                                                 "i", stack_id)
                                   : NULL;
    bool more = true;
    while (q && more && trace_step(t, q) == 1) {
        char *symbol = col_text(q, 0);
        char *file = col_text(q, 1);
        if (symbol)
            more = visit(ctx, symbol, file, col_int(q, 2, 0));
        free(symbol);
        free(file);
    }
    sqlite3_finalize(q);
    memcpy(t->error, saved, sizeof(saved));
}

struct function_search {
    const char *const *names;
    size_t nnames;
    char *found;
};

static bool find_function(void *ctx, const char *symbol, const char *file, int64_t line)
{
    struct function_search *s = ctx;
    for (size_t k = 0; k < s->nnames; k++)
        if (strcmp(symbol, s->names[k]) == 0) {
            s->found = line > 0 ? xasprintf("%s (%s:%" PRId64 ")", symbol, base_name(file), line)
                                : xasprintf("%s (%s)", symbol, base_name(file));
            return false;
        }
    return true;
}

char *stacks_python_function(struct trace *t, int64_t seq, const char *const *names, size_t nnames)
{
    struct function_search s = {names, nnames, NULL};
    stacks_python_frames(t, seq, find_function, &s);
    return s.found;
}

void stacks_store_symbols(const char *path, const struct stack_set *s)
{
    bool any = false;
    size_t n = 0, cap = 0;
    struct symcache_entry *names = NULL;
    for (size_t i = 0; i < s->nstacks; i++)
        for (size_t k = 0; k < s->stacks[i].nframes; k++) {
            const struct stack_frame *f = &s->stacks[i].frames[k];
            if (!f->named_now && !f->from_cache)
                continue;
            any |= f->named_now;
            names = xgrow(names, &cap, n + 1, sizeof(*names));
            /* The cache writes them before the set is freed: borrowed. */
            names[n++] = (struct symcache_entry){f->ip, (char *)f->symbol};
        }
    if (s->present && any && s->cache_key)
        symcache_write(path, s->cache_key, names, n);
    free(names);
}
