/*
 * test_budget.c - the story's question, end to end: examples/tp_server_sim
 * starts like an 8-rank SGLang or vLLM server on the fake stack under the
 * tracer and prints the budget it computed itself; `cutrace budget` and
 * `cutrace timeline` must find the same numbers in the traces alone, to the
 * bit after float32 rounding, on every rank.
 *
 * The reports' JSON is read with SQLite's json_extract, so that a test
 * names the value it checks by its path in the documented output.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

enum { RANKS = 8, MAX_RANKS = 16 };
#define MIB                (1ll << 20)
#define FAKE_CONTEXT_BYTES (512 * MIB) /* CUTRACE_FAKE_CTX_MEM's default (docs/fakes.md) */

/* One rank's line of tp_server_sim: "rank R <framework> key=value ...". */
struct sim_line {
    bool seen;
    char text[2048];
};

/* The value of `key=` in a sim line, as text ("" when absent). */
static const char *sim_field(const struct sim_line *l, const char *key)
{
    static char value[128];
    char pattern[64];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *at = strstr(l->text, pattern);
    ck_assert_msg(at != NULL, "no %s in: %s", key, l->text);
    at += strlen(pattern);
    size_t n = strcspn(at, " \n");
    ck_assert(n < sizeof value);
    memcpy(value, at, n);
    value[n] = '\0';
    return value;
}

static int64_t sim_int(const struct sim_line *l, const char *key)
{
    return strtoll(sim_field(l, key), NULL, 10);
}

static double sim_double(const struct sim_line *l, const char *key)
{
    return strtod(sim_field(l, key), NULL); /* printed with %.17g: exact */
}

/* Splits the sim's stdout into its rank lines; returns how many. */
static int parse_sim(const char *out, struct sim_line lines[MAX_RANKS])
{
    memset(lines, 0, sizeof(struct sim_line) * MAX_RANKS);
    int count = 0;
    for (const char *p = out; *p;) {
        size_t n = strcspn(p, "\n");
        int rank;
        if (sscanf(p, "rank %d ", &rank) == 1) {
            ck_assert(rank >= 0 && rank < MAX_RANKS && !lines[rank].seen);
            ck_assert(n < sizeof lines[rank].text);
            memcpy(lines[rank].text, p, n);
            lines[rank].seen = true;
            count++;
        }
        p += n + (p[n] == '\n');
    }
    return count;
}

/* A JSON document held by an in-memory database for json_extract. */
struct json_doc {
    sqlite3 *db;
    const char *text;
};

static struct json_doc json_open(const char *text)
{
    struct json_doc d = {NULL, text};
    ck_assert_int_eq(sqlite3_open(":memory:", &d.db), SQLITE_OK);
    return d;
}

/* The value at a printf-formatted JSON path; fails the test when absent. */
static sqlite3_stmt *json_query(const struct json_doc *d, const char *fmt, va_list ap)
{
    char path[256];
    vsnprintf(path, sizeof path, fmt, ap);
    sqlite3_stmt *stmt;
    ck_assert_int_eq(sqlite3_prepare_v2(d->db, "SELECT json_type(?1, ?2), json_extract(?1, ?2)", -1,
                                        &stmt, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(stmt, 1, d->text, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, path, -1, SQLITE_TRANSIENT);
    ck_assert_int_eq(sqlite3_step(stmt), SQLITE_ROW);
    ck_assert_msg(sqlite3_column_type(stmt, 0) != SQLITE_NULL, "no %s in the report", path);
    return stmt;
}

#define JSON_VALUE(type, column_call)                                                              \
    va_list ap;                                                                                    \
    va_start(ap, fmt);                                                                             \
    sqlite3_stmt *stmt = json_query(d, fmt, ap);                                                   \
    va_end(ap);                                                                                    \
    type v = column_call;                                                                          \
    sqlite3_finalize(stmt);                                                                        \
    return v

static int64_t json_int(const struct json_doc *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int64_t json_int(const struct json_doc *d, const char *fmt, ...)
{
    JSON_VALUE(int64_t, sqlite3_column_int64(stmt, 1));
}

static double json_double(const struct json_doc *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static double json_double(const struct json_doc *d, const char *fmt, ...)
{
    JSON_VALUE(double, sqlite3_column_double(stmt, 1));
}

static char *json_text(const struct json_doc *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *json_text(const struct json_doc *d, const char *fmt, ...)
{
    JSON_VALUE(
        char *,
        strdup(sqlite3_column_text(stmt, 1) ? (const char *)sqlite3_column_text(stmt, 1) : ""));
}

static void json_close(struct json_doc *d)
{
    sqlite3_close(d->db);
}

/* Runs tp_server_sim traced with its flags; returns its exit status. */
static int run_sim(struct world *w, const char *const flags[], struct sim_line lines[MAX_RANKS],
                   char **err)
{
    const char *argv[24] = {build_path("examples/tp_server_sim")};
    size_t n = 1;
    for (size_t i = 0; flags[i]; i++) {
        ck_assert(n < 23);
        argv[n++] = flags[i];
    }
    argv[n] = NULL;
    w->extra_env[0] = "CUTRACE_FAKE_GPUS=8";
    struct run r = run_prog(w, true, argv, 120);
    ck_assert_int_eq(parse_sim(r.out, lines), RANKS);
    char **files;
    size_t ntraces = list_traces(w, &files);
    ck_assert_uint_eq(ntraces, RANKS); /* the launcher never touches CUDA */
    free_list(files, ntraces);
    int status = r.status;
    if (err)
        *err = strdup(r.err);
    run_free(&r);
    return status;
}

/* Runs a cutrace report; its stdout in *out, its exit status returned. */
static int run_report(struct world *w, const char *const args[], char **out)
{
    const char *argv[16] = {build_path("cutrace")};
    size_t n = 1;
    for (size_t i = 0; args[i]; i++) {
        ck_assert(n < 15);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    struct run r = run_prog(w, false, argv, 60);
    ck_assert_msg(r.err_len == 0 || r.status != 0, "unexpected stderr: %s", r.err);
    *out = strdup(r.out);
    int status = r.status;
    run_free(&r);
    return status;
}

/* The index of the rank's entry in jobs[0].ranks. */
static int rank_entry(const struct json_doc *d, int rank)
{
    for (int i = 0; i < RANKS; i++)
        if (json_int(d, "$.jobs[0].ranks[%d].rank", i) == rank)
            return i;
    ck_abort_msg("rank %d is not in the budget report", rank);
    return -1;
}

/* SGLang: the report reproduces every rank's pre/post, the MIN in float32,
 * rest to the bit, tokens and the verdict. */
static void check_sglang(const char *const sim_flags[], bool expect_fit, struct json_doc *out_doc,
                         char **out_json, struct world *w)
{
    struct sim_line lines[MAX_RANKS];
    char *err;
    int status = run_sim(w, sim_flags, lines, &err);
    ck_assert_int_eq(status, expect_fit ? 0 : 1);
    if (!expect_fit)
        ck_assert_ptr_nonnull(strstr(err, "Not enough memory. Please try to increase "
                                          "--mem-fraction-static."));
    free(err);

    const char *args[] = {"budget", "--framework", "sglang",     "--mem-fraction-static",
                          "0.55",   "--json",      w->trace_dir, NULL};
    char *json;
    ck_assert_int_eq(run_report(w, args, &json), 0);
    struct json_doc d = json_open(json);
    ck_assert_int_eq(json_int(&d, "$.jobs[0].nranks"), RANKS);
    ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks_analysed"), RANKS);
    ck_assert_int_eq(json_int(&d, "$.jobs[0].float32"), 1);
    for (int rank = 0; rank < RANKS; rank++) {
        const struct sim_line *l = &lines[rank];
        int e = rank_entry(&d, rank);
        ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].pre.free_bytes", e),
                         sim_int(l, "rank_pre_free"));
        ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].post.free_bytes", e),
                         sim_int(l, "rank_post_free"));
        /* what SGLang computed after the MIN, on this rank */
        ck_assert_int_eq(json_int(&d, "$.jobs[0].min_pre_free_bytes"), sim_int(l, "pre_bytes"));
        ck_assert_int_eq(json_int(&d, "$.jobs[0].min_post_free_bytes"), sim_int(l, "post_bytes"));
        ck_assert(json_double(&d, "$.jobs[0].pre_gib") == sim_double(l, "pre_gib"));
        ck_assert(json_double(&d, "$.jobs[0].post_gib") == sim_double(l, "post_gib"));
        double rest = json_double(&d, "$.jobs[0].rest_gib");
        ck_assert_msg(rest == sim_double(l, "rest_gib"), "rank %d: rest %.17g, the server %.17g",
                      rank, rest, sim_double(l, "rest_gib"));
        /* tokens before the page floor: the pool's own size from page size 2 on */
        if (json_int(&d, "$.pool.page_size") == 1)
            ck_assert_int_eq(json_int(&d, "$.jobs[0].tokens"), sim_int(l, "tokens"));
        if (sim_int(l, "fits"))
            ck_assert_int_eq(json_int(&d, "$.jobs[0].tokens"), sim_int(l, "kv_tokens"));
        ck_assert_int_eq(json_int(&d, "$.jobs[0].fits"), sim_int(l, "fits"));
    }
    *out_doc = d;
    *out_json = json;
}

START_TEST(test_sglang_baseline_fits_as_the_server_computed)
{
    struct world w;
    world_init(&w);
    const char *flags[] = {"--framework", "sglang", NULL};
    struct json_doc d;
    char *json;
    check_sglang(flags, true, &d, &json, &w);
    ck_assert(json_double(&d, "$.jobs[0].rest_gib") > 0);
    char *verdict = json_text(&d, "$.jobs[0].verdict");
    ck_assert_str_eq(verdict, "fits: 2409 tokens");
    free(verdict);
    /* the pool the formula predicts: tokens x cell size */
    ck_assert_int_eq(json_int(&d, "$.jobs[0].kv_predicted_bytes"), 2409ll * 70272);
    json_close(&d);
    free(json);
    world_free(&w);
}
END_TEST

/* --page-size 64 on the server's command line: SGLang floors the pool to
 * whole pages, and budget finds the flag there. */
START_TEST(test_sglang_page_size_from_the_command_line)
{
    struct world w;
    world_init(&w);
    const char *flags[] = {"--framework", "sglang", "--page-size", "64", NULL};
    struct json_doc d;
    char *json;
    check_sglang(flags, true, &d, &json, &w);
    ck_assert_int_eq(json_int(&d, "$.pool.page_size"), 64);
    char *source = json_text(&d, "$.pool.page_size_source");
    ck_assert_str_eq(source, "cmdline");
    free(source);
    char *verdict = json_text(&d, "$.jobs[0].verdict");
    ck_assert_str_eq(verdict, "fits: 2368 tokens"); /* 2409 // 64 * 64 */
    free(verdict);
    ck_assert_int_eq(json_int(&d, "$.jobs[0].kv_predicted_bytes"), 2368ll * 70272);
    json_close(&d);
    free(json);
    world_free(&w);
}
END_TEST

START_TEST(test_sglang_custom_allreduce_fails_as_the_server_did)
{
    struct world w;
    world_init(&w);
    const char *flags[] = {"--custom-ar", "--custom-ar-max-size", "256M", NULL};
    struct json_doc d;
    char *json;
    check_sglang(flags, false, &d, &json, &w);
    ck_assert(json_double(&d, "$.jobs[0].rest_gib") < 0);
    char *verdict = json_text(&d, "$.jobs[0].verdict");
    ck_assert_ptr_nonnull(strstr(verdict, "Not enough memory"));
    free(verdict);
    /* The smallest F that fits really fits, by the server's own arithmetic. */
    double f_min = json_double(&d, "$.jobs[0].f_min_rounded");
    ck_assert(f_min > 0.55 && f_min < 0.56);
    /* What pushed it under: the custom all-reduce's exported buffers, made
     * before pre, costing bytes * F. */
    char *conclusion = json_text(&d, "$.jobs[0].conclusion");
    ck_assert_msg(strstr(conclusion, "custom all-reduce") != NULL, "%s", conclusion);
    free(conclusion);
    int e = rank_entry(&d, 0);
    /* custom_all_reduce.py: cudaMalloc(meta_size + max_size) and cudaMalloc(max_size);
     * the sim's meta_size is 5120 B */
    int64_t exported = 2 * 256 * MIB + 5120;
    ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].pre.live.ipc_exported", e), exported);
    ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].pre.unexplained_bytes", e),
                     FAKE_CONTEXT_BYTES);
    /* 7 peers' two buffers each, mapped here: shown as peer, never counted */
    ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].pre.live.peer", e), 7 * exported);
    json_close(&d);
    free(json);

    /* The text report says it in words. */
    const char *args[] = {"budget", "--framework", "sglang", "--mem-fraction-static",
                          "0.55",   w.trace_dir,   NULL};
    char *text;
    ck_assert_int_eq(run_report(&w, args, &text), 0);
    ck_assert_ptr_nonnull(strstr(text, "verdict: Not enough memory"));
    ck_assert_ptr_nonnull(strstr(text, "custom all-reduce buffers (ipc_exported)"));
    free(text);
    world_free(&w);
}
END_TEST

static void check_vllm(const char *const sim_flags[])
{
    struct world w;
    world_init(&w);
    struct sim_line lines[MAX_RANKS];
    ck_assert_int_eq(run_sim(&w, sim_flags, lines, NULL), 0);
    const char *args[] = {"budget", "--framework", "vllm", "--json", w.trace_dir, NULL};
    char *json;
    ck_assert_int_eq(run_report(&w, args, &json), 0);
    struct json_doc d = json_open(json);
    for (int rank = 0; rank < RANKS; rank++) {
        const struct sim_line *l = &lines[rank];
        int e = rank_entry(&d, rank);
        ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].requested_bytes", e),
                         sim_int(l, "requested"));
        ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].weights_bytes", e),
                         sim_int(l, "weights"));
        ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].peak_activation_bytes", e),
                         sim_int(l, "peak_activation"));
        ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].non_torch_increase_bytes", e),
                         sim_int(l, "non_torch_increase"));
        ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks[%d].available_kv_bytes", e),
                         sim_int(l, "available_kv"));
    }
    json_close(&d);
    free(json);
    world_free(&w);
}

START_TEST(test_vllm_available_kv_as_the_server_computed)
{
    const char *flags[] = {"--framework", "vllm", NULL};
    check_vllm(flags);
}
END_TEST

/* NCCL memory taken during the profiling pass is vLLM's non-torch increase. */
START_TEST(test_vllm_non_torch_increase)
{
    const char *flags[] = {"--framework", "vllm", "--non-torch-size", "300000000", NULL};
    check_vllm(flags);
}
END_TEST

/* At every memory query the program made, unexplained = used - traced is
 * exactly the fake driver's context charge: nothing else is untraced. */
START_TEST(test_timeline_unexplained_is_the_context)
{
    struct world w;
    world_init(&w);
    struct sim_line lines[MAX_RANKS];
    const char *flags[] = {"--custom-ar", "--custom-ar-max-size", "8M", NULL}; /* fits */
    ck_assert_int_eq(run_sim(&w, flags, lines, NULL), 0);
    const char *args[] = {"timeline", "--json", w.trace_dir, NULL};
    char *json;
    ck_assert_int_eq(run_report(&w, args, &json), 0);
    struct json_doc d = json_open(json);
    sqlite3_stmt *stmt;
    ck_assert_int_eq(
        sqlite3_prepare_v2(d.db,
                           "SELECT count(*), count(DISTINCT g.key),"
                           " sum(json_extract(m.value, '$.measurement.unexplained_bytes') != ?2),"
                           " sum(json_extract(m.value, '$.measurement.used_bytes') !="
                           "     json_extract(m.value, '$.traced_bytes') + ?2)"
                           " FROM json_each(?1, '$.gpus') g, json_each(g.value, '$.milestones') m"
                           " WHERE json_extract(m.value, '$.kind') = 'measurement'",
                           -1, &stmt, NULL),
        SQLITE_OK);
    sqlite3_bind_text(stmt, 1, json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, FAKE_CONTEXT_BYTES);
    ck_assert_int_eq(sqlite3_step(stmt), SQLITE_ROW);
    /* SGLang measures 5 times per rank (docs/budget.md) */
    ck_assert_int_eq(sqlite3_column_int64(stmt, 0), 5 * RANKS);
    ck_assert_int_eq(sqlite3_column_int64(stmt, 1), RANKS);
    ck_assert_int_eq(sqlite3_column_int64(stmt, 2), 0);
    ck_assert_int_eq(sqlite3_column_int64(stmt, 3), 0);
    sqlite3_finalize(stmt);
    json_close(&d);
    free(json);

    /* The text timeline of one GPU fits 120 columns and names the milestones. */
    const char *text_args[] = {"timeline", "--gpu", "3", w.trace_dir, NULL};
    char *text;
    ck_assert_int_eq(run_report(&w, text_args, &text), 0);
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        ck_assert_msg(n <= 120, "line of %zu columns: %.*s", n, (int)n, p);
        p += n + (p[n] == '\n');
    }
    const char *expected[] = {
        "first call",       "NCCL init",           "IPC export",        "IPC open",
        "measurement",      "weight burst begins", "weight burst ends", "CUDA-graph capture begins",
        "first collective", "last event"};
    for (size_t i = 0; i < sizeof expected / sizeof *expected; i++)
        ck_assert_msg(strstr(text, expected[i]) != NULL, "no '%s' in:\n%s", expected[i], text);
    ck_assert_ptr_nonnull(strstr(text, "(rank 3"));
    free(text);
    world_free(&w);
}
END_TEST

/* A rank that is missing from the directory: the others are still analysed,
 * and the report says it assumed the MIN over the ranks it has. */
START_TEST(test_budget_with_a_rank_missing)
{
    struct world w;
    world_init(&w);
    struct sim_line lines[MAX_RANKS];
    const char *flags[] = {"--framework", "sglang", NULL};
    ck_assert_int_eq(run_sim(&w, flags, lines, NULL), 0);
    char **files;
    size_t n = list_traces(&w, &files);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    int64_t missing_rank =
        tsql_int(db, "SELECT rank FROM communicators WHERE api = 'ncclCommInitRank' LIMIT 1");
    sqlite3_close(db);
    ck_assert_int_eq(unlink(files[0]), 0);
    free_list(files, n);
    const char *args[] = {"budget", "--framework", "sglang",    "--mem-fraction-static",
                          "0.55",   "--json",      w.trace_dir, NULL};
    char *json;
    ck_assert_int_eq(run_report(&w, args, &json), 0);
    struct json_doc d = json_open(json);
    ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks_traced"), RANKS - 1);
    ck_assert_int_eq(json_int(&d, "$.jobs[0].ranks_analysed"), RANKS - 1);
    ck_assert_int_eq(json_int(&d, "$.jobs[0].missing_ranks[0]"), missing_rank);
    json_close(&d);
    free(json);
    world_free(&w);
}
END_TEST

Suite *budget_suite(void)
{
    Suite *s = suite_create("budget");
    TCase *tc = tcase_create("budget");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_sglang_baseline_fits_as_the_server_computed);
    tcase_add_test(tc, test_sglang_custom_allreduce_fails_as_the_server_did);
    tcase_add_test(tc, test_sglang_page_size_from_the_command_line);
    tcase_add_test(tc, test_vllm_available_kv_as_the_server_computed);
    tcase_add_test(tc, test_vllm_non_torch_increase);
    tcase_add_test(tc, test_timeline_unexplained_is_the_context);
    tcase_add_test(tc, test_budget_with_a_rank_missing);
    suite_add_tcase(s, tc);
    return s;
}
