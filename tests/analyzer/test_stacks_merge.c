/*
 * test_stacks_merge.c - how analyzer/symbols/stacks.c puts a trace's Python frames
 * among its native ones, and which frame it names as a call's site
 * (docs/stacks.md, "Merging" and "Sites").
 *
 * Format 5 marks each Python frame that was the first one its eval-loop
 * invocation ran (entry): the frames split into runs at those markers and
 * each run takes the place of one _PyEval_EvalFrameDefault frame, exactly.
 * The stacks here are the shapes CPython makes: 3.10 (every frame an entry),
 * 3.11+ (one run per eval loop, Python -> C extension -> Python callback),
 * generators resumed from C or inlined into their consumer, and the depth
 * limit cutting either kind of frame. Format 4 and frames read through the
 * API (entry unknown) keep the guessed placement. Sites pass over the glue
 * between Python and C (libffi, ctypes, libpython, the python3 executable),
 * keep a C++ program's PyTorch frames, and say why a site stayed
 * module+0xOFFSET. Every trace is built with trace_fixture.h; the stack
 * loader is called in-process, `cutrace sites` once as a subprocess.
 */
#include "symbols/stacks.h"
#include "test_support.h"
#include "model/trace.h"
#include "trace_fixture.h"

#include "cutrace/format.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Suite *stacks_merge_suite(void); /* registered in test_main.c */

/* ---- modules: each a 1 MiB range; paths that exist nowhere, so that only
 * the trace's symbols table names frames ---- */

#define DIR_      "/nonexistent-cutrace-test"
#define M_CUTRACE 0x10000000
#define M_CUDART  0x10100000
#define M_FFI     0x10200000
#define M_CTYPES  0x10300000
#define M_LIBPY   0x10400000
#define M_EXE     0x10500000
#define M_EXT     0x10600000
#define M_C10     0x10700000
#define M_TORCH   0x10800000
#define M_PROG    0x10900000
#define M_PLUGIN  0x10a00000
#define M_LIBC    0x10b00000
#define M_REAL    0x20000000 /* this test binary, mapped at an offset no symbol covers */
#define MOD_SIZE  0x100000

#define STACKS_ON "native=libunwind python=on depth=32 on=memory"

static void add_modules(struct fixture *f)
{
    static const struct {
        const char *path;
        int64_t start;
    } modules[] = {
        {DIR_ "/lib/libcutrace.so", M_CUTRACE},
        {DIR_ "/cuda/lib64/libcudart.so.12", M_CUDART},
        {DIR_ "/lib/libffi.so.8", M_FFI},
        {DIR_ "/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so", M_CTYPES},
        {DIR_ "/lib/libpython3.11.so.1.0", M_LIBPY},
        {DIR_ "/bin/python3.11", M_EXE},
        {DIR_ "/site-packages/myext.cpython-311-x86_64-linux-gnu.so", M_EXT},
        {DIR_ "/site-packages/torch/lib/libc10_cuda.so", M_C10},
        {DIR_ "/site-packages/torch/lib/libtorch_cuda.so", M_TORCH},
        {DIR_ "/app/server", M_PROG},
        {DIR_ "/app/libplugin.so", M_PLUGIN},
        {DIR_ "/lib/x86_64-linux-gnu/libc.so.6", M_LIBC},
    };
    for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++)
        fixture_loaded_module(f, modules[i].path, NULL, modules[i].start,
                              modules[i].start + MOD_SIZE);
}

/* ---- frames ---- */

#define NAT(base, off, name)                                                                       \
    {                                                                                              \
        .python = 0, .ip = (base) + (off), .symbol = (name)                                        \
    }
#define EVAL(off) NAT(M_LIBPY, 0x5000 + (off), "_PyEval_EvalFrameDefault")
/* A Python frame as format 5 reads it: entry known, its instruction too. */
#define PY(fn, ln, ent)                                                                            \
    {                                                                                              \
        .python = 1, .symbol = (fn), .file = "/app/model.py", .line = (ln), .instr = 2 * (ln),     \
        .entry = (ent)                                                                             \
    }
/* A Python frame read through CPython's API (format 4, or 5 without the
 * private structures): neither is known. */
#define PYAPI(fn, ln)                                                                              \
    {                                                                                              \
        .python = 1, .symbol = (fn), .file = "/app/model.py", .line = (ln), .instr = FIXTURE_NULL, \
        .entry = FIXTURE_NULL                                                                      \
    }

/* What every stack below starts with: the tracer's hook and the runtime. */
#define HOOK NAT(M_CUTRACE, 0x100, "cudaMalloc"), NAT(M_CUDART, 0x200, "cudaMalloc")

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- one trace, loaded ---- */

struct loaded {
    char *dir, *path;
    struct trace t;
    struct symbolizer *sym;
    struct stack_set ss;
};

/* A trace with the modules and meta 'stacks' (NULL: none), open for stacks. */
static struct fixture *begin(struct loaded *l, const char *stacks_meta, int format4)
{
    memset(l, 0, sizeof(*l));
    l->dir = scratch_dir();
    l->path = fixture_trace_path(l->dir, "host", 4242, 1736071872345000000ll);
    struct fixture *f = fixture_create(l->path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 4242,
                                .ppid = 1,
                                .host = "host",
                                .cmdline = "python3 model.py",
                                .start_wall_ns = 1736071872345000000ll,
                                .start_mono_ns = 1000000000,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, "GPU-aaaaaaaa-0000-0000-0000-000000000000", "NVIDIA H100", 80ll << 30);
    if (format4)
        fixture_stacks_format4(f);
    if (stacks_meta)
        fixture_meta(f, "stacks", stacks_meta);
    add_modules(f);
    return f;
}

static void load(struct loaded *l, struct fixture *f)
{
    fixture_close(f);
    ck_assert_int_eq(trace_open(&l->t, l->path), 0);
    l->sym = symbolizer_new();
    ck_assert_msg(stacks_load(&l->t, l->sym, &l->ss) == 0, "%s", l->t.error);
    ck_assert(l->ss.present);
}

static void finish(struct loaded *l)
{
    stacks_free(&l->ss);
    symbolizer_free(l->sym);
    trace_close(&l->t);
    free(l->path);
    scratch_remove(l->dir);
}

/* A trace holding one stack (id 1), loaded. */
static const struct stack *one_stack(struct loaded *l, const struct fixture_frame *frames, size_t n,
                                     int format4)
{
    struct fixture *f = begin(l, STACKS_ON, format4);
    fixture_stack(f, 1, frames, n);
    load(l, f);
    const struct stack *st = stacks_by_id(&l->ss, 1);
    ck_assert_ptr_nonnull(st);
    return st;
}

/* The merged frames, innermost first, one word each: a Python frame as
 * "py:function", a native one as its name or module+0xOFFSET. */
static char *frames_text(const struct stack *st)
{
    size_t cap = 64, len = 0;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    out[0] = '\0';
    for (size_t i = 0; i < st->nframes; i++) {
        const struct stack_frame *fr = &st->frames[i];
        char word[256];
        if (fr->kind == STACK_PYTHON)
            snprintf(word, sizeof(word), "py:%s", fr->symbol ? fr->symbol : "?");
        else if (fr->symbol)
            snprintf(word, sizeof(word), "%s", fr->symbol);
        else
            snprintf(word, sizeof(word), "0x%" PRIx64, fr->ip);
        size_t wl = strlen(word);
        if (len + wl + 2 > cap) {
            cap = 2 * (len + wl + 2);
            out = realloc(out, cap);
            ck_assert_ptr_nonnull(out);
        }
        if (len)
            out[len++] = ' ';
        memcpy(out + len, word, wl + 1);
        len += wl;
    }
    return out;
}

static void assert_frames(const struct stack *st, const char *expected)
{
    char *got = frames_text(st);
    ck_assert_msg(strcmp(got, expected) == 0, "frames\n  got:      %s\n  expected: %s", got,
                  expected);
    free(got);
}

/* ---- merging ---- */

/* 3.10: every Python frame ran an eval loop of its own, all entries. With
 * the whole native stack that is one frame per loop, as always; with the
 * native stack cut by the depth limit the frames beyond the last loop in
 * view follow the native ones instead of piling into it. */
START_TEST(test_310_every_frame_entry)
{
    const struct fixture_frame whole[] = {
        HOOK,
        NAT(M_FFI, 0x10, "ffi_call"),
        NAT(M_CTYPES, 0x20, "PyCFuncPtr_call"),
        NAT(M_LIBPY, 0x30, "_PyObject_MakeTpCall"),
        EVAL(1),
        NAT(M_LIBPY, 0x40, "_PyFunction_Vectorcall"),
        EVAL(2),
        NAT(M_LIBPY, 0x41, "_PyFunction_Vectorcall"),
        EVAL(3),
        NAT(M_LIBPY, 0x50, "PyEval_EvalCode"),
        NAT(M_EXE, 0x60, "main"),
        PY("alloc", 12, 1),
        PY("load", 30, 1),
        PY("<module>", 40, 1),
    };
    struct loaded l;
    const struct stack *st = one_stack(&l, whole, COUNT(whole), 0);
    assert_frames(st, "cudaMalloc cudaMalloc ffi_call PyCFuncPtr_call _PyObject_MakeTpCall py:alloc"
                      " _PyFunction_Vectorcall py:load _PyFunction_Vectorcall py:<module>"
                      " PyEval_EvalCode main");
    ck_assert(!st->placement_guessed);
    ck_assert_uint_eq(st->nnative, 12);
    ck_assert_uint_eq(st->npython, 3);
    /* The format-5 values survive the load. */
    ck_assert_int_eq(st->frames[5].entry, 1);
    ck_assert_int_eq(st->frames[5].instr, 24);
    ck_assert_int_eq(st->frames[5].line, 12);
    finish(&l);

    const struct fixture_frame cut[] = {
        HOOK,
        NAT(M_LIBPY, 0x30, "_PyObject_MakeTpCall"),
        EVAL(1),
        NAT(M_LIBPY, 0x40, "_PyFunction_Vectorcall"),
        EVAL(2),
        PY("alloc", 12, 1),
        PY("load", 30, 1),
        PY("<module>", 40, 1),
    };
    st = one_stack(&l, cut, COUNT(cut), 0);
    assert_frames(st, "cudaMalloc cudaMalloc _PyObject_MakeTpCall py:alloc _PyFunction_Vectorcall"
                      " py:load py:<module>");
    ck_assert(!st->placement_guessed);
    finish(&l);
}
END_TEST

/* 3.11+: Python calls between Python functions stay in one eval loop; only
 * the outermost frame of the run is its entry. */
START_TEST(test_311_single_run)
{
    const struct fixture_frame frames[] = {
        HOOK,
        NAT(M_EXT, 0x10, "ext_alloc"),
        EVAL(1),
        NAT(M_LIBPY, 0x50, "PyEval_EvalCode"),
        NAT(M_EXE, 0x60, "main"),
        PY("alloc", 12, 0),
        PY("load", 30, 0),
        PY("<module>", 40, 1),
    };
    struct loaded l;
    const struct stack *st = one_stack(&l, frames, COUNT(frames), 0);
    assert_frames(st, "cudaMalloc cudaMalloc ext_alloc py:alloc py:load py:<module>"
                      " PyEval_EvalCode main");
    ck_assert(!st->placement_guessed);
    finish(&l);
}
END_TEST

/* Python -> C extension -> Python callback: two eval loops, two runs of
 * two frames; and three loops with runs of 2, 1 and 2 frames. Guessing
 * would give the inner loops one frame each. */
START_TEST(test_311_runs_across_c_frames)
{
    const struct fixture_frame two[] = {
        HOOK,
        NAT(M_EXT, 0x10, "ext_alloc"),
        EVAL(1),
        NAT(M_LIBPY, 0x70, "_PyObject_Call"),
        NAT(M_EXT, 0x20, "ext_apply"),
        EVAL(2),
        NAT(M_LIBPY, 0x50, "PyEval_EvalCode"),
        NAT(M_EXE, 0x60, "main"),
        PY("helper", 5, 0),
        PY("callback", 8, 1),
        PY("run", 20, 0),
        PY("<module>", 40, 1),
    };
    struct loaded l;
    const struct stack *st = one_stack(&l, two, COUNT(two), 0);
    assert_frames(st, "cudaMalloc cudaMalloc ext_alloc py:helper py:callback _PyObject_Call"
                      " ext_apply py:run py:<module> PyEval_EvalCode main");
    ck_assert(!st->placement_guessed);
    finish(&l);

    const struct fixture_frame three[] = {
        HOOK,
        NAT(M_EXT, 0x10, "ext_alloc"),
        EVAL(1),
        NAT(M_EXT, 0x20, "ext_apply"),
        EVAL(2),
        NAT(M_EXT, 0x21, "ext_apply"),
        EVAL(3),
        NAT(M_LIBPY, 0x50, "PyEval_EvalCode"),
        PY("a", 1, 0),
        PY("b", 2, 1),
        PY("c", 3, 1),
        PY("d", 4, 0),
        PY("<module>", 40, 1),
    };
    st = one_stack(&l, three, COUNT(three), 0);
    assert_frames(st, "cudaMalloc cudaMalloc ext_alloc py:a py:b ext_apply py:c ext_apply py:d"
                      " py:<module> PyEval_EvalCode");
    ck_assert(!st->placement_guessed);
    finish(&l);
}
END_TEST

/* The native stack cut by the depth limit (or not recorded): runs beyond
 * the eval loops in view follow the native frames, in order. */
START_TEST(test_more_runs_than_eval_loops)
{
    const struct fixture_frame cut[] = {
        HOOK,
        NAT(M_EXT, 0x10, "ext_alloc"),
        EVAL(1),
        NAT(M_LIBPY, 0x70, "_PyObject_Call"),
        NAT(M_EXT, 0x20, "ext_apply"),
        PY("helper", 5, 0),
        PY("callback", 8, 1),
        PY("run", 20, 0),
        PY("<module>", 40, 1),
    };
    struct loaded l;
    const struct stack *st = one_stack(&l, cut, COUNT(cut), 0);
    assert_frames(st, "cudaMalloc cudaMalloc ext_alloc py:helper py:callback _PyObject_Call"
                      " ext_apply py:run py:<module>");
    ck_assert(!st->placement_guessed);
    finish(&l);

    const struct fixture_frame python_only[] = {
        PY("helper", 5, 0),
        PY("callback", 8, 1),
        PY("<module>", 40, 1),
    };
    st = one_stack(&l, python_only, COUNT(python_only), 0);
    assert_frames(st, "py:helper py:callback py:<module>");
    ck_assert_uint_eq(st->nnative, 0);
    finish(&l);
}
END_TEST

/* The Python frames cut by the depth limit: the outer eval loops they do
 * not reach stay native frames; a last run cut before its entry frame
 * still belongs to the next loop. */
START_TEST(test_more_eval_loops_than_runs)
{
    const struct fixture_frame cut[] = {
        HOOK,          NAT(M_EXT, 0x10, "ext_alloc"),
        EVAL(1),       NAT(M_EXT, 0x20, "ext_apply"),
        EVAL(2),       NAT(M_EXT, 0x21, "ext_apply"),
        EVAL(3),       NAT(M_LIBPY, 0x50, "PyEval_EvalCode"),
        PY("a", 1, 0), PY("b", 2, 1),
        PY("c", 3, 1),
    };
    struct loaded l;
    const struct stack *st = one_stack(&l, cut, COUNT(cut), 0);
    assert_frames(st, "cudaMalloc cudaMalloc ext_alloc py:a py:b ext_apply py:c ext_apply"
                      " _PyEval_EvalFrameDefault PyEval_EvalCode");
    ck_assert(!st->placement_guessed);
    finish(&l);

    const struct fixture_frame cut_mid_run[] = {
        HOOK,          NAT(M_EXT, 0x10, "ext_alloc"),
        EVAL(1),       NAT(M_EXT, 0x20, "ext_apply"),
        EVAL(2),       NAT(M_EXT, 0x21, "ext_apply"),
        EVAL(3),       PY("a", 1, 1),
        PY("b", 2, 0), PY("c", 3, 0),
    };
    st = one_stack(&l, cut_mid_run, COUNT(cut_mid_run), 0);
    assert_frames(st, "cudaMalloc cudaMalloc ext_alloc py:a ext_apply py:b py:c ext_apply"
                      " _PyEval_EvalFrameDefault");
    finish(&l);
}
END_TEST

/* Generators: resumed from C (next(), 3.11's FOR_ITER) a generator's frame
 * is the entry of an eval loop of its own; inlined into its consumer's loop
 * (3.12's FOR_ITER_GEN) it is not. */
START_TEST(test_generators)
{
    const struct fixture_frame resumed[] = {
        HOOK,
        NAT(M_EXT, 0x10, "ext_alloc"),
        EVAL(1),
        NAT(M_LIBPY, 0x80, "gen_send_ex2"),
        NAT(M_LIBPY, 0x81, "builtin_next"),
        EVAL(2),
        NAT(M_LIBPY, 0x50, "PyEval_EvalCode"),
        PY("produce", 3, 1),
        PY("consume", 9, 0),
        PY("<module>", 40, 1),
    };
    struct loaded l;
    const struct stack *st = one_stack(&l, resumed, COUNT(resumed), 0);
    assert_frames(st, "cudaMalloc cudaMalloc ext_alloc py:produce gen_send_ex2 builtin_next"
                      " py:consume py:<module> PyEval_EvalCode");
    finish(&l);

    const struct fixture_frame inlined[] = {
        HOOK,
        NAT(M_EXT, 0x10, "ext_alloc"),
        EVAL(1),
        NAT(M_LIBPY, 0x70, "_PyObject_Call"),
        NAT(M_EXT, 0x20, "ext_apply"),
        EVAL(2),
        NAT(M_LIBPY, 0x50, "PyEval_EvalCode"),
        PY("produce", 3, 0),
        PY("consume", 9, 1),
        PY("<module>", 40, 1),
    };
    st = one_stack(&l, inlined, COUNT(inlined), 0);
    assert_frames(st, "cudaMalloc cudaMalloc ext_alloc py:produce py:consume _PyObject_Call"
                      " ext_apply py:<module> PyEval_EvalCode");
    ck_assert(!st->placement_guessed);
    finish(&l);
}
END_TEST

/* The stack of test_311_runs_across_c_frames without entry markers: */
static const struct fixture_frame guessed_natives[] = {
    HOOK,
    NAT(M_EXT, 0x10, "ext_alloc"),
    EVAL(1),
    NAT(M_LIBPY, 0x70, "_PyObject_Call"),
    NAT(M_EXT, 0x20, "ext_apply"),
    EVAL(2),
    NAT(M_LIBPY, 0x50, "PyEval_EvalCode"),
};
/* the inner loop gets one frame, the outermost the rest, flagged a guess. */
#define GUESSED                                                                                    \
    "cudaMalloc cudaMalloc ext_alloc py:helper _PyObject_Call ext_apply py:callback py:run"        \
    " py:<module> PyEval_EvalCode"

static const struct stack *guessed_stack(struct loaded *l, const struct fixture_frame *py, int fmt4)
{
    struct fixture_frame frames[COUNT(guessed_natives) + 4];
    memcpy(frames, guessed_natives, sizeof(guessed_natives));
    memcpy(frames + COUNT(guessed_natives), py, 4 * sizeof(*py));
    return one_stack(l, frames, COUNT(frames), fmt4);
}

/* Format 4, and format 5 frames read through the API: today's placement. */
START_TEST(test_unknown_entry_keeps_the_guess)
{
    const struct fixture_frame api[] = {
        PYAPI("helper", 5),
        PYAPI("callback", 8),
        PYAPI("run", 20),
        PYAPI("<module>", 40),
    };
    struct loaded l;
    const struct stack *st = guessed_stack(&l, api, 1);
    ck_assert_int_eq(l.t.format_version, 4);
    assert_frames(st, GUESSED);
    ck_assert(st->placement_guessed);
    ck_assert_int_eq(st->frames[3].entry, -1);
    ck_assert_int_eq(st->frames[3].instr, -1);
    ck_assert_int_eq(st->frames[3].line, 5);
    finish(&l);

    st = guessed_stack(&l, api, 0);
    ck_assert_int_eq(l.t.format_version, CT_FORMAT_VERSION);
    assert_frames(st, GUESSED);
    ck_assert(st->placement_guessed);
    finish(&l);

    /* One frame of unknown entry and the markers cannot say where runs end. */
    const struct fixture_frame mixed[] = {
        PY("helper", 5, 0),
        PY("callback", 8, 1),
        PYAPI("run", 20),
        PY("<module>", 40, 1),
    };
    st = guessed_stack(&l, mixed, 0);
    assert_frames(st, GUESSED);
    ck_assert(st->placement_guessed);
    finish(&l);
}
END_TEST

/* Trace contents are untrusted: any entry or instr value, NULLs, text. */
START_TEST(test_hostile_entry_and_instr)
{
    const int64_t bad[] = {2, -1, 7, INT64_MAX, INT64_MIN + 1};
    for (size_t i = 0; i < COUNT(bad); i++) {
        const struct fixture_frame frames[] = {
            PY("helper", 5, 0),
            PY("callback", 8, bad[i]),
            PY("run", 20, 0),
            PY("<module>", 40, 1),
        };
        struct loaded l;
        const struct stack *st = guessed_stack(&l, frames, 0);
        assert_frames(st, GUESSED); /* a value that is no marker: unknown */
        ck_assert_int_eq(st->frames[6].entry, -1);
        finish(&l);
    }
    /* Text where integers belong, negative and huge offsets, a stack of
     * Python frames without natives, and markers on native rows. */
    struct loaded l;
    struct fixture *f = begin(&l, NULL, 0);
    const struct fixture_frame frames[] = {
        HOOK,
        EVAL(1),
        PY("a", 1, 1),
        PY("b", 2, 1),
    };
    fixture_stack(f, 1, frames, COUNT(frames));
    fixture_stack(f, 2, frames + 3, 2);
    fixture_exec(f, "UPDATE stack_frames SET entry = 'one', instr = 'x' WHERE stack_id = 1"
                    " AND depth = 3;"
                    "UPDATE stack_frames SET instr = -5 WHERE stack_id = 2 AND depth = 0;"
                    "UPDATE stack_frames SET instr = 9223372036854775807, entry = x'01'"
                    " WHERE stack_id = 2 AND depth = 1;"
                    "UPDATE stack_frames SET entry = 1, instr = 3 WHERE kind = 0;");
    load(&l, f);
    const struct stack *st = stacks_by_id(&l.ss, 1);
    ck_assert_ptr_nonnull(st);
    /* 'one' is text: unknown, so the one eval loop takes both (the guess). */
    assert_frames(st, "cudaMalloc cudaMalloc py:a py:b");
    ck_assert_int_eq(st->frames[2].instr, -1);
    ck_assert_int_eq(st->frames[2].entry, -1);
    ck_assert_int_eq(st->frames[3].entry, 1);
    st = stacks_by_id(&l.ss, 2);
    ck_assert_ptr_nonnull(st);
    assert_frames(st, "py:a py:b");
    ck_assert_int_eq(st->frames[0].instr, -1);
    ck_assert_int_eq(st->frames[1].entry, -1);
    finish(&l);
}
END_TEST

/* A frame whose line the writer could not take from its line table (the
 * table came later) gets it from py_linetables; one with a line keeps it;
 * a garbage table gives no line, never a crash. */
START_TEST(test_line_from_line_table)
{
    struct loaded l;
    struct fixture *f = begin(&l, STACKS_ON, 0);
    const struct fixture_frame frames[] = {
        HOOK,
        EVAL(1),
        {.python = 1,
         .symbol = "alloc",
         .file = "/app/model.py",
         .line = 0,
         .instr = 8,
         .entry = 0},
        {.python = 1,
         .symbol = "load",
         .file = "/app/model.py",
         .line = 33,
         .instr = 0,
         .entry = 0},
        {.python = 1, .symbol = "junk", .file = "/app/model.py", .line = 0, .instr = 4, .entry = 1},
    };
    fixture_stack(f, 1, frames, COUNT(frames));
    /* 3.10's format: (bytes, line delta) pairs from the first line, 10:
     * offsets [0, 6) line 10, [6, 14) line 12. */
    static const uint8_t table[] = {6, 0, 8, 2};
    fixture_linetable(f, fixture_py_code(f, "alloc", "/app/model.py"), CT_PYLINES_310, 10, table,
                      sizeof(table));
    fixture_linetable(f, fixture_py_code(f, "load", "/app/model.py"), CT_PYLINES_310, 10, table,
                      sizeof(table));
    static const uint8_t garbage[] = {0xff, 0xff, 0xc0, 0x7f, 0x80};
    fixture_linetable(f, fixture_py_code(f, "junk", "/app/model.py"), 311, -5, garbage,
                      sizeof(garbage));
    load(&l, f);
    const struct stack *st = stacks_by_id(&l.ss, 1);
    ck_assert_ptr_nonnull(st);
    assert_frames(st, "cudaMalloc cudaMalloc py:alloc py:load py:junk");
    ck_assert_int_eq(st->frames[2].line, 12);
    ck_assert_int_eq(st->frames[3].line, 33);
    ck_assert_int_ge(st->frames[4].line, 0);
    enum site_kind kind;
    char *note;
    char *site = stacks_site(st, "cudaMalloc", &kind, &note);
    ck_assert_str_eq(site, "model.py:12 alloc");
    ck_assert_int_eq(kind, SITE_PYTHON);
    ck_assert_ptr_null(note);
    free(site);
    finish(&l);
}
END_TEST

/* ---- sites ---- */

/* The site and note of stack id in l, which must be native. */
static void assert_site(const struct loaded *l, int64_t id, const char *site, const char *note)
{
    enum site_kind kind;
    char *why;
    char *got = stacks_site(stacks_by_id(&l->ss, id), "cudaMalloc", &kind, &why);
    ck_assert_msg(got && strcmp(got, site) == 0, "stack %" PRId64 ": site %s, expected %s", id,
                  got ? got : "NULL", site);
    ck_assert_int_eq(kind, SITE_NATIVE);
    if (note)
        ck_assert_msg(why && strstr(why, note), "stack %" PRId64 ": note %s, expected %s", id,
                      why ? why : "NULL", note);
    else
        ck_assert_msg(!why, "stack %" PRId64 ": unexpected note %s", id, why);
    free(got);
    free(why);
}

/* Without Python frames, the frames a call from Python passes through are
 * glue, not sites: libffi, ctypes, libpython, the python3 executable, and
 * the C library where processes and threads start. The C extension (or
 * program) beyond them is the site. */
START_TEST(test_site_passes_over_glue)
{
    struct loaded l;
    struct fixture *f = begin(&l, STACKS_ON, 0);
    const struct fixture_frame ext[] = {
        HOOK,
        NAT(M_FFI, 0x10, "ffi_call_unix64"),
        NAT(M_FFI, 0x11, "ffi_call"),
        NAT(M_CTYPES, 0x20, "_ctypes_callproc"),
        NAT(M_LIBPY, 0x30, "_PyObject_MakeTpCall"),
        EVAL(1),
        NAT(M_EXE, 0x40, "PyObject_Call"),
        NAT(M_EXT, 0x50, "ext_run_callback"),
        EVAL(2),
        NAT(M_EXE, 0x60, "main"),
    };
    fixture_stack(f, 1, ext, COUNT(ext));
    /* A C++ program's PyTorch allocator, no Python: its frames are the site. */
    const struct fixture_frame cxx[] = {
        HOOK,
        NAT(M_C10, 0x10, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"),
        NAT(M_TORCH, 0x20, "at::native::empty_cuda"),
        NAT(M_PROG, 0x30, "load_weights"),
        NAT(M_LIBC, 0x80, "start_thread"),
        NAT(M_LIBC, 0x81, "clone3"),
    };
    fixture_stack(f, 2, cxx, COUNT(cxx));
    /* A C program's callback run by the C library: the callback, inner. */
    const struct fixture_frame callback[] = {
        HOOK,
        NAT(M_PROG, 0x40, "on_exit_release"),
        NAT(M_LIBC, 0x90, "__run_exit_handlers"),
        NAT(M_LIBC, 0x91, "exit"),
    };
    fixture_stack(f, 5, callback, COUNT(callback));
    /* Only C library frames, no interpreter: its innermost, without the
     * interpreter's note. */
    const struct fixture_frame libc_only[] = {HOOK, NAT(M_LIBC, 0x90, "__run_exit_handlers")};
    fixture_stack(f, 6, libc_only, COUNT(libc_only));
    /* The same under a Python frame: the Python frame is the site. */
    const struct fixture_frame py[] = {
        HOOK,
        NAT(M_C10, 0x10, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"),
        NAT(M_TORCH, 0x20, "at::native::empty_cuda"),
        EVAL(1),
        PY("forward", 77, 1),
    };
    fixture_stack(f, 3, py, COUNT(py));
    /* Under a Python wrapper named like the API, PyTorch's dispatch is
     * passed over too: the program that called it is the site. */
    const struct fixture_frame wrapped[] = {
        HOOK,
        NAT(M_C10, 0x10, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"),
        NAT(M_TORCH, 0x20, "at::native::empty_cuda"),
        NAT(M_PLUGIN, 0x30, "plugin_alloc"),
        EVAL(1),
        PY("cudaMalloc", 3, 1),
    };
    fixture_stack(f, 4, wrapped, COUNT(wrapped));
    load(&l, f);

    assert_site(&l, 1, "ext_run_callback (myext.cpython-311-x86_64-linux-gnu.so)", NULL);
    assert_site(&l, 2,
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"
                " (libc10_cuda.so)",
                NULL);
    enum site_kind kind;
    char *note;
    char *site = stacks_call_site(&l.ss, 0, "cudaMalloc", &kind, &note); /* no such call */
    ck_assert_ptr_null(site);
    ck_assert_ptr_null(note);
    ck_assert_int_eq(kind, SITE_NONE);
    site = stacks_site(stacks_by_id(&l.ss, 3), "cudaMalloc", &kind, &note);
    ck_assert_str_eq(site, "model.py:77 forward");
    ck_assert_int_eq(kind, SITE_PYTHON);
    ck_assert_ptr_null(note);
    free(site);
    assert_site(&l, 4, "plugin_alloc (libplugin.so)", NULL);
    assert_site(&l, 5, "on_exit_release (server)", NULL);
    assert_site(&l, 6, "__run_exit_handlers (libc.so.6)", NULL);
    /* NULL for the note is fine. */
    site = stacks_site(stacks_by_id(&l.ss, 1), NULL, &kind, NULL);
    ck_assert_str_eq(site, "ext_run_callback (myext.cpython-311-x86_64-linux-gnu.so)");
    free(site);
    finish(&l);
}
END_TEST

/* Only glue (a Python process whose Python frames were not read): the
 * innermost glue frame, and a note saying why there is nothing better. */
START_TEST(test_site_only_glue)
{
    static const char *const metas[] = {"native=libunwind python=off depth=32 on=memory", STACKS_ON,
                                        NULL};
    static const char *const says[] = {": python=off", ": python=on",
                                       ": the trace does not say how (no meta 'stacks')"};
    for (size_t i = 0; i < COUNT(metas); i++) {
        struct loaded l;
        struct fixture *f = begin(&l, metas[i], 0);
        const struct fixture_frame ctypes[] = {
            HOOK,
            NAT(M_FFI, 0x10, "ffi_call_unix64"),
            NAT(M_CTYPES, 0x20, "_ctypes_callproc"),
            NAT(M_LIBPY, 0x30, "_PyObject_MakeTpCall"),
            EVAL(1),
            NAT(M_EXE, 0x60, "main"),
            NAT(M_LIBC, 0x70, "__libc_start_call_main"),
            NAT(M_LIBC, 0x71, "__libc_start_main"),
            NAT(M_EXE, 0x10, "_start"),
        };
        fixture_stack(f, 1, ctypes, COUNT(ctypes));
        /* The same, unnamed: the note says that too. */
        const struct fixture_frame unnamed[] = {
            HOOK,
            NAT(M_FFI, 0x6f7a, NULL),
            NAT(M_LIBPY, 0x30, NULL),
        };
        fixture_stack(f, 2, unnamed, COUNT(unnamed));
        load(&l, f);
        char expected[256];
        snprintf(expected, sizeof(expected),
                 "only the interpreter's own frames: its Python frames were not read%s", says[i]);
        assert_site(&l, 1, "ffi_call_unix64 (libffi.so.8)", expected);
        assert_site(&l, 2, "libffi.so.8+0x6f7a", expected);
        assert_site(&l, 2, "libffi.so.8+0x6f7a", "; not named: libffi.so.8: No such file");
        finish(&l);
    }
}
END_TEST

/* A site that stays module+0xOFFSET (or an address) says why. */
START_TEST(test_site_unnamed_note)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';
    struct loaded l;
    struct fixture *f = begin(&l, STACKS_ON, 0);
    fixture_loaded_module(f, self, NULL, M_REAL, M_REAL + 0x100000000ll);
    const struct fixture_frame missing[] = {HOOK, NAT(M_PLUGIN, 0x1234, NULL),
                                            NAT(M_PROG, 0x10, "main")};
    fixture_stack(f, 1, missing, COUNT(missing));
    const struct fixture_frame nowhere[] = {HOOK, NAT(0x7ff000000000ll, 0x10, NULL)};
    fixture_stack(f, 2, nowhere, COUNT(nowhere));
    const struct fixture_frame no_symbol[] = {HOOK, NAT(M_REAL, 0xfffffff0ll, NULL)};
    fixture_stack(f, 3, no_symbol, COUNT(no_symbol));
    const struct fixture_frame named[] = {HOOK, NAT(M_PLUGIN, 0x1300, "plugin_alloc")};
    fixture_stack(f, 4, named, COUNT(named));
    load(&l, f);
    assert_site(&l, 1, "libplugin.so+0x1234", "not named: libplugin.so: No such file or directory");
    assert_site(&l, 2, "0x7ff000000010",
                "not named: the address is in no module the trace recorded");
    char expected[4200];
    const char *base = strrchr(self, '/');
    snprintf(expected, sizeof(expected), "not named: %s: no function symbol at this address",
             base ? base + 1 : self);
    char site[4200];
    snprintf(site, sizeof(site), "%s+0xfffffff0", base ? base + 1 : self);
    assert_site(&l, 3, site, expected);
    assert_site(&l, 4, "plugin_alloc (libplugin.so)", NULL);
    finish(&l);
}
END_TEST

/* `cutrace sites`: the notes in text (once per site) and in JSON (per site). */
START_TEST(test_sites_report_notes)
{
    struct loaded l;
    struct fixture *f = begin(&l, "native=libunwind python=off depth=32 on=memory", 0);
    const struct fixture_frame glue[] = {HOOK, NAT(M_FFI, 0x6f7a, NULL), EVAL(1)};
    fixture_stack(f, 1, glue, COUNT(glue));
    const struct fixture_frame named[] = {HOOK, NAT(M_PROG, 0x30, "load_weights")};
    fixture_stack(f, 2, named, COUNT(named));
    fixture_call_stack(f, fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 << 20, 0), 1);
    fixture_call_stack(f, fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000200000, 4 << 20, 0), 2);
    fixture_call_stack(f, fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000800000, 1 << 20, 0), 1);
    fixture_close(f);

    const char *text_args[] = {"sites", l.dir, NULL};
    struct proc_result r = run_cutrace(text_args, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    char *text = squeeze(r.out);
    assert_contains(text, "4.00 MiB 66.7% 1 load_weights (server)");
    assert_contains(text, "2.00 MiB 33.3% 2 libffi.so.8+0x6f7a");
    assert_contains(text, "note: libffi.so.8+0x6f7a: only the interpreter's own frames: its Python"
                          " frames were not read: python=off; not named: libffi.so.8: No such"
                          " file or directory");
    const char *first = strstr(text, "note: libffi.so.8+0x6f7a");
    ck_assert_ptr_null(strstr(first + 1, "note: libffi.so.8+0x6f7a"));
    ck_assert_ptr_null(strstr(text, "note: load_weights"));
    free(text);
    proc_result_free(&r);

    const char *json_args[] = {"sites", "--json", l.dir, NULL};
    r = run_cutrace(json_args, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert(json_valid(r.out));
    char *json = compact(r.out);
    assert_contains(json, "\"note\":\"only the interpreter's own frames: its Python frames were"
                          " not read: python=off; not named: libffi.so.8: No such file or"
                          " directory\"}");
    /* A named site has no note: null, after its stack. */
    const char *named_site = strstr(json, "\"site\":\"load_weights (server)\"");
    ck_assert_ptr_nonnull(named_site);
    const char *its_note = strstr(named_site, "\"note\":");
    ck_assert_ptr_nonnull(its_note);
    ck_assert_msg(strncmp(its_note, "\"note\":null}", 12) == 0, "%.200s", its_note);
    free(json);
    proc_result_free(&r);
    free(l.path);
    scratch_remove(l.dir);
}
END_TEST

Suite *stacks_merge_suite(void)
{
    Suite *s = suite_create("stacks_merge");
    TCase *tc = tcase_create("merge");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_310_every_frame_entry);
    tcase_add_test(tc, test_311_single_run);
    tcase_add_test(tc, test_311_runs_across_c_frames);
    tcase_add_test(tc, test_more_runs_than_eval_loops);
    tcase_add_test(tc, test_more_eval_loops_than_runs);
    tcase_add_test(tc, test_generators);
    tcase_add_test(tc, test_unknown_entry_keeps_the_guess);
    tcase_add_test(tc, test_hostile_entry_and_instr);
    tcase_add_test(tc, test_line_from_line_table);
    suite_add_tcase(s, tc);
    tc = tcase_create("sites");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_site_passes_over_glue);
    tcase_add_test(tc, test_site_only_glue);
    tcase_add_test(tc, test_site_unnamed_note);
    tcase_add_test(tc, test_sites_report_notes);
    suite_add_tcase(s, tc);
    return s;
}
