/*
 * test_diff.c - the story's second question, end to end: "what does the
 * custom all-reduce run do differently from the baseline, and what does it
 * cost?". examples/tp_server_sim starts like an 8-rank SGLang server on the
 * fake stack under the tracer, once without and once with --custom-ar
 * (buffers made through dlopen'd libcudart, handles exported and opened by
 * every peer, an 8 MiB rank_data from the caching allocator); `cutrace diff`
 * must name exactly what the second run made before the pre-load
 * measurement, find that it is exactly what pre's free memory lost, and
 * give the budget's delta as the two `cutrace budget` reports give it. Two
 * identical runs must match; runs with different rank counts, a killed rank
 * and a missing trace must be said plainly; bad input gives one line.
 *
 * The report's JSON is read with SQLite's json_extract, by the paths that
 * docs/cli.md documents.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

enum { RANKS = 8, PEERS = RANKS - 1 };
#define MIB       (1ll << 20)
#define KIB       (1ll << 10)
#define META      (5 * KIB)  /* the sim's custom all-reduce Signal block */
#define RANK_DATA (20 * MIB) /* 8 MiB rank_data: a 20 MiB caching-allocator segment */
#define PRE_PHASE "NCCL init 2 -> measurement 2 (pre)"

/* ---- JSON through SQLite ---- */

static sqlite3 *json_db(void)
{
    static sqlite3 *db;
    if (!db)
        ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    return db;
}

/* SELECT sql with ?1 bound to the document; the first column of the first row. */
static sqlite3_stmt *json_sql(const char *json, const char *sql)
{
    sqlite3_stmt *stmt;
    ck_assert_msg(sqlite3_prepare_v2(json_db(), sql, -1, &stmt, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(json_db()));
    sqlite3_bind_text(stmt, 1, json, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(stmt), SQLITE_ROW);
    return stmt;
}

static int64_t jint(const char *json, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int64_t jint(const char *json, const char *fmt, ...)
{
    char path[256], sql[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    snprintf(sql, sizeof sql, "SELECT json_type(?1, '%s'), json_extract(?1, '%s')", path, path);
    sqlite3_stmt *stmt = json_sql(json, sql);
    ck_assert_msg(sqlite3_column_type(stmt, 0) != SQLITE_NULL, "no %s in the report", path);
    int64_t v = sqlite3_column_int64(stmt, 1);
    sqlite3_finalize(stmt);
    return v;
}

static double jdouble(const char *json, const char *path)
{
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT json_type(?1, '%s'), json_extract(?1, '%s')", path, path);
    sqlite3_stmt *stmt = json_sql(json, sql);
    ck_assert_msg(sqlite3_column_type(stmt, 0) != SQLITE_NULL, "no %s in the report", path);
    double v = sqlite3_column_double(stmt, 1);
    sqlite3_finalize(stmt);
    return v;
}

/* A string (or JSON text) at path, "null" for null; static buffer. */
static const char *jtext(const char *json, const char *path)
{
    static char out[2048];
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT json_type(?1, '%s'), json_extract(?1, '%s')", path, path);
    sqlite3_stmt *stmt = json_sql(json, sql);
    const unsigned char *type = sqlite3_column_text(stmt, 0);
    const unsigned char *v = sqlite3_column_text(stmt, 1);
    snprintf(out, sizeof out, "%s",
             !type                                     ? "(missing)"
             : strcmp((const char *)type, "null") == 0 ? "null"
                                                       : (v ? (const char *)v : ""));
    sqlite3_finalize(stmt);
    return out;
}

/* One number from a query over the document (?1). */
static int64_t jquery(const char *json, const char *sql)
{
    sqlite3_stmt *stmt = json_sql(json, sql);
    int64_t v = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return v;
}

/* ---- running things ---- */

/* tp_server_sim traced into the world's directory; its exit status. */
static int run_sim(struct world *w, const char *const flags[], char **out)
{
    const char *argv[24] = {build_path("examples/tp_server_sim")};
    size_t n = 1;
    for (size_t i = 0; flags && flags[i]; i++) {
        ck_assert(n < 23);
        argv[n++] = flags[i];
    }
    argv[n] = NULL;
    w->extra_env[0] = "CUTRACE_FAKE_GPUS=8";
    struct run r = run_prog(w, true, argv, 120);
    int status = r.status;
    if (out)
        *out = strdup(r.out);
    run_free(&r);
    return status;
}

/* A cutrace command; stdout in *out (may be NULL), stderr in *err (may be NULL). */
static int run_cutrace(struct world *w, const char *const args[], char **out, char **err)
{
    const char *argv[24] = {build_path("cutrace")};
    size_t n = 1;
    for (size_t i = 0; args[i]; i++) {
        ck_assert(n < 23);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    struct run r = run_prog(w, false, argv, 60);
    int status = r.status;
    if (out)
        *out = strdup(r.out);
    if (err)
        *err = strdup(r.err);
    run_free(&r);
    return status;
}

/* `cutrace diff --json [opts] A B`: exit 0, nothing on stderr. */
static char *diff_json(struct world *w, const char *a, const char *b, const char *const opts[])
{
    const char *args[16] = {"diff", "--json"};
    size_t n = 2;
    for (size_t i = 0; opts && opts[i]; i++)
        args[n++] = opts[i];
    args[n++] = a;
    args[n++] = b;
    args[n] = NULL;
    char *out, *err;
    int status = run_cutrace(w, args, &out, &err);
    ck_assert_msg(status == 0 && err[0] == '\0', "exit %d: %s", status, err);
    free(err);
    return out;
}

/* The text report, every line within 120 columns. */
static char *diff_text(struct world *w, const char *a, const char *b, const char *const opts[])
{
    const char *args[16] = {"diff"};
    size_t n = 1;
    for (size_t i = 0; opts && opts[i]; i++)
        args[n++] = opts[i];
    args[n++] = a;
    args[n++] = b;
    args[n] = NULL;
    char *out, *err;
    int status = run_cutrace(w, args, &out, &err);
    ck_assert_msg(status == 0 && err[0] == '\0', "exit %d: %s", status, err);
    free(err);
    for (const char *p = out; *p;) {
        size_t len = strcspn(p, "\n");
        ck_assert_msg(len <= 120, "line of %zu columns: %.*s", len, (int)len, p);
        p += len + (p[len] == '\n');
    }
    return out;
}

/* `cutrace budget --framework sglang --mem-fraction-static 0.55 --json DIR`'s rest. */
static double budget_rest(struct world *w, const char *dir)
{
    const char *args[] = {"budget", "--framework", "sglang", "--mem-fraction-static",
                          "0.55",   "--json",      dir,      NULL};
    char *out;
    ck_assert_int_eq(run_cutrace(w, args, &out, NULL), 0);
    double rest = jdouble(out, "$.jobs[0].rest_gib");
    free(out);
    return rest;
}

/* rest_gib= of the sim's rank 0 line. */
static double sim_rest(const char *out)
{
    const char *at = strstr(out, "rank 0 sglang ");
    ck_assert_ptr_nonnull(at);
    at = strstr(at, " rest_gib=");
    ck_assert_ptr_nonnull(at);
    return strtod(at + strlen(" rest_gib="), NULL);
}

/* Whether text has needle once its line breaks and runs of blanks are
 * single blanks (sentences are wrapped at 120 columns). */
static bool has_flat(const char *text, const char *needle)
{
    char *flat = malloc(strlen(text) + 1), *o = flat;
    ck_assert_ptr_nonnull(flat);
    for (const char *p = text; *p; p++) {
        bool blank = *p == ' ' || *p == '\n';
        if (blank && o > flat && o[-1] == ' ')
            continue;
        *o++ = blank ? ' ' : *p;
    }
    *o = '\0';
    bool found = strstr(flat, needle) != NULL;
    free(flat);
    return found;
}

/* The extra allocations of the custom all-reduce before pre, on every rank:
 * exactly the two exported buffers and rank_data's segment, and the peers'
 * buffers mapped; their GPU memory is exactly what pre's free lost. */
static void check_custom_ar(const char *json, int64_t max)
{
    const int64_t gpu_bytes = (META + max) + max + RANK_DATA;
    /* rows of the phase before pre */
    ck_assert_int_eq(jquery(json, "SELECT count(*) FROM json_each(?1, '$.allocations') a"
                                  " WHERE json_extract(a.value, '$.phase') = '" PRE_PHASE "'"),
                     5);
    struct {
        const char *api, *category;
        int64_t size, per_rank;
    } rows[] = {
        {"cudaMalloc", "ipc_exported", META + max, 1},
        {"cudaMalloc", "ipc_exported", max, 1},
        {"cudaMalloc", "runtime", RANK_DATA, 1},
        {"cudaIpcOpenMemHandle", "peer", META + max, PEERS},
        {"cudaIpcOpenMemHandle", "peer", max, PEERS},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        char sql[1024];
        snprintf(sql, sizeof sql,
                 "SELECT count(*), sum(json_extract(a.value, '$.baseline_count')),"
                 " sum(json_extract(a.value, '$.other_count')),"
                 " sum(json_extract(a.value, '$.delta_bytes')),"
                 " min(json_extract(a.value, '$.pair_delta_min')),"
                 " max(json_extract(a.value, '$.pair_delta_max')),"
                 " min(json_extract(a.value, '$.pairs_changed')),"
                 " min(json_extract(a.value, '$.module'))"
                 " FROM json_each(?1, '$.allocations') a"
                 " WHERE json_extract(a.value, '$.phase') = '" PRE_PHASE "'"
                 " AND json_extract(a.value, '$.api') = '%s'"
                 " AND json_extract(a.value, '$.category') = '%s'"
                 " AND json_extract(a.value, '$.size') = %lld",
                 rows[i].api, rows[i].category, (long long)rows[i].size);
        sqlite3_stmt *stmt = json_sql(json, sql);
        ck_assert_msg(sqlite3_column_int64(stmt, 0) == 1, "no row %s %s %lld", rows[i].api,
                      rows[i].category, (long long)rows[i].size);
        ck_assert_int_eq(sqlite3_column_int64(stmt, 1), 0);
        ck_assert_int_eq(sqlite3_column_int64(stmt, 2), RANKS * rows[i].per_rank);
        ck_assert_int_eq(sqlite3_column_int64(stmt, 3), RANKS * rows[i].per_rank * rows[i].size);
        ck_assert_int_eq(sqlite3_column_int64(stmt, 4), rows[i].per_rank);
        ck_assert_int_eq(sqlite3_column_int64(stmt, 5), rows[i].per_rank);
        ck_assert_int_eq(sqlite3_column_int64(stmt, 6), RANKS);
        /* made by the program (through dlsym'd libcudart, or its allocator) */
        ck_assert_str_eq((const char *)sqlite3_column_text(stmt, 7), "tp_server_sim");
        sqlite3_finalize(stmt);
    }
    /* the phase adds up to that, per rank */
    ck_assert_int_eq(jquery(json, "SELECT count(*) FROM json_each(?1, '$.summary.phases') p"
                                  " WHERE json_extract(p.value, '$.phase') = '" PRE_PHASE "'"
                                  " AND json_extract(p.value, '$.same_on_every_pair')"),
                     1);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT json_extract(p.value, '$.per_pair.gpu_delta_bytes') FROM"
             " json_each(?1, '$.summary.phases') p WHERE json_extract(p.value, '$.phase') = '%s'",
             PRE_PHASE);
    ck_assert_int_eq(jquery(json, sql), gpu_bytes);
    /* pre, on every rank: free lost exactly that; nothing unexplained moved */
    ck_assert_int_eq(jquery(json, "SELECT count(*) FROM json_each(?1, '$.alignment') p,"
                                  " json_each(p.value, '$.steps') s"
                                  " WHERE json_extract(s.value, '$.milestone') ="
                                  " 'measurement 2 (pre)'"),
                     RANKS);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM json_each(?1, '$.alignment') p, json_each(p.value, '$.steps') s"
             " WHERE json_extract(s.value, '$.milestone') = 'measurement 2 (pre)'"
             " AND json_extract(s.value, '$.delta.free_bytes') = %lld"
             " AND json_extract(s.value, '$.delta.traced_bytes') = %lld"
             " AND json_extract(s.value, '$.delta.unexplained_bytes') = 0"
             " AND json_extract(s.value, '$.delta.live.ipc_exported') = %lld"
             " AND json_extract(s.value, '$.delta.live.runtime') = %lld"
             " AND json_extract(s.value, '$.delta.live.peer') = %lld",
             (long long)-gpu_bytes, (long long)gpu_bytes, (long long)(META + 2 * max),
             (long long)RANK_DATA, (long long)(PEERS * (META + 2 * max)));
    ck_assert_int_eq(jquery(json, sql), RANKS);
    ck_assert_str_eq(jtext(json, "$.summary.first_divergence.milestone"), "measurement 2 (pre)");
    ck_assert_int_eq(jint(json, "$.summary.first_divergence.delta_free_bytes"), -gpu_bytes);
    /* lineage: two buffers per rank, each mapped by the 7 others */
    ck_assert_int_eq(jint(json, "$.ipc.baseline.buffers_exported"), 0);
    ck_assert_int_eq(jint(json, "$.ipc.other.buffers_exported"), 2 * RANKS);
    ck_assert_int_eq(jint(json, "$.ipc.other.mappings"), 2 * RANKS * PEERS);
    ck_assert_int_eq(jint(json, "$.ipc.other.mappings_of_untraced_exports"), 0);
    ck_assert_int_eq(jquery(json, "SELECT count(*) FROM json_each(?1, '$.ipc.other.groups') g"
                                  " WHERE json_extract(g.value, '$.opened_by') ="
                                  " 'every other rank (7)'"
                                  " AND json_extract(g.value, '$.exporters') = 'ranks 0-7'"
                                  " AND json_extract(g.value, '$.buffers') = 8"
                                  " AND json_extract(g.value, '$.mappings') = 56"),
                     2);
    /* only the custom all-reduce's milestones are new */
    ck_assert_str_eq(jtext(json, "$.summary.milestones_only_in_other[0].milestone"), "IPC export");
    ck_assert_str_eq(jtext(json, "$.summary.milestones_only_in_other[1].milestone"), "IPC open");
    ck_assert_int_eq(jint(json, "$.summary.milestones_only_in_other[1].pairs"), RANKS);
    for (int p = 0; p < RANKS; p++) {
        char path[64];
        snprintf(path, sizeof path, "$.gpus.pairs[%d].matched_by", p);
        ck_assert_str_eq(jtext(json, path), "rank");
    }
    ck_assert_str_eq(jtext(json, "$.config.cmdline.added[0]"), "--custom-ar");
}

START_TEST(test_custom_allreduce_named_and_costed)
{
    struct world a, b;
    world_init(&a);
    world_init(&b);
    char *out_a, *out_b;
    ck_assert_int_eq(run_sim(&a, NULL, &out_a), 0);
    const char *flags[] = {"--custom-ar", "--custom-ar-max-size", "8M", NULL};
    ck_assert_int_eq(run_sim(&b, flags, &out_b), 0);
    const char *opts[] = {"--framework", "sglang", "--mem-fraction-static", "0.55", NULL};
    char *json = diff_json(&a, a.trace_dir, b.trace_dir, opts);
    check_custom_ar(json, 8 * MIB);
    /* the budget: the difference of the two budget reports, to the bit */
    double ra = budget_rest(&a, a.trace_dir), rb = budget_rest(&a, b.trace_dir);
    ck_assert(ra == sim_rest(out_a) && rb == sim_rest(out_b));
    ck_assert(jdouble(json, "$.budget.jobs[0].baseline.rest_gib") == ra);
    ck_assert(jdouble(json, "$.budget.jobs[0].other.rest_gib") == rb);
    ck_assert(jdouble(json, "$.budget.jobs[0].delta.rest_gib") == rb - ra);
    ck_assert_int_eq(jint(json, "$.budget.jobs[0].delta.min_pre_free_bytes"),
                     -(META + 16 * MIB + RANK_DATA));
    /* both fit: 2409 and 2412 tokens (examples/README.md) */
    ck_assert_int_eq(jint(json, "$.budget.jobs[0].baseline.tokens"), 2409);
    ck_assert_int_eq(jint(json, "$.budget.jobs[0].other.tokens"), 2412);
    free(json);
    char *text = diff_text(&a, a.trace_dir, b.trace_dir, opts);
    ck_assert_msg(has_flat(text, PRE_PHASE ", per rank: GPU memory +3 allocations (+36.0 MiB); "
                                           "+14 IPC mappings (+112.0 MiB) of peers' memory"),
                  "%s", text);
    ck_assert_msg(has_flat(text, "command line: B adds --custom-ar"), "%s", text);
    free(text);
    free(out_a);
    free(out_b);
    world_free(&a);
    world_free(&b);
}
END_TEST

/* The story's failing run: 256 MiB buffers flip SGLang's verdict. */
START_TEST(test_custom_allreduce_that_fails)
{
    struct world a, b;
    world_init(&a);
    world_init(&b);
    char *out_a, *out_b;
    ck_assert_int_eq(run_sim(&a, NULL, &out_a), 0);
    const char *flags[] = {"--custom-ar", "--custom-ar-max-size", "256M", NULL};
    ck_assert_int_eq(run_sim(&b, flags, &out_b), 1);
    const char *opts[] = {"--framework", "sglang", "--mem-fraction-static", "0.55", NULL};
    char *json = diff_json(&a, a.trace_dir, b.trace_dir, opts);
    check_custom_ar(json, 256 * MIB);
    double ra = budget_rest(&a, a.trace_dir), rb = budget_rest(&a, b.trace_dir);
    ck_assert(ra == sim_rest(out_a) && rb == sim_rest(out_b));
    ck_assert(jdouble(json, "$.budget.jobs[0].delta.rest_gib") == rb - ra);
    ck_assert_int_eq(jint(json, "$.budget.jobs[0].baseline.fits"), 1);
    ck_assert_int_eq(jint(json, "$.budget.jobs[0].other.fits"), 0);
    /* decomposed: the exported buffers before pre cost F times their size */
    ck_assert_str_eq(jtext(json, "$.budget.jobs[0].delta.changes[0].category"), "ipc_exported");
    ck_assert_int_eq(jint(json, "$.budget.jobs[0].delta.changes[0].delta_bytes"),
                     META + 2 * 256 * MIB);
    ck_assert(jdouble(json, "$.budget.jobs[0].delta.changes[0].effect_on_rest_gib") ==
              -((double)(META + 2 * 256 * MIB) * 0.55 / 1073741824.0));
    /* the failing run stopped after post: no KV pool, no capture */
    ck_assert_int_eq(
        jquery(json, "SELECT count(*) FROM json_each(?1,"
                     " '$.summary.milestones_only_in_baseline') m"
                     " WHERE json_extract(m.value, '$.milestone') LIKE 'CUDA-graph capture%'"),
        2);
    free(json);
    char *text = diff_text(&a, a.trace_dir, b.trace_dir, opts);
    ck_assert_msg(has_flat(text, "budget (sglang, F 0.55): rest 0.157715 -> -0.108496 GiB "
                                 "(-272.6 MiB); A: fits: 2409 tokens; B: Not enough memory."),
                  "%s", text);
    ck_assert_msg(has_flat(text, "first divergence > 16.0 MiB: measurement 2 (pre) on every rank "
                                 "(rank 0: free -532.0 MiB, traced +532.0 MiB, unexplained 0;"),
                  "%s", text);
    free(text);
    free(out_a);
    free(out_b);
    world_free(&a);
    world_free(&b);
}
END_TEST

/* Two runs of the same command: no spurious difference from pids,
 * pointers, times, unique ids or directories. */
START_TEST(test_identical_runs_match)
{
    struct world a, b;
    world_init(&a);
    world_init(&b);
    const char *flags[] = {"--custom-ar", "--custom-ar-max-size", "8M", NULL};
    ck_assert_int_eq(run_sim(&a, flags, NULL), 0);
    ck_assert_int_eq(run_sim(&b, flags, NULL), 0);
    const char *opts[] = {"--framework", "sglang", "--mem-fraction-static", "0.55", NULL};
    char *json = diff_json(&a, a.trace_dir, b.trace_dir, opts);
    ck_assert_int_eq(jint(json, "$.match"), 1);
    ck_assert_str_eq(jtext(json, "$.differences"), "[]");
    ck_assert_str_eq(jtext(json, "$.allocations"), "[]");
    ck_assert_int_eq(jquery(json, "SELECT count(*) FROM json_each(?1, '$.gpus.pairs')"), RANKS);
    ck_assert(jdouble(json, "$.budget.jobs[0].delta.rest_gib") == 0.0);
    free(json);
    char *text = diff_text(&a, a.trace_dir, b.trace_dir, opts);
    ck_assert_msg(has_flat(text, "the runs match: the same GPUs, milestones, memory"), "%s", text);
    free(text);
    world_free(&a);
    world_free(&b);
}
END_TEST

START_TEST(test_different_rank_counts)
{
    struct world a, b;
    world_init(&a);
    world_init(&b);
    const char *tp4[] = {"--tp", "4", NULL};
    ck_assert_int_eq(run_sim(&a, tp4, NULL), 0);
    ck_assert_int_eq(run_sim(&b, NULL, NULL), 0);
    char *json = diff_json(&a, a.trace_dir, b.trace_dir, NULL);
    ck_assert_int_eq(jint(json, "$.baseline.world"), 4);
    ck_assert_int_eq(jint(json, "$.other.world"), RANKS);
    ck_assert_int_eq(jquery(json, "SELECT count(*) FROM json_each(?1, '$.gpus.pairs')"), 4);
    ck_assert_int_eq(jquery(json, "SELECT count(*) FROM json_each(?1, '$.gpus.only_in_other')"), 4);
    ck_assert_int_eq(jint(json, "$.gpus.only_in_other[0].rank"), 4);
    free(json);
    char *text = diff_text(&a, a.trace_dir, b.trace_dir, NULL);
    ck_assert_msg(has_flat(text, "the runs have different rank counts: A 4, B 8"), "%s", text);
    ck_assert_msg(has_flat(text, "only in B: 4 GPUs (rank 4, rank 5, rank 6, rank 7)"), "%s", text);
    free(text);
    world_free(&a);
    world_free(&b);
}
END_TEST

/* Rank 3 of B killed after pre (its trace cut there), and, in a third run,
 * rank 5's trace deleted. */
START_TEST(test_killed_and_missing_rank)
{
    struct world a, b, c;
    world_init(&a);
    world_init(&b);
    world_init(&c);
    ck_assert_int_eq(run_sim(&a, NULL, NULL), 0);
    ck_assert_int_eq(run_sim(&b, NULL, NULL), 0);
    ck_assert_int_eq(run_sim(&c, NULL, NULL), 0);
    char **files;
    size_t n = list_traces(&b, &files);
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READWRITE);
        if (tsql_int(db, "SELECT rank FROM communicators LIMIT 1") == 3) {
            char *msg = NULL;
            ck_assert_int_eq(sqlite3_exec(db,
                                          "DELETE FROM events WHERE seq > (SELECT seq FROM meminfo"
                                          " ORDER BY seq LIMIT 1 OFFSET 1);"
                                          " UPDATE meta SET value = 'killed'"
                                          " WHERE key = 'end_state';",
                                          NULL, NULL, &msg),
                             SQLITE_OK);
        }
        sqlite3_close(db);
    }
    free_list(files, n);
    n = list_traces(&c, &files);
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        int64_t rank = tsql_int(db, "SELECT rank FROM communicators LIMIT 1");
        sqlite3_close(db);
        if (rank == 5)
            ck_assert_int_eq(unlink(files[i]), 0);
    }
    free_list(files, n);

    char *json = diff_json(&a, a.trace_dir, b.trace_dir, NULL);
    ck_assert_int_eq(jint(json, "$.other.killed"), 1);
    ck_assert_int_eq(jint(json, "$.other.unfinished_processes[0].rank"), 3);
    ck_assert_str_eq(jtext(json, "$.other.unfinished_processes[0].last_milestone"),
                     "measurement 2");
    ck_assert_int_eq(jquery(json, "SELECT count(*) FROM json_each(?1, '$.differences') d"
                                  " WHERE d.value IN ('ends', 'milestones')"),
                     2);
    free(json);
    char *text = diff_text(&a, a.trace_dir, b.trace_dir, NULL);
    ck_assert_msg(has_flat(text, "(rank 3) was killed (no clean exit) after measurement 2: its "
                                 "later milestones are missing"),
                  "%s", text);
    free(text);

    json = diff_json(&a, a.trace_dir, c.trace_dir, NULL);
    ck_assert_str_eq(jtext(json, "$.other.missing_ranks"), "[5]");
    ck_assert_int_eq(jint(json, "$.gpus.only_in_baseline[0].rank"), 5);
    free(json);
    text = diff_text(&a, a.trace_dir, c.trace_dir, NULL);
    ck_assert_msg(has_flat(text, "B has no trace of rank 5 (its communicator has 8 ranks)"), "%s",
                  text);
    free(text);
    world_free(&a);
    world_free(&b);
    world_free(&c);
}
END_TEST

START_TEST(test_bad_input)
{
    struct world a;
    world_init(&a);
    ck_assert_int_eq(run_sim(&a, NULL, NULL), 0);
    char *missing, *empty;
    ck_assert_int_ge(asprintf(&missing, "%s/nope", a.root), 0);
    ck_assert_int_ge(asprintf(&empty, "%s/empty", a.root), 0);
    ck_assert_int_eq(mkdir(empty, 0700), 0);
    struct {
        const char *first, *second, *needle;
        int status;
    } cases[] = {
        {missing, a.trace_dir, "no such file or directory", 1},
        {a.trace_dir, missing, "no such file or directory", 1},
        {a.trace_dir, a.trace_dir, "the same run: nothing to compare", 2},
        {a.trace_dir, empty, "no cutrace traces in this directory", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *args[] = {"diff", cases[i].first, cases[i].second, NULL};
        char *out, *err;
        int status = run_cutrace(&a, args, &out, &err);
        ck_assert_msg(status == cases[i].status, "case %zu: exit %d: %s", i, status, err);
        ck_assert_str_eq(out, "");
        ck_assert_uint_eq(count_lines(err), 1);
        ck_assert_msg(strncmp(err, "cutrace", 7) == 0 && strstr(err, cases[i].needle), "%s", err);
        free(out);
        free(err);
    }
    free(missing);
    free(empty);
    world_free(&a);
}
END_TEST

Suite *diff_suite(void)
{
    Suite *s = suite_create("diff");
    TCase *tc = tcase_create("diff");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_custom_allreduce_named_and_costed);
    tcase_add_test(tc, test_custom_allreduce_that_fails);
    tcase_add_test(tc, test_identical_runs_match);
    tcase_add_test(tc, test_different_rank_counts);
    tcase_add_test(tc, test_killed_and_missing_rank);
    tcase_add_test(tc, test_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
