/*
 * test_diff.c - `cutrace diff` on synthetic runs whose every number is
 * known: a tensor-parallel job written rank by rank (NCCL init with its
 * buffers, optionally a custom all-reduce whose buffers every peer maps,
 * the pre-load measurement, the weights, the post-load measurement, graph
 * capture, eager collectives), twice, with whatever differs between two
 * runs of one program (pids, pointers, clocks, unique ids, uuids, trace
 * directories) changed on purpose. The diff must name exactly what was
 * changed and nothing else: pairing by rank, the aligned milestones and the
 * first divergence, the allocation groups by phase, IPC lineage,
 * collectives, the budget delta (against `cutrace budget` of each run),
 * command line and environment; and say clearly what it cannot compare
 * (different rank counts, a killed rank, a missing trace) or cannot read.
 * The JSON is read with SQLite's json_extract, by the documented paths.
 */
#include "cli.h"
#include "analysis/diff_analysis.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <dirent.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

Suite *diff_suite(void); /* registered in test_main.c */

#define TOTAL      (80 * GiB)
#define CONTEXT    (512 * MiB) /* used, never traced: the CUDA context */
#define NCCL_PEER  (10 * MiB)  /* NCCL's buffer per peer, made inside the init */
#define WEIGHT     (256 * MiB)
#define WEIGHTS    4 /* 1 GiB: the weight burst's minimum */
#define AR_DEFAULT (64 * MiB)

/* Modules of every rank's process (the same paths in both runs). */
#define EXE_START   0x400000ll
#define EXE_END     0x500000ll
#define NCCL_START  0x7f1000000000ll
#define NCCL_END    0x7f1001000000ll
#define TORCH_START 0x7f2000000000ll
#define TORCH_END   0x7f2001000000ll
#define IN_EXE      (EXE_START + 0x100)
#define IN_NCCL     (NCCL_START + 0x200)
#define IN_TORCH    (TORCH_START + 0x300)

/* One rank of one run. Fields marked "per run" are what differs between two
 * runs of the same program; the diff must never see them. */
struct rank_spec {
    int rank, nranks;      /* nranks 0: no NCCL at all */
    int64_t device;        /* the ordinal the process uses */
    char run;              /* per run: 'a' or 'b' (pids, pointers, clocks, hashes, uuids) */
    bool custom_ar;        /* buffers exported, every peer's mapped, before pre */
    int64_t ar_size;       /* AR_DEFAULT when 0 */
    int weights;           /* WEIGHTS when 0 */
    int captured, eager;   /* all-reduces captured into a graph, eager ones after */
    bool killed_after_pre; /* the trace stops at pre; the process was killed */
    bool same_uuid;        /* the uuid does not depend on the run (the same machine) */
    const char *cmdline;
    const char *env_name, *env_value; /* one more recorded variable */
};

static int64_t rank_pid(const struct rank_spec *s)
{
    return (s->run == 'a' ? 3000 : 7000) + s->rank * 7;
}

/* Writes the rank's trace into dir; returns the free bytes at pre. */
static int64_t write_rank(const char *dir, const struct rank_spec *s)
{
    const int64_t pid = rank_pid(s);
    const int64_t wall =
        NORMAL_START_WALL + (s->run == 'a' ? 0 : 86400ll * 1000000000) + s->rank * 1000000ll;
    const int64_t mono = (s->run == 'a' ? 5 : 900) * 1000000000ll + s->rank * 1000;
    const int64_t ptr =
        (s->run == 'a' ? 0x7e0000000000ll : 0x7a0000000000ll) + ((int64_t)s->rank << 36);
    const uint64_t hash = s->run == 'a' ? 0x1111222233334444ull : 0x9999aaaabbbbccccull;
    const int64_t ar = s->ar_size ? s->ar_size : AR_DEFAULT;
    const int weights = s->weights ? s->weights : WEIGHTS;
    char *path = fixture_trace_path(dir, s->run == 'a' ? "nodeA" : "nodeB", pid, wall);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .ppid = pid - 1,
                                .host = s->run == 'a' ? "nodeA" : "nodeB",
                                .cmdline = s->cmdline ? s->cmdline : "python3 -m server --tp 4",
                                .exe = "/opt/app/server",
                                .start_wall_ns = wall,
                                .start_mono_ns = mono,
                                .cuda_runtime_version = 12080,
                                .nccl_version = NCCL_VERSION};
    fixture_process(f, &p);
    fixture_set_clock(f, mono + 1000);
    char uuid[64];
    snprintf(uuid, sizeof(uuid), "GPU-%c%07d-0000-0000-0000-000000000000",
             s->same_uuid ? 'c' : s->run, s->rank);
    fixture_device(f, s->device, uuid, "NVIDIA H100 80GB HBM3", TOTAL);
    fixture_module(f, "/opt/app/server", EXE_START, EXE_END);
    fixture_module(f, "/usr/lib/libnccl.so.2", NCCL_START, NCCL_END);
    fixture_module(f, "/usr/lib/libtorch_cuda.so", TORCH_START, TORCH_END);
    fixture_env(f, "CUDA_HOME", "/usr/local/cuda");
    fixture_env(f, "HF_TOKEN_SECRET_KEY", "<redacted>");
    char cutrace_dir[64];
    snprintf(cutrace_dir, sizeof(cutrace_dir), "/tmp/run-%c/trace", s->run);
    fixture_env(f, "CUTRACE_DIR", cutrace_dir);
    if (s->env_name)
        fixture_env(f, s->env_name, s->env_value);

    const int64_t dev = s->device;
    fixture_call(f, CT_API_cudaSetDevice, dev, 0, 0, 0);
    int64_t free_bytes = TOTAL - CONTEXT;
    fixture_meminfo(f, dev, free_bytes, TOTAL);
    int64_t comm = 0x5550000 + (s->run == 'a' ? 0 : 0x1000) + s->rank;
    if (s->nranks) {
        struct fixture_nccl_init init = {.comm = comm,
                                         .nranks = s->nranks,
                                         .rank = s->rank,
                                         .hash = hash,
                                         .device = dev,
                                         .caller = IN_TORCH};
        int64_t seq = fixture_nccl_init(f, &init);
        for (int peer = 1; peer < s->nranks; peer++) {
            struct fixture_event e = {.api = CT_API_cuMemCreate,
                                      .parent_seq = seq,
                                      .depth = 1,
                                      .device = dev,
                                      .ptr = ptr + 0x100000000ll + peer,
                                      .size = NCCL_PEER,
                                      .caller = IN_NCCL,
                                      .dur_ns = 100,
                                      .arg = {0, 1}};
            fixture_event(f, &e);
            free_bytes -= NCCL_PEER;
        }
        struct fixture_nccl_call warm = {.api = CT_API_ncclAllReduce,
                                         .comm = comm,
                                         .count = 1,
                                         .datatype = NCCL_FLOAT32,
                                         .redop = 0,
                                         .peer = FIXTURE_NCCL_NONE,
                                         .bytes = 4,
                                         .device = dev,
                                         .dur_ns = 2000};
        fixture_nccl_call(f, &warm);
    }
    if (s->custom_ar) {
        struct fixture_event m = {.api = CT_API_cudaMalloc,
                                  .device = dev,
                                  .ptr = ptr + 0x200000000ll,
                                  .size = ar,
                                  .caller = IN_EXE,
                                  .dur_ns = 100};
        fixture_event(f, &m);
        unsigned char handle[64] = {0xc7, (unsigned char)s->run, (unsigned char)s->rank};
        struct fixture_event get = {.api = CT_API_cudaIpcGetMemHandle,
                                    .device = dev,
                                    .ptr = ptr + 0x200000000ll,
                                    .caller = IN_EXE,
                                    .dur_ns = 100,
                                    .handle = handle,
                                    .handle_len = sizeof(handle)};
        fixture_event(f, &get);
        free_bytes -= ar;
        for (int peer = 0; peer < s->nranks; peer++) {
            if (peer == s->rank)
                continue;
            unsigned char theirs[64] = {0xc7, (unsigned char)s->run, (unsigned char)peer};
            struct fixture_event open = {.api = CT_API_cudaIpcOpenMemHandle,
                                         .device = dev,
                                         .ptr = ptr + 0x300000000ll + ((int64_t)peer << 28),
                                         .flags = 1,
                                         .caller = IN_EXE,
                                         .dur_ns = 100,
                                         .handle = theirs,
                                         .handle_len = sizeof(theirs)};
            fixture_event(f, &open);
        }
    }
    int64_t pre_free = free_bytes;
    fixture_meminfo(f, dev, free_bytes, TOTAL);
    if (s->killed_after_pre) {
        fixture_meta(f, "end_state", "killed");
        fixture_close(f);
        free(path);
        return pre_free;
    }
    for (int i = 0; i < weights; i++) {
        struct fixture_event w = {.api = CT_API_cudaMalloc,
                                  .device = dev,
                                  .ptr = ptr + 0x400000000ll + i * WEIGHT,
                                  .size = WEIGHT,
                                  .caller = IN_TORCH,
                                  .dur_ns = 100};
        fixture_event(f, &w);
        free_bytes -= WEIGHT;
    }
    fixture_meminfo(f, dev, free_bytes, TOTAL);
    for (int i = 0; i < s->captured; i++) {
        fixture_call(f, CT_API_cudaStreamBeginCapture, dev, 0, 0, 0);
        struct fixture_nccl_call c = {.api = CT_API_ncclAllReduce,
                                      .comm = comm,
                                      .count = 1024,
                                      .datatype = NCCL_BFLOAT16,
                                      .redop = 0,
                                      .peer = FIXTURE_NCCL_NONE,
                                      .bytes = 2048,
                                      .captured = 1,
                                      .device = dev,
                                      .dur_ns = 2000};
        fixture_nccl_call(f, &c);
        fixture_call(f, CT_API_cudaStreamEndCapture, dev, 0, 0, 0);
    }
    for (int i = 0; i < s->eager; i++) {
        struct fixture_nccl_call c = {.api = CT_API_ncclAllReduce,
                                      .comm = comm,
                                      .count = 1024,
                                      .datatype = NCCL_BFLOAT16,
                                      .redop = 0,
                                      .peer = FIXTURE_NCCL_NONE,
                                      .bytes = 2048,
                                      .device = dev,
                                      .dur_ns = 2000};
        fixture_nccl_call(f, &c);
    }
    fixture_close(f);
    free(path);
    return pre_free;
}

/* A run of nranks ranks: each rank's spec from `base`, rank and device set.
 * With remap, rank r uses device nranks - 1 - r (CUDA_VISIBLE_DEVICES). */
static void write_run(const char *dir, struct rank_spec base, int nranks, bool remap)
{
    for (int r = 0; r < nranks; r++) {
        struct rank_spec s = base;
        s.rank = r;
        s.nranks = base.nranks ? nranks : 0;
        s.device = remap ? nranks - 1 - r : r;
        write_rank(dir, &s);
    }
}

static char *subdir(const char *root, const char *name)
{
    char *dir = cli_path_join(root, name);
    ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    return dir;
}

/* ---- running the command ---- */

static struct proc_result diff_run(const char *const *opts, const char *a, const char *b)
{
    const char *args[24] = {"diff"};
    size_t n = 1;
    for (; opts && *opts && n < 20; opts++)
        args[n++] = *opts;
    args[n++] = a;
    args[n++] = b;
    args[n] = NULL;
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(!r.signaled, "killed by signal %d; stderr:\n%.1500s", r.status - 128, r.err);
    return r;
}

/* `cutrace diff --json OPTS A B`: exit 0, nothing on stderr, valid JSON. */
static char *diff_json(const char *const *opts, const char *a, const char *b)
{
    const char *with_json[24] = {"--json"};
    size_t n = 1;
    for (; opts && *opts && n < 20; opts++)
        with_json[n++] = *opts;
    with_json[n] = NULL;
    struct proc_result r = diff_run(with_json, a, b);
    ck_assert_msg(r.status == 0, "exit %d; stderr:\n%.1500s", r.status, r.err);
    ck_assert_msg(r.err_len == 0, "stderr not empty:\n%.1500s", r.err);
    ck_assert_msg(json_valid(r.out), "invalid JSON:\n%.3000s", r.out);
    char *out = strdup(r.out);
    proc_result_free(&r);
    return out;
}

/* Text with every line break and run of blanks made one blank: sentences
 * wrapped at 120 columns read whole. Malloc'd. */
static char *flat(const char *text)
{
    char *out = malloc(strlen(text) + 1), *o = out;
    ck_assert_ptr_nonnull(out);
    for (const char *p = text; *p; p++) {
        bool blank = *p == ' ' || *p == '\n';
        if (blank && o > out && o[-1] == ' ')
            continue;
        *o++ = blank ? ' ' : *p;
    }
    *o = '\0';
    return out;
}

/* The text report: exit 0, lines of at most 120 columns. */
static char *diff_text(const char *const *opts, const char *a, const char *b)
{
    struct proc_result r = diff_run(opts, a, b);
    ck_assert_msg(r.status == 0, "exit %d; stderr:\n%.1500s", r.status, r.err);
    ck_assert_msg(r.err_len == 0, "stderr not empty:\n%.1500s", r.err);
    assert_width(r.out, 120);
    char *out = strdup(r.out);
    proc_result_free(&r);
    return out;
}

/* json_extract on a document, by path (printf-style). */
static sqlite3_stmt *jq(const char *json, const char *path)
{
    static sqlite3 *db;
    if (!db)
        ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    sqlite3_stmt *stmt;
    ck_assert_int_eq(
        sqlite3_prepare_v2(db, "SELECT json_type(?1, ?2), json_extract(?1, ?2)", -1, &stmt, NULL),
        SQLITE_OK);
    sqlite3_bind_text(stmt, 1, json, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, path, -1, SQLITE_TRANSIENT);
    ck_assert_int_eq(sqlite3_step(stmt), SQLITE_ROW);
    return stmt;
}

static int64_t jint(const char *json, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int64_t jint(const char *json, const char *fmt, ...)
{
    char path[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    sqlite3_stmt *stmt = jq(json, path);
    ck_assert_msg(sqlite3_column_type(stmt, 0) != SQLITE_NULL, "no %s in:\n%.2000s", path, json);
    int64_t v = sqlite3_column_int64(stmt, 1);
    sqlite3_finalize(stmt);
    return v;
}

static double jdouble(const char *json, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static double jdouble(const char *json, const char *fmt, ...)
{
    char path[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    sqlite3_stmt *stmt = jq(json, path);
    ck_assert_msg(sqlite3_column_type(stmt, 0) != SQLITE_NULL, "no %s", path);
    double v = sqlite3_column_double(stmt, 1);
    sqlite3_finalize(stmt);
    return v;
}

static int64_t jlen(const char *json, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int64_t jlen(const char *json, const char *fmt, ...)
{
    static sqlite3 *db;
    if (!db)
        ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    char path[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    sqlite3_stmt *stmt;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT json_array_length(?1, ?2)", -1, &stmt, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(stmt, 1, json, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, path, -1, SQLITE_TRANSIENT);
    ck_assert_int_eq(sqlite3_step(stmt), SQLITE_ROW);
    ck_assert_msg(sqlite3_column_type(stmt, 0) != SQLITE_NULL, "no array %s", path);
    int64_t n = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return n;
}

/* The value at path as text: a string's value, other JSON as written, "null"
 * for JSON null, "(missing)" when there is nothing there. Static buffer. */
static const char *jtext(const char *json, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *jtext(const char *json, const char *fmt, ...)
{
    static char out[4096];
    char path[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    sqlite3_stmt *stmt = jq(json, path);
    const unsigned char *type = sqlite3_column_text(stmt, 0);
    const unsigned char *v = sqlite3_column_text(stmt, 1);
    snprintf(out, sizeof(out), "%s",
             !type                                     ? "(missing)"
             : strcmp((const char *)type, "null") == 0 ? "null"
                                                       : (v ? (const char *)v : ""));
    sqlite3_finalize(stmt);
    return out;
}

/* ---- the runs match ---- */

START_TEST(test_identical_runs_match)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.nranks = 4, .run = 'a', .custom_ar = true, .captured = 4, .eager = 3};
    write_run(a, spec, 4, false);
    /* The same program again: other pids, pointers, clocks, unique ids,
     * IPC handles, GPUs (another machine), host, trace directory. */
    spec.run = 'b';
    write_run(b, spec, 4, false);

    char *json = diff_json(NULL, a, b);
    ck_assert_int_eq(jint(json, "$.match"), 1);
    ck_assert_str_eq(jtext(json, "$.differences"), "[]");
    ck_assert_int_eq(jint(json, "$.gpus.pairs[#-1].baseline.rank"), 3);
    for (int i = 0; i < 4; i++)
        ck_assert_str_eq(jtext(json, "$.gpus.pairs[%d].matched_by", i), "rank");
    ck_assert_str_eq(jtext(json, "$.gpus.only_in_baseline"), "[]");
    ck_assert_str_eq(jtext(json, "$.summary.first_divergence"), "null");
    ck_assert_str_eq(jtext(json, "$.allocations"), "[]");
    ck_assert_str_eq(jtext(json, "$.config.env.changes"), "[]");
    /* CUDA_HOME and the redacted one; CUTRACE_DIR differs but is not compared */
    ck_assert_int_eq(jint(json, "$.config.env.compared"), 2);
    ck_assert_str_eq(jtext(json, "$.config.env.baseline.HF_TOKEN_SECRET_KEY"), "<redacted>");
    ck_assert_str_eq(jtext(json, "$.config.env.baseline.CUTRACE_DIR"), "(missing)");
    /* every step of every pair on both sides */
    for (int p = 0; p < 4; p++)
        for (int s = 0; s < jlen(json, "$.alignment[%d].steps", p) && s < 64; s++) {
            ck_assert_str_ne(jtext(json, "$.alignment[%d].steps[%d].baseline", p, s), "null");
            ck_assert_str_ne(jtext(json, "$.alignment[%d].steps[%d].other", p, s), "null");
        }
    free(json);

    char *text = diff_text(NULL, a, b);
    assert_contains(text, "the runs match: the same GPUs, milestones, memory (within 16.0 MiB)");
    assert_contains(text, "the 3 other pairs: the same deltas at every milestone");
    assert_contains(text, "GPUs paired: 4 by NCCL rank, 0 by device ordinal, 0 by uuid");
    free(text);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* Same input, same bytes; and two identical runs read alike whichever is A. */
START_TEST(test_deterministic_output)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b"), *c = subdir(root, "c");
    struct rank_spec spec = {.nranks = 2, .run = 'a', .captured = 1};
    write_run(a, spec, 2, false);
    spec.run = 'b';
    spec.custom_ar = true;
    write_run(b, spec, 2, false);
    spec.run = 'a'; /* c: b's program on a's machine */
    write_run(c, spec, 2, false);
    const char *opts[] = {"--framework", "sglang", "--mem-fraction-static", "0.5", NULL};
    struct proc_result r1 = diff_run(opts, a, b), r2 = diff_run(opts, a, b);
    ck_assert_int_eq(r1.status, 0);
    ck_assert_str_eq(r1.out, r2.out);
    /* a vs c: the same differences as a vs b, only c's path and pids differ */
    struct proc_result r3 = diff_run(opts, a, c);
    ck_assert_int_eq(r3.status, 0);
    char *x = strstr(r1.out, "\n"), *y = strstr(r3.out, "\n");
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    /* the budget table names pids (context): drop those lines */
    char *cut1 = strstr(x, "what moved rest"), *cut3 = strstr(y, "what moved rest");
    ck_assert_ptr_nonnull(cut1);
    ck_assert_ptr_nonnull(cut3);
    ck_assert_int_eq(cut1 - x, cut3 - y);
    ck_assert_int_eq(memcmp(x, y, (size_t)(cut1 - x)), 0);
    const char *json_opts[] = {"--json", NULL};
    struct proc_result j1 = diff_run(json_opts, a, b), j2 = diff_run(json_opts, a, b);
    ck_assert_str_eq(j1.out, j2.out);
    proc_result_free(&r1);
    proc_result_free(&r2);
    proc_result_free(&r3);
    proc_result_free(&j1);
    proc_result_free(&j2);
    free(a);
    free(b);
    free(c);
    scratch_remove(root);
}
END_TEST

/* ---- what a custom all-reduce changes ---- */

START_TEST(test_custom_allreduce_named_exactly)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.nranks = 4, .run = 'a', .captured = 2, .eager = 2};
    write_run(a, spec, 4, false);
    spec.run = 'b';
    spec.custom_ar = true;
    spec.cmdline = "python3 -m server --tp 4 --enable-custom-ar";
    write_run(b, spec, 4, false);

    char *json = diff_json(NULL, a, b);
    ck_assert_int_eq(jint(json, "$.match"), 0);
    ck_assert_str_eq(jtext(json, "$.differences"),
                     "[\"milestones\",\"memory\",\"allocations\",\"ipc\",\"cmdline\"]");
    /* exactly two groups: the exported buffer, and the peers' mapped */
    ck_assert_int_eq(jlen(json, "$.allocations"), 2);
    ck_assert_str_eq(jtext(json, "$.allocations[0].api"), "cudaMalloc");
    ck_assert_str_eq(jtext(json, "$.allocations[0].module"), "server");
    ck_assert_str_eq(jtext(json, "$.allocations[0].category"), "ipc_exported");
    ck_assert_int_eq(jint(json, "$.allocations[0].size"), AR_DEFAULT);
    ck_assert_int_eq(jint(json, "$.allocations[0].baseline_count"), 0);
    ck_assert_int_eq(jint(json, "$.allocations[0].other_count"), 4);
    ck_assert_int_eq(jint(json, "$.allocations[0].delta_bytes"), 4 * AR_DEFAULT);
    ck_assert_int_eq(jint(json, "$.allocations[0].pair_delta_min"), 1);
    ck_assert_int_eq(jint(json, "$.allocations[0].pair_delta_max"), 1);
    ck_assert_str_eq(jtext(json, "$.allocations[0].phase"),
                     "first collective -> measurement 2 (pre)");
    ck_assert_str_eq(jtext(json, "$.allocations[1].api"), "cudaIpcOpenMemHandle");
    ck_assert_str_eq(jtext(json, "$.allocations[1].category"), "peer");
    ck_assert_int_eq(jint(json, "$.allocations[1].gpu_memory"), 0);
    ck_assert_int_eq(jint(json, "$.allocations[1].size"), AR_DEFAULT);
    ck_assert_int_eq(jint(json, "$.allocations[1].other_count"), 12);
    ck_assert_int_eq(jint(json, "$.allocations[1].pair_delta_min"), 3);
    ck_assert_int_eq(jint(json, "$.allocations[1].pair_delta_max"), 3);

    /* pre is where it shows: free less by exactly the exported buffer */
    ck_assert_str_eq(jtext(json, "$.summary.first_divergence.milestone"), "measurement 2 (pre)");
    ck_assert_int_eq(jlen(json, "$.summary.first_divergence.pairs"), 4);
    ck_assert_int_eq(jint(json, "$.summary.first_divergence.delta_free_bytes"), -AR_DEFAULT);
    ck_assert_int_eq(jint(json, "$.summary.first_divergence.delta_traced_bytes"), AR_DEFAULT);
    ck_assert_int_eq(jint(json, "$.summary.first_divergence.delta_live.ipc_exported"), AR_DEFAULT);
    ck_assert_int_eq(jint(json, "$.summary.first_divergence.delta_live.peer"), 3 * AR_DEFAULT);
    /* ... which is what the phase before it made, per rank, and nothing else */
    ck_assert_int_eq(jlen(json, "$.summary.phases"), 1);
    ck_assert_int_eq(jint(json, "$.summary.phases[0].per_pair.gpu_allocations_added"), 1);
    ck_assert_int_eq(jint(json, "$.summary.phases[0].per_pair.gpu_delta_bytes"), AR_DEFAULT);
    ck_assert_int_eq(jint(json, "$.summary.phases[0].per_pair.peer_mappings_added"), 3);
    ck_assert_str_eq(jtext(json, "$.summary.milestones_only_in_other[0].milestone"), "IPC export");
    ck_assert_str_eq(jtext(json, "$.summary.milestones_only_in_other[1].milestone"), "IPC open");
    ck_assert_str_eq(jtext(json, "$.summary.milestones_only_in_baseline"), "[]");
    /* the step of pre on rank 2, in full */
    int pre = -1;
    for (int s = 0; s < jlen(json, "$.alignment[2].steps"); s++)
        if (strcmp(jtext(json, "$.alignment[2].steps[%d].milestone", s), "measurement 2 (pre)") ==
            0)
            pre = s;
    ck_assert_int_ge(pre, 0);
    ck_assert_int_eq(jint(json, "$.alignment[2].steps[%d].delta.free_bytes", pre), -AR_DEFAULT);
    ck_assert_int_eq(jint(json, "$.alignment[2].steps[%d].delta.unexplained_bytes", pre), 0);
    ck_assert_int_eq(jint(json, "$.alignment[2].steps[%d].baseline.unexplained_bytes", pre),
                     CONTEXT);
    ck_assert_int_eq(jint(json, "$.alignment[2].steps[%d].diverges", pre), 1);

    /* lineage: each rank's buffer mapped by the three others */
    ck_assert_int_eq(jint(json, "$.ipc.baseline.buffers_exported"), 0);
    ck_assert_int_eq(jint(json, "$.ipc.other.buffers_exported"), 4);
    ck_assert_int_eq(jint(json, "$.ipc.other.mappings"), 12);
    ck_assert_int_eq(jint(json, "$.ipc.other.mappings_of_untraced_exports"), 0);
    ck_assert_str_eq(jtext(json, "$.ipc.other.groups[0].exporters"), "ranks 0-3");
    ck_assert_str_eq(jtext(json, "$.ipc.other.groups[0].opened_by"), "every other rank (3)");
    ck_assert_str_eq(jtext(json, "$.ipc.other.buffers[1].opener_ranks"), "[0,2,3]");
    /* the communicator and its memory did not change */
    ck_assert_int_eq(jint(json, "$.communicators[0].baseline.nccl_bytes"), 4 * 3 * NCCL_PEER);
    ck_assert_int_eq(jint(json, "$.communicators[0].other.nccl_bytes"), 4 * 3 * NCCL_PEER);
    ck_assert_str_eq(jtext(json, "$.config.cmdline.added"), "[\"--enable-custom-ar\"]");
    ck_assert_str_eq(jtext(json, "$.config.cmdline.removed"), "[]");
    free(json);

    char *text = diff_text(NULL, a, b);
    char *fl = flat(text);
    assert_contains(fl, "the runs differ: milestones, memory, allocations, ipc, cmdline");
    assert_contains(fl, "first divergence > 16.0 MiB: measurement 2 (pre) on every rank (rank 0: "
                        "free -64.0 MiB, traced +64.0 MiB, unexplained 0; ipc_exported +64.0 MiB, "
                        "peer +192.0 MiB)");
    assert_contains(fl, "first collective -> measurement 2 (pre), per rank: GPU memory +1 "
                        "allocation (+64.0 MiB); +3 IPC mappings (+192.0 MiB) of peers' memory, "
                        "not this GPU's");
    free(fl);
    char *sq = squeeze(text);
    assert_contains(sq,
                    " +1 64 MiB cudaMalloc server ipc_exported after first collective +64.0 MiB\n");
    assert_contains(
        sq, " +3 64 MiB cudaIpcOpenMemHandle server peer after first collective +192.0 MiB\n");
    assert_contains(sq, " ranks 0-3 cudaMalloc server 64 MiB 4 every other rank (3) 12\n");
    assert_contains(sq, "B adds: --enable-custom-ar");
    assert_contains(sq, "B IPC export - 94.0 MiB\n"); /* NCCL 30 MiB + the buffer */
    free(sq);
    free(text);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* A 4-rank run in a, and in b the same with a custom all-reduce whose
 * exported buffer is 96 MiB + 5120 bytes. */
static void write_custom_ar_pair(const char *a, const char *b)
{
    struct rank_spec spec = {.nranks = 4, .run = 'a'};
    write_run(a, spec, 4, false);
    spec.run = 'b';
    spec.custom_ar = true;
    spec.ar_size = 96 * MiB + 5120;
    write_run(b, spec, 4, false);
}

/* The budget delta is the difference of what `cutrace budget` says of each. */
START_TEST(test_budget_delta_matches_budget_reports)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    write_custom_ar_pair(a, b);

    const char *opts[] = {"--framework", "sglang", "--mem-fraction-static", "0.5", NULL};
    char *json = diff_json(opts, a, b);
    double rest[2];
    const char *dirs[2] = {a, b};
    for (int side = 0; side < 2; side++) {
        const char *args[] = {"budget", "--framework", "sglang",   "--mem-fraction-static",
                              "0.5",    "--json",      dirs[side], NULL};
        struct proc_result r = run_cutrace(args, NULL);
        ck_assert_int_eq(r.status, 0);
        rest[side] = jdouble(r.out, "$.jobs[0].rest_gib");
        ck_assert(jdouble(json, side ? "$.budget.jobs[0].other.rest_gib"
                                     : "$.budget.jobs[0].baseline.rest_gib") == rest[side]);
        proc_result_free(&r);
    }
    ck_assert(jdouble(json, "$.budget.jobs[0].delta.rest_gib") == rest[1] - rest[0]);
    ck_assert_int_eq(jint(json, "$.budget.jobs[0].delta.min_pre_free_bytes"), -(96 * MiB + 5120));
    ck_assert_int_eq(jint(json, "$.budget.jobs[0].delta.min_post_free_bytes"), -(96 * MiB + 5120));
    /* decomposed: the exported buffer, made before pre, costs F times its size */
    ck_assert_str_eq(jtext(json, "$.budget.jobs[0].delta.changes[0].part"), "before_pre");
    ck_assert_str_eq(jtext(json, "$.budget.jobs[0].delta.changes[0].category"), "ipc_exported");
    ck_assert_int_eq(jint(json, "$.budget.jobs[0].delta.changes[0].delta_bytes"), 96 * MiB + 5120);
    ck_assert(jdouble(json, "$.budget.jobs[0].delta.changes[0].effect_on_rest_gib") ==
              -((double)(96 * MiB + 5120) * 0.5 / 1073741824.0));
    ck_assert_int_eq(jlen(json, "$.budget.jobs[0].delta.changes"), 1);
    /* what is left is float32's rounding of the MIN, nothing more than its step */
    double other = jdouble(json, "$.budget.jobs[0].delta.other_effect_on_rest_gib");
    ck_assert_msg(other > -1e-5 && other < 1e-5, "other %.17g", other);
    ck_assert_str_eq(jtext(json, "$.budget.baseline_parameters.mem_fraction_static_source"),
                     "option");
    free(json);

    char *text = diff_text(opts, a, b);
    assert_contains(text, "budget (sglang, F 0.5): rest ");
    char *sq = squeeze(text);
    assert_contains(sq, " custom all-reduce buffers (ipc_exported) made before pre 0 96.0 MiB "
                        "+96.0 MiB -48.0 MiB\n");
    free(sq);
    free(text);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* The number a page shows under data-key `key` (its exact data-value). */
static double page_value(const char *page, const char *key)
{
    char *needle = NULL;
    ck_assert_int_ge(asprintf(&needle, "data-key=\"%s\" data-value=\"", key), 0);
    const char *at = strstr(page, needle);
    ck_assert_msg(at != NULL, "the page has no %s", key);
    double v = strtod(at + strlen(needle), NULL);
    free(needle);
    return v;
}

/* diff --html with --framework: both runs' budgets side by side, each
 * number the one `cutrace budget --json` prints for its run. */
START_TEST(test_diff_html_budgets_side_by_side)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    write_custom_ar_pair(a, b);
    const char *opts[] = {"--framework", "sglang", "--mem-fraction-static", "0.5", "--html",
                          "/dev/stdout", NULL};
    struct proc_result page = diff_run(opts, a, b);
    ck_assert_msg(page.status == 0, "exit %d: %s", page.status, page.err);
    assert_contains(page.out, "<h2>The budgets, side by side</h2>");
    const char *dirs[2] = {a, b}, *sides[2] = {"A", "B"};
    for (int side = 0; side < 2; side++) {
        const char *args[] = {"budget", "--framework", "sglang",   "--mem-fraction-static",
                              "0.5",    "--json",      dirs[side], NULL};
        struct proc_result r = run_cutrace(args, NULL);
        ck_assert_int_eq(r.status, 0);
        char key[96];
        snprintf(key, sizeof(key), "%s.jobs.0.rest_gib", sides[side]);
        ck_assert(page_value(page.out, key) == jdouble(r.out, "$.jobs[0].rest_gib"));
        for (int k = 0; k < 4; k++) {
            snprintf(key, sizeof(key), "%s.jobs.0.ranks.%d.pre.free_bytes", sides[side], k);
            char path[64];
            snprintf(path, sizeof(path), "$.jobs[0].ranks[%d].pre.free_bytes", k);
            ck_assert(page_value(page.out, key) == (double)jint(r.out, path));
            /* each waterfall its own id on the page */
            snprintf(key, sizeof(key), "id=\"budget-%s-0-%d\"", sides[side], k);
            assert_contains(page.out, key);
        }
        proc_result_free(&r);
    }
    ck_assert_ptr_null(strstr(page.out, "id=\"budget-0-0\""));
    ck_assert_ptr_null(strstr(page.out, "data-key=\"jobs."));
    proc_result_free(&page);
    /* Without --framework, no budget to draw. */
    const char *plain[] = {"--html", "/dev/stdout", NULL};
    page = diff_run(plain, a, b);
    ck_assert_int_eq(page.status, 0);
    ck_assert_ptr_null(strstr(page.out, "The budgets, side by side"));
    proc_result_free(&page);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* ---- pairing ---- */

/* Processes that number their GPUs differently (CUDA_VISIBLE_DEVICES) on
 * another machine (other uuids) are paired by rank, and match. */
START_TEST(test_pairs_by_rank_across_remapped_ordinals)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.nranks = 4, .run = 'a'};
    write_run(a, spec, 4, false);
    spec.run = 'b';
    write_run(b, spec, 4, true);
    char *json = diff_json(NULL, a, b);
    ck_assert_int_eq(jint(json, "$.match"), 1);
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(jtext(json, "$.gpus.pairs[%d].matched_by", i), "rank");
        ck_assert_int_eq(jint(json, "$.gpus.pairs[%d].baseline.rank", i), i);
        ck_assert_int_eq(jint(json, "$.gpus.pairs[%d].other.rank", i), i);
        ck_assert_int_eq(jint(json, "$.gpus.pairs[%d].baseline.ordinal", i), i);
        ck_assert_int_eq(jint(json, "$.gpus.pairs[%d].other.ordinal", i), 3 - i);
    }
    free(json);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* Without NCCL: by ordinal; with every process on its device 0: by uuid;
 * neither: nothing to pair, said so. */
START_TEST(test_pairs_by_ordinal_then_uuid)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.run = 'a'};
    write_run(a, spec, 2, false);
    spec.run = 'b';
    write_run(b, spec, 2, false);
    char *json = diff_json(NULL, a, b);
    ck_assert_int_eq(jint(json, "$.match"), 1);
    ck_assert_str_eq(jtext(json, "$.gpus.pairs[0].matched_by"), "ordinal");
    ck_assert_str_eq(jtext(json, "$.gpus.pairs[1].name"), "device 1");
    free(json);

    /* every process sees its GPU as device 0: only the uuid tells them apart */
    char *c = subdir(root, "c"), *d = subdir(root, "d");
    for (int r = 0; r < 2; r++) {
        struct rank_spec s = {.rank = r, .device = 0, .run = 'a', .same_uuid = true};
        write_rank(c, &s);
        s.run = 'b';
        write_rank(d, &s);
    }
    json = diff_json(NULL, c, d);
    ck_assert_int_eq(jint(json, "$.match"), 1);
    ck_assert_str_eq(jtext(json, "$.gpus.pairs[0].matched_by"), "uuid");
    ck_assert_int_eq(jlen(json, "$.gpus.pairs"), 2);
    free(json);

    /* another machine too: no way to pair them */
    char *e = subdir(root, "e");
    for (int r = 0; r < 2; r++) {
        struct rank_spec s = {.rank = r, .device = 0, .run = 'b'};
        write_rank(e, &s);
    }
    json = diff_json(NULL, c, e);
    ck_assert_int_eq(jlen(json, "$.gpus.pairs"), 0);
    ck_assert_int_eq(jlen(json, "$.gpus.only_in_baseline"), 2);
    ck_assert_int_eq(jlen(json, "$.gpus.only_in_other"), 2);
    ck_assert_str_eq(jtext(json, "$.differences"), "[\"gpus\"]");
    free(json);
    char *text = diff_text(NULL, c, e);
    assert_contains(text, "only in A: 2 GPUs (GPU-c0000000, GPU-c0000001)");
    assert_contains(text, "Milestones: no GPU of A has a partner in B");
    free(text);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    scratch_remove(root);
}
END_TEST

/* ---- runs that cannot be compared in full ---- */

START_TEST(test_different_rank_counts)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.nranks = 2, .run = 'a', .cmdline = "python3 -m server --tp 2"};
    write_run(a, spec, 2, false);
    spec.run = 'b';
    spec.cmdline = "python3 -m server --tp 4";
    write_run(b, spec, 4, false);
    char *json = diff_json(NULL, a, b);
    ck_assert_int_eq(jint(json, "$.baseline.world"), 2);
    ck_assert_int_eq(jint(json, "$.other.world"), 4);
    ck_assert_int_eq(jlen(json, "$.gpus.pairs"), 2);
    ck_assert_int_eq(jint(json, "$.gpus.only_in_other[0].rank"), 2);
    ck_assert_int_eq(jint(json, "$.gpus.only_in_other[1].rank"), 3);
    /* more peers, more NCCL memory: 10 MiB per peer per rank */
    ck_assert_int_eq(jint(json, "$.allocations[0].pair_delta_min"), 2);
    ck_assert_str_eq(jtext(json, "$.allocations[0].api"), "cuMemCreate");
    ck_assert_str_eq(jtext(json, "$.allocations[0].module"), "libnccl.so.2");
    ck_assert_str_eq(jtext(json, "$.allocations[0].category"), "nccl");
    ck_assert_str_eq(jtext(json, "$.allocations[0].phase"), "NCCL init 1 -> first collective");
    ck_assert_int_eq(jint(json, "$.communicators[0].baseline.nranks"), 2);
    ck_assert_int_eq(jint(json, "$.communicators[0].other.nranks"), 4);
    ck_assert_int_eq(jint(json, "$.communicators[0].other.nccl_bytes"), 4 * 3 * NCCL_PEER);
    free(json);
    char *text = diff_text(NULL, a, b);
    assert_contains(text, "the runs have different rank counts: A 2, B 4");
    assert_contains(text, "only in B: 2 GPUs (rank 2, rank 3)");
    assert_contains(text, "NCCL init 1 (2 | 4 ranks)");
    assert_contains(text, "B adds: --tp 4\n  B drops: --tp 2\n");
    free(text);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* A rank killed after pre, and a rank whose trace is gone. */
START_TEST(test_killed_and_missing_ranks)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b"), *c = subdir(root, "c");
    struct rank_spec spec = {.nranks = 4, .run = 'a', .captured = 1};
    write_run(a, spec, 4, false);
    spec.run = 'b';
    for (int r = 0; r < 4; r++) {
        struct rank_spec s = spec;
        s.rank = r;
        s.device = r;
        s.killed_after_pre = r == 1;
        write_rank(b, &s);
        if (r != 2) /* c: rank 2 left no trace */
            write_rank(c, &s);
    }
    char *json = diff_json(NULL, a, b);
    ck_assert_int_eq(jint(json, "$.other.killed"), 1);
    ck_assert_int_eq(jint(json, "$.other.unfinished_processes[0].rank"), 1);
    ck_assert_str_eq(jtext(json, "$.other.unfinished_processes[0].end"), "killed");
    ck_assert_str_eq(jtext(json, "$.other.unfinished_processes[0].last_milestone"),
                     "measurement 2");
    ck_assert_str_eq(jtext(json, "$.differences"),
                     "[\"ends\",\"milestones\",\"memory\",\"allocations\",\"collectives\"]");
    ck_assert_str_eq(jtext(json, "$.summary.milestones_only_in_baseline[0].milestone"),
                     "weight burst begins");
    ck_assert_int_eq(jint(json, "$.summary.milestones_only_in_baseline[0].pairs"), 1);
    /* the weights rank 1 never made, on rank 1 only */
    ck_assert_int_eq(jint(json, "$.allocations[0].baseline_count"), WEIGHTS);
    ck_assert_int_eq(jint(json, "$.allocations[0].other_count"), 0);
    ck_assert_int_eq(jint(json, "$.allocations[0].pairs_changed"), 1);
    ck_assert_str_eq(jtext(json, "$.allocations[0].per_pair[0].pair"), "rank 1");
    free(json);
    char *text = diff_text(NULL, a, b);
    assert_contains(text, "B: pid 7007 (rank 1) was killed (no clean exit) after measurement 2: "
                          "its later milestones are missing");
    assert_contains(text, "measurement 2 (pre) -> last event on rank 1: GPU memory -4 "
                          "allocations (-1.00 GiB)");
    free(text);

    json = diff_json(NULL, a, c);
    ck_assert_str_eq(jtext(json, "$.other.missing_ranks"), "[2]");
    ck_assert_int_eq(jint(json, "$.gpus.only_in_baseline[0].rank"), 2);
    ck_assert_int_eq(jint(json, "$.communicators[0].other.ranks_traced"), 3);
    free(json);
    text = diff_text(NULL, a, c);
    assert_contains(text, "B has no trace of rank 2 (its communicator has 4 ranks)");
    assert_contains(text, "only in A: 1 GPU (rank 2)");
    free(text);
    free(a);
    free(b);
    free(c);
    scratch_remove(root);
}
END_TEST

/* ---- NCCL, threshold, configuration ---- */

START_TEST(test_collectives_per_communicator_and_op)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.nranks = 2, .run = 'a', .captured = 4, .eager = 1};
    write_run(a, spec, 2, false);
    spec.run = 'b';
    spec.captured = 1;
    spec.eager = 6;
    write_run(b, spec, 2, false);
    char *json = diff_json(NULL, a, b);
    /* 4 captures or 1 in a row are one capture milestone either way */
    ck_assert_str_eq(jtext(json, "$.differences"), "[\"collectives\"]");
    /* warm-up (4 B) + captured + eager, summed over the 2 ranks */
    ck_assert_int_eq(jint(json, "$.communicators[0].baseline.ops[0].calls"), 2 * (1 + 4 + 1));
    ck_assert_int_eq(jint(json, "$.communicators[0].baseline.ops[0].captured"), 8);
    ck_assert_int_eq(jint(json, "$.communicators[0].baseline.ops[0].eager"), 4);
    ck_assert_int_eq(jint(json, "$.communicators[0].baseline.ops[0].bytes"), 2 * (4 + 5 * 2048));
    ck_assert_int_eq(jint(json, "$.communicators[0].other.ops[0].calls"), 2 * (1 + 1 + 6));
    ck_assert_int_eq(jint(json, "$.communicators[0].other.ops[0].captured"), 2);
    ck_assert_int_eq(jint(json, "$.communicators[0].other.ops[0].calls_per_rank_min"), 8);
    ck_assert_int_eq(jint(json, "$.communicators[0].other.ops[0].calls_per_rank_max"), 8);
    /* 4 captures in a row are one capture milestone with 4 graphs */
    int end = -1;
    for (int s = 0; s < jlen(json, "$.alignment[0].steps"); s++)
        if (strcmp(jtext(json, "$.alignment[0].steps[%d].kind", s), "capture_end") == 0)
            end = s;
    ck_assert_int_ge(end, 0);
    ck_assert_int_eq(jint(json, "$.alignment[0].steps[%d].baseline.graphs", end), 4);
    ck_assert_int_eq(jint(json, "$.alignment[0].steps[%d].other.graphs", end), 1);
    free(json);
    char *text = diff_text(NULL, a, b);
    char *sq = squeeze(text);
    assert_contains(sq, " 1 ncclAllReduce 12 16 ");
    assert_contains(sq, "capture 1 ends, 4 | 1 graphs");
    free(sq);
    free(text);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

START_TEST(test_threshold)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.nranks = 2, .run = 'a'};
    write_run(a, spec, 2, false);
    spec.run = 'b';
    spec.custom_ar = true;
    spec.ar_size = 8 * MiB; /* under the default 16 MiB */
    write_run(b, spec, 2, false);
    char *json = diff_json(NULL, a, b);
    ck_assert_str_eq(jtext(json, "$.summary.first_divergence"), "null");
    ck_assert_int_eq(jint(json, "$.parameters.threshold"), 16 * MiB);
    ck_assert_int_eq(jlen(json, "$.allocations"), 2); /* counted exactly all the same */
    free(json);
    const char *opts[] = {"--threshold", "4M", NULL};
    json = diff_json(opts, a, b);
    ck_assert_str_eq(jtext(json, "$.summary.first_divergence.milestone"), "measurement 2 (pre)");
    ck_assert_int_eq(jint(json, "$.parameters.threshold"), 4 * MiB);
    free(json);
    char *text = diff_text(NULL, a, b);
    assert_contains(text, "no milestone diverges by more than 16.0 MiB");
    free(text);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

START_TEST(test_configuration_differences)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.nranks = 2,
                             .run = 'a',
                             .cmdline = "python3 -m server --tp 2 --mem-fraction-static 0.8",
                             .env_name = "NCCL_P2P_DISABLE",
                             .env_value = "1"};
    write_run(a, spec, 2, false);
    spec.run = 'b';
    spec.cmdline = "python3 -m server --tp 2 --mem-fraction-static 0.85 --enable-custom-ar";
    spec.env_name = "PYTORCH_CUDA_ALLOC_CONF";
    spec.env_value = "expandable_segments:True";
    write_run(b, spec, 2, false);
    char *json = diff_json(NULL, a, b);
    ck_assert_str_eq(jtext(json, "$.differences"), "[\"cmdline\",\"env\"]");
    ck_assert_str_eq(jtext(json, "$.config.cmdline.added"),
                     "[\"--mem-fraction-static 0.85\",\"--enable-custom-ar\"]");
    ck_assert_str_eq(jtext(json, "$.config.cmdline.removed"), "[\"--mem-fraction-static 0.8\"]");
    ck_assert_int_eq(jint(json, "$.config.cmdline.baseline[0].processes"), 2);
    ck_assert_int_eq(jlen(json, "$.config.env.changes"), 2);
    ck_assert_str_eq(jtext(json, "$.config.env.changes[0].name"), "NCCL_P2P_DISABLE");
    ck_assert_str_eq(jtext(json, "$.config.env.changes[0].baseline"), "1");
    ck_assert_str_eq(jtext(json, "$.config.env.changes[0].other"), "null");
    ck_assert_str_eq(jtext(json, "$.config.env.changes[1].name"), "PYTORCH_CUDA_ALLOC_CONF");
    ck_assert_str_eq(jtext(json, "$.config.env.changes[1].other"), "expandable_segments:True");
    free(json);
    /* F comes from each run's own command line */
    const char *opts[] = {"--framework", "sglang", NULL};
    json = diff_json(opts, a, b);
    ck_assert(jdouble(json, "$.budget.baseline_parameters.mem_fraction_static") == 0.8);
    ck_assert(jdouble(json, "$.budget.other_parameters.mem_fraction_static") == 0.85);
    ck_assert_str_eq(jtext(json, "$.budget.other_parameters.mem_fraction_static_source"),
                     "cmdline");
    free(json);
    char *text = diff_text(NULL, a, b);
    char *sq = squeeze(text);
    char *fl = flat(text);
    assert_contains(fl,
                    "command line: B adds --mem-fraction-static 0.85 --enable-custom-ar; B drops "
                    "--mem-fraction-static 0.8 ");
    assert_contains(fl,
                    "environment: 2 variables differ: NCCL_P2P_DISABLE, PYTORCH_CUDA_ALLOC_CONF");
    free(fl);
    assert_contains(sq, " NCCL_P2P_DISABLE 1 (unset)\n");
    free(sq);
    free(text);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* Long command lines and values stay inside 120 columns. */
START_TEST(test_text_width)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    char cmd[600], value[400];
    memset(value, 'v', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    snprintf(cmd, sizeof(cmd), "python3 -m server %.400s --tp 2", value);
    struct rank_spec spec = {
        .nranks = 2, .run = 'a', .cmdline = cmd, .env_name = "NCCL_DEBUG", .env_value = value};
    write_run(a, spec, 2, false);
    spec.run = 'b';
    spec.custom_ar = true;
    spec.cmdline = "python3 -m server --tp 2 --a-very-long-option-name-that-goes-on-and-on=1";
    spec.env_value = "INFO";
    write_run(b, spec, 2, false);
    const char *opts[] = {"--framework", "sglang", "--mem-fraction-static", "0.9", NULL};
    char *text = diff_text(opts, a, b); /* asserts the width */
    assert_contains(text, "Configuration");
    free(text);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* Traces of the oldest format (no modules, no NCCL views) still compare. */
START_TEST(test_old_format_traces)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    for (int r = 0; r < 2; r++) {
        struct rank_spec s = {.rank = r, .device = r, .run = 'a'};
        write_rank(a, &s);
        s.run = 'b';
        s.weights = 5;
        write_rank(b, &s);
    }
    const char *dirs[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        DIR *dir = opendir(dirs[i]);
        ck_assert_ptr_nonnull(dir);
        struct dirent *e;
        while ((e = readdir(dir)) != NULL)
            if (strstr(e->d_name, ".db")) {
                char *path = cli_path_join(dirs[i], e->d_name);
                fixture_downgrade(path, 1);
                free(path);
            }
        closedir(dir);
    }
    char *json = diff_json(NULL, a, b);
    ck_assert_str_eq(jtext(json, "$.allocations[0].module"), "null");
    ck_assert_int_eq(jint(json, "$.allocations[0].pair_delta_min"), 1);
    ck_assert_int_eq(jint(json, "$.allocations[0].size"), WEIGHT);
    ck_assert_str_eq(jtext(json, "$.communicators"), "[]");
    free(json);
    char *text = diff_text(NULL, a, b);
    assert_contains(text, "(unknown)");
    free(text);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* ---- bad input and usage ---- */

START_TEST(test_bad_input)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *empty = subdir(root, "empty");
    struct rank_spec spec = {.nranks = 2, .run = 'a'};
    write_run(a, spec, 2, false);
    char *missing = cli_path_join(root, "nope");

    struct proc_result r = diff_run(NULL, missing, a);
    assert_one_line_error(&r, missing, "no such file or directory");
    proc_result_free(&r);
    r = diff_run(NULL, a, empty);
    assert_one_line_error(&r, empty, "no cutrace traces in this directory");
    proc_result_free(&r);
    /* a damaged trace in B */
    char *bad = cli_path_join(empty, "x-1-1.db");
    write_file(bad, "not a database, not at all", 26);
    r = diff_run(NULL, a, empty);
    assert_one_line_error(&r, bad, "not an SQLite database");
    proc_result_free(&r);
    free(bad);

    /* usage errors: exit 2, one line */
    char *same = cli_path_join(a, ".");
    struct {
        const char *opt, *arg, *first, *second, *needle;
    } cases[] = {
        {NULL, NULL, a, a, "are the same run: nothing to compare"},
        {NULL, NULL, a, same, "are the same run: nothing to compare"},
        {"--threshold", "lots", a, missing, "--threshold lots: expected a size in bytes"},
        {"--framework", "trtllm", a, missing, "--framework trtllm: expected sglang or vllm"},
        {"--mem-fraction-static", "0.5", a, missing, "the budget options need --framework"},
        {"--mem-fraction-static", "2", a, missing, "expected a number in (0, 1]"},
        {"--framework", "sglang", a, root, "--mem-fraction-static F is required for sglang"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *opts[] = {cases[i].opt, cases[i].arg, NULL};
        char *other = NULL;
        const char *second = cases[i].second;
        if (i == sizeof(cases) / sizeof(cases[0]) - 1) {
            /* sglang with no F anywhere: B is a real run without the flag */
            other = subdir(root, "b");
            struct rank_spec s = {.nranks = 2, .run = 'b'};
            write_run(other, s, 2, false);
            second = other;
        }
        r = diff_run(cases[i].opt ? opts : NULL, cases[i].first, second);
        ck_assert_msg(r.status == 2, "case %zu: exit %d, stderr %s", i, r.status, r.err);
        ck_assert_msg(r.out_len == 0, "case %zu: stdout %s", i, r.out);
        ck_assert_int_eq(count_lines(r.err), 1);
        assert_contains(r.err, cases[i].needle);
        proc_result_free(&r);
        free(other);
    }
    const char *one[] = {"diff", a, NULL};
    r = run_cutrace(one, NULL);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "two trace directories expected");
    proc_result_free(&r);
    const char *three[] = {"diff", a, a, a, NULL};
    r = run_cutrace(three, NULL);
    ck_assert_int_eq(r.status, 2);
    proc_result_free(&r);
    const char *help[] = {"diff", "--help", NULL};
    r = run_cutrace(help, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "usage: cutrace diff");
    proc_result_free(&r);
    free(same);
    free(missing);
    free(a);
    free(empty);
    scratch_remove(root);
}
END_TEST

/* ---- the helpers ---- */

START_TEST(test_exact_and_signed_sizes)
{
    char buf[DIFF_SIZE_BUF];
    ck_assert_str_eq(diff_exact_size(buf, sizeof(buf), 256 * MiB + 5120), "256 MiB + 5 KiB");
    ck_assert_str_eq(diff_exact_size(buf, sizeof(buf), 20 * MiB), "20 MiB");
    ck_assert_str_eq(diff_exact_size(buf, sizeof(buf), 2 * GiB + 3 * MiB), "2 GiB + 3 MiB");
    ck_assert_str_eq(diff_exact_size(buf, sizeof(buf), 2 * MiB + 648 * 1024), "2 MiB + 648 KiB");
    ck_assert_str_eq(diff_exact_size(buf, sizeof(buf), 2776320), "2776320 B");
    ck_assert_str_eq(diff_exact_size(buf, sizeof(buf), 1 * GiB + 1 * MiB + 1), "1074790401 B");
    ck_assert_str_eq(diff_exact_size(buf, sizeof(buf), 512), "512 B");
    ck_assert_str_eq(diff_exact_size(buf, sizeof(buf), 0), "0 B");
    ck_assert_str_eq(diff_signed_size(buf, sizeof(buf), 532 * MiB), "+532.0 MiB");
    ck_assert_str_eq(diff_signed_size(buf, sizeof(buf), -20 * MiB), "-20.0 MiB");
    ck_assert_str_eq(diff_signed_size(buf, sizeof(buf), -3 * GiB / 2), "-1.50 GiB");
    ck_assert_str_eq(diff_signed_size(buf, sizeof(buf), 0), "0");
    ck_assert_str_eq(diff_signed_size(buf, sizeof(buf), INT64_MIN), "-8589934592.00 GiB");
}
END_TEST

/* ---- filters ---- */

/* `cutrace diff OPTS A B` is a usage error whose one line holds needle. */
static void assert_diff_usage(const char *const *opts, const char *a, const char *b,
                              const char *needle)
{
    struct proc_result r = diff_run(opts, a, b);
    ck_assert_msg(r.status == 2, "exit %d; stderr:\n%.1500s", r.status, r.err);
    ck_assert_msg(r.out_len == 0, "stdout not empty:\n%.1500s", r.out);
    ck_assert_msg(strchr(r.err, '\n') == r.err + r.err_len - 1, "not one line:\n%s", r.err);
    assert_contains(r.err, needle);
    proc_result_free(&r);
}

static int diff_status(const char *const *opts, const char *a, const char *b)
{
    struct proc_result r = diff_run(opts, a, b);
    ck_assert_msg(r.out_len > 0, "no report; stderr:\n%.1500s", r.err);
    int status = r.status;
    proc_result_free(&r);
    return status;
}

/* The rank of each pair a filtered --json lists, as "0,1". Malloc'd. */
static char *listed_ranks(const char *const *opts, const char *a, const char *b)
{
    char *json = diff_json(opts, a, b);
    char *out = strdup("");
    for (int i = 0; i < jlen(json, "$.gpus.pairs"); i++) {
        char *next = NULL;
        ck_assert_int_ne(asprintf(&next, "%s%s%" PRId64, out, i ? "," : "",
                                  jint(json, "$.gpus.pairs[%d].baseline.rank", i)),
                         -1);
        free(out);
        out = next;
    }
    free(json);
    return out;
}

/* Ranks 2 and 3 of B load 512 MiB more weights; ranks 0 and 1 are the same. */
START_TEST(test_filters)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.nranks = 4, .run = 'a'};
    write_run(a, spec, 4, false);
    spec.run = 'b';
    for (int r = 0; r < 4; r++) {
        struct rank_spec s = spec;
        s.rank = r;
        s.device = r;
        s.weights = r >= 2 ? WEIGHTS + 2 : 0;
        write_rank(b, &s);
    }
    /* Unfiltered: every pair, the divergence on ranks 2-3. */
    char *json = diff_json(NULL, a, b);
    ck_assert_int_eq(jint(json, "$.listed.pairs"), 4);
    ck_assert_int_eq(jint(json, "$.listed.pairs_total"), 4);
    ck_assert_int_eq(jint(json, "$.gpus.pairs[3].index"), 3);
    ck_assert_int_eq(jlen(json, "$.summary.first_divergence.pairs"), 2);
    ck_assert_int_gt(jlen(json, "$.allocations"), 0);
    free(json);

    /* --rank: the pairs of those ranks; what is summed over pairs is over them. */
    const char *ranks01[] = {"--rank", "0-1", NULL};
    json = diff_json(ranks01, a, b);
    ck_assert_int_eq(jint(json, "$.listed.pairs"), 2);
    ck_assert_int_eq(jint(json, "$.listed.pairs_total"), 4);
    ck_assert_int_eq(jlen(json, "$.gpus.pairs"), 2);
    ck_assert_int_eq(jint(json, "$.gpus.pairs[1].baseline.rank"), 1);
    ck_assert_int_eq(jint(json, "$.gpus.pairs[1].index"), 1);
    ck_assert_int_eq(jlen(json, "$.alignment"), 2);
    ck_assert_str_eq(jtext(json, "$.summary.first_divergence"), "null");
    ck_assert_str_eq(jtext(json, "$.allocations"), "[]");
    ck_assert_str_eq(jtext(json, "$.gpus.only_in_baseline"), "[]");
    free(json);
    const char *rank3[] = {"--rank", "3", NULL};
    json = diff_json(rank3, a, b);
    ck_assert_int_eq(jlen(json, "$.gpus.pairs"), 1);
    ck_assert_int_eq(jint(json, "$.gpus.pairs[0].index"), 3);
    ck_assert_str_eq(jtext(json, "$.gpus.pairs[0].name"), "rank 3");
    ck_assert_int_eq(jlen(json, "$.summary.first_divergence.pairs"), 1);
    ck_assert_int_eq(jint(json, "$.allocations[0].pairs_changed"), 1);
    ck_assert_int_eq(jint(json, "$.allocations[0].delta_bytes"), 2 * WEIGHT);
    free(json);
    char *text = diff_text(rank3, a, b);
    assert_contains(text, "  listed (--rank 3): 1 pair of 4; IPC, NCCL, budget and configuration");
    assert_contains(text, "  GPUs paired: 4 by NCCL rank, 0 by device ordinal, 0 by uuid\n");
    assert_contains(text, "\nMilestones of rank 3, aligned");
    ck_assert_ptr_null(strstr(text, "rank 2"));
    free(text);
    const char *ranks23[] = {"--rank", "2,3", NULL};
    text = diff_text(ranks23, a, b);
    assert_contains(text, " on every listed rank (rank 2: ");
    free(text);

    /* --pid names one run's process: the pair is listed through that side. */
    char *l = listed_ranks((const char *[]){"--pid", "7014", NULL}, a, b); /* B's rank 2 */
    ck_assert_str_eq(l, "2");
    free(l);
    l = listed_ranks((const char *[]){"--pid", "3007,7021", NULL}, a, b); /* A's 1, B's 3 */
    ck_assert_str_eq(l, "1,3");
    free(l);
    /* --host: either side's; with --pid, one process must match both. */
    l = listed_ranks((const char *[]){"--host", "nodeB", NULL}, a, b);
    ck_assert_str_eq(l, "0,1,2,3");
    free(l);
    l = listed_ranks((const char *[]){"--host", "nodeA", "--pid", "3000", NULL}, a, b);
    ck_assert_str_eq(l, "0");
    free(l);
    assert_diff_usage((const char *[]){"--host", "nodeB", "--pid", "3000", NULL}, a, b,
                      "cutrace diff: --pid 3000 --host nodeB: no GPU of these runs matches "
                      "(A: pids 3000, 3007, 3014, 3021; B: pids 7000, 7007, 7014, 7021)");

    /* --gpu: the pair's index in the unfiltered report, or a uuid prefix of either side. */
    l = listed_ranks((const char *[]){"--gpu", "2", NULL}, a, b);
    ck_assert_str_eq(l, "2");
    free(l);
    l = listed_ranks((const char *[]){"--gpu", "b0000003", NULL}, a, b);
    ck_assert_str_eq(l, "3");
    free(l);
    l = listed_ranks((const char *[]){"--gpu", "gpu-A0000001", NULL}, a, b);
    ck_assert_str_eq(l, "1");
    free(l);
    l = listed_ranks((const char *[]){"--gpu", "3", "--rank", "3", NULL}, a, b);
    ck_assert_str_eq(l, "3");
    free(l);
    assert_diff_usage((const char *[]){"--gpu", "4", NULL}, a, b,
                      "cutrace diff: --gpu 4: the runs have 4 GPU pairs (index 0 to 3)");
    assert_diff_usage((const char *[]){"--gpu", "c0000000", NULL}, a, b,
                      "cutrace diff: --gpu c0000000: no GPU of these runs has that uuid");
    assert_diff_usage((const char *[]){"--gpu", "3", "--rank", "1", NULL}, a, b,
                      "cutrace diff: --rank 1 --gpu 3: no GPU of these runs matches "
                      "(A: ranks 0 to 3; B: ranks 0 to 3)");
    /* Nothing matches: the one line of the shared filters. */
    assert_diff_usage((const char *[]){"--rank", "9", NULL}, a, b,
                      "cutrace diff: --rank 9: no GPU of these runs matches "
                      "(A: ranks 0 to 3; B: ranks 0 to 3)");
    assert_diff_usage((const char *[]){"--pid", "1-", NULL}, a, b,
                      "--pid 1-: expected numbers and ranges like 0,2,4-7");

    /* CSV under a filter: the rows of the listed pairs only. */
    struct proc_result r = diff_run((const char *[]){"--csv", "--rank", "2", NULL}, a, b);
    ck_assert_int_eq(r.status, 0);
    size_t rows = 0;
    for (const char *line = strstr(r.out, "\r\n"); line && line[2];
         line = strstr(line + 2, "\r\n")) {
        ck_assert_msg(strncmp(line + 2, "rank 2,", 7) == 0, "a row of another pair: %.80s",
                      line + 2);
        rows++;
    }
    ck_assert_uint_gt(rows, 3);
    proc_result_free(&r);
    r = diff_run((const char *[]){"--csv=allocations", "--rank", "0,1", NULL}, a, b);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_null(strstr(strstr(r.out, "\r\n") + 2, "\r\n")); /* the header alone */
    proc_result_free(&r);
    r = diff_run((const char *[]){"--csv=allocations", "--rank", "2-3", NULL}, a, b);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, ",2\r\n"); /* pairs_changed: both listed pairs */
    proc_result_free(&r);

    /* --fail-on-problem counts only the listed pairs' divergence. */
    ck_assert_int_eq(diff_status((const char *[]){"--fail-on-problem", NULL}, a, b), 3);
    ck_assert_int_eq(
        diff_status((const char *[]){"--fail-on-problem", "--rank", "0,1", NULL}, a, b), 0);
    ck_assert_int_eq(
        diff_status((const char *[]){"--fail-on-problem", "--rank", "1-2", NULL}, a, b), 3);
    ck_assert_int_eq(
        diff_status((const char *[]){"--json", "--fail-on-problem", "--gpu", "0", NULL}, a, b), 0);
    ck_assert_int_eq(
        diff_status((const char *[]){"--csv", "--fail-on-problem", "--pid", "7021", NULL}, a, b),
        3);
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

/* A GPU without a partner is listed when it passes the filters, and only then. */
START_TEST(test_filters_unpaired_gpus)
{
    char *root = scratch_dir();
    char *a = subdir(root, "a"), *b = subdir(root, "b");
    struct rank_spec spec = {.nranks = 2, .run = 'a'};
    write_run(a, spec, 2, false);
    spec.run = 'b';
    write_run(b, spec, 4, false);
    char *json = diff_json((const char *[]){"--rank", "3", NULL}, a, b);
    ck_assert_int_eq(jlen(json, "$.gpus.pairs"), 0);
    ck_assert_int_eq(jlen(json, "$.gpus.only_in_other"), 1);
    ck_assert_int_eq(jint(json, "$.gpus.only_in_other[0].rank"), 3);
    assert_contains(jtext(json, "$.differences"), "\"gpus\"");
    free(json);
    json = diff_json((const char *[]){"--rank", "0", NULL}, a, b);
    ck_assert_int_eq(jlen(json, "$.gpus.pairs"), 1);
    ck_assert_str_eq(jtext(json, "$.gpus.only_in_other"), "[]");
    ck_assert_ptr_null(strstr(jtext(json, "$.differences"), "\"gpus\""));
    free(json);
    char *text = diff_text((const char *[]){"--rank", "2-3", NULL}, a, b);
    assert_contains(text, "only in B: 2 GPUs (rank 2, rank 3)");
    assert_contains(text, "listed (--rank 2-3): 0 pairs of 2");
    free(text);
    /* a uuid names an unpaired GPU; an index only pairs */
    json = diff_json((const char *[]){"--gpu", "b0000002", NULL}, a, b);
    ck_assert_int_eq(jlen(json, "$.gpus.pairs"), 0);
    ck_assert_int_eq(jint(json, "$.gpus.only_in_other[0].rank"), 2);
    free(json);
    assert_diff_usage((const char *[]){"--gpu", "2", NULL}, a, b,
                      "--gpu 2: the runs have 2 GPU pairs (index 0 to 1)");
    free(a);
    free(b);
    scratch_remove(root);
}
END_TEST

Suite *diff_suite(void)
{
    Suite *s = suite_create("diff");
    TCase *tc = tcase_create("diff");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_identical_runs_match);
    tcase_add_test(tc, test_deterministic_output);
    tcase_add_test(tc, test_custom_allreduce_named_exactly);
    tcase_add_test(tc, test_budget_delta_matches_budget_reports);
    tcase_add_test(tc, test_diff_html_budgets_side_by_side);
    tcase_add_test(tc, test_pairs_by_rank_across_remapped_ordinals);
    tcase_add_test(tc, test_pairs_by_ordinal_then_uuid);
    tcase_add_test(tc, test_different_rank_counts);
    tcase_add_test(tc, test_killed_and_missing_ranks);
    tcase_add_test(tc, test_collectives_per_communicator_and_op);
    tcase_add_test(tc, test_threshold);
    tcase_add_test(tc, test_configuration_differences);
    tcase_add_test(tc, test_text_width);
    tcase_add_test(tc, test_old_format_traces);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_exact_and_signed_sizes);
    tcase_add_test(tc, test_filters);
    tcase_add_test(tc, test_filters_unpaired_gpus);
    suite_add_tcase(s, tc);
    return s;
}
