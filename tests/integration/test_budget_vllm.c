/*
 * test_budget_vllm.c - vLLM's start-up as it is now, end to end: the
 * simulated vLLM server tests/progs/vllm_sim.py (a launcher that never
 * calls CUDA and spawns its workers, the flags on its command line only)
 * runs traced on the fake stack, one scenario per code path and failure,
 * and prints per rank the numbers its workers computed with vLLM's own
 * arithmetic; `cutrace budget --json` must find the same numbers in the
 * traces alone, equal as integers, and vLLM's own message text.
 *
 * The scenarios: the early failure of init_device from S0 alone, on both
 * paths; the profiling run on the older path (U 0.9, requested truncated)
 * at TP 2; the current path (U 0.92, requested = ceil) with the CUDA-graph
 * estimate applied by VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS and without;
 * and the max_model_len check's failure.
 */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pythons.h"
#include "suites.h"

enum { MAX_RANKS = 4, MAX_PYTHONS = 8 };
#define NUM_LAYERS  "32"
#define BLOCK_BYTES "65536" /* the sim's default --block-bytes */

static struct python pythons[MAX_PYTHONS];
static size_t npythons;
static char pythons_note[4096];

struct scenario {
    const char *sim[12];     /* vllm_sim.py's flags */
    const char *env;         /* one more variable for the run, NULL none */
    const char *budget[6];   /* cutrace budget's own options */
    int sim_status;          /* 0, or 1 when a worker raised */
    const char *path;        /* "older" or "current", as cutrace must say */
    const char *path_source; /* "trace", "option" or "default" */
};

/* The sim's JSON lines, by rank. */
static int sim_lines(const char *out, char *lines[MAX_RANKS])
{
    int n = 0;
    for (const char *p = out; *p;) {
        size_t len = strcspn(p, "\n");
        if (len && p[0] == '{') {
            char *line = strndup(p, len);
            int rank = (int)report_json_int(line, "$.rank");
            ck_assert(rank >= 0 && rank < MAX_RANKS && !lines[rank]);
            lines[rank] = line;
            n++;
        }
        p += len + (p[len] == '\n');
    }
    return n;
}

/* A JSON boolean of the report (json_type says "true" or "false"). */
static bool report_json_bool(const char *json, const char *path)
{
    sqlite3 *db;
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT json_type(?1, ?2)", -1, &q, NULL), SQLITE_OK);
    sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, path, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    const char *type = (const char *)sqlite3_column_text(q, 0);
    ck_assert_msg(type && (strcmp(type, "true") == 0 || strcmp(type, "false") == 0),
                  "%s is %s, not a boolean", path, type ? type : "absent");
    bool v = strcmp(type, "true") == 0;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

/* The JSON entry of the rank with this pid in the report's first job. */
static int rank_entry(const char *json, int64_t pid)
{
    for (int e = 0; e < MAX_RANKS; e++) {
        char path[64];
        snprintf(path, sizeof path, "$.jobs[0].ranks[%d].pid", e);
        if (report_json_int(json, path) == pid)
            return e;
    }
    ck_abort_msg("no rank with pid %lld", (long long)pid);
    return -1;
}

static void assert_same(const char *report, int entry, const char *key, const char *line,
                        const char *sim_key)
{
    char path[96], sim_path[64];
    snprintf(path, sizeof path, "$.jobs[0].ranks[%d].%s", entry, key);
    snprintf(sim_path, sizeof sim_path, "$.%s", sim_key);
    int64_t ours = report_json_int(report, path), theirs = report_json_int(line, sim_path);
    ck_assert_msg(ours == theirs, "%s: cutrace %lld, the server %lld", key, (long long)ours,
                  (long long)theirs);
}

static void assert_text(const char *report, const char *path, const char *expected)
{
    char *text = report_json_text(report, path);
    ck_assert_msg(text && strcmp(text, expected) == 0, "%s:\n  cutrace: %s\n  server:  %s", path,
                  text ? text : "(null)", expected);
    free(text);
}

/* The trace of rank r: its pid, from the trace file names' order of ranks. */
static int64_t pid_of_rank(const char *report, int rank)
{
    for (int e = 0; e < MAX_RANKS; e++) {
        char path[64];
        snprintf(path, sizeof path, "$.jobs[0].ranks[%d].rank", e);
        if (report_json_int(report, path) == rank) {
            snprintf(path, sizeof path, "$.jobs[0].ranks[%d].pid", e);
            return report_json_int(report, path);
        }
    }
    ck_abort_msg("no rank %d in the report", rank);
    return -1;
}

static void run_scenario(const struct scenario *s)
{
    ck_assert_msg(npythons > 0, "no interpreter");
    struct world w;
    world_init(&w);
    w.extra_env[0] = s->env;
    const char *argv[16] = {pythons[npythons - 1].path, source_path("tests/progs/vllm_sim.py")};
    size_t n = 2;
    for (size_t i = 0; s->sim[i]; i++)
        argv[n++] = s->sim[i];
    argv[n] = NULL;
    struct run r = run_prog(&w, true, argv, 120);
    ck_assert_msg(r.status == s->sim_status, "vllm_sim.py exited %d:\n%s", r.status, r.err);
    char *lines[MAX_RANKS] = {0};
    int nranks = sim_lines(r.out, lines);
    ck_assert_msg(nranks > 0, "no line from the sim:\n%s", r.out);
    run_free(&r);

    const char *args[12] = {"budget", "--framework", "vllm", "--json"};
    n = 4;
    for (size_t i = 0; s->budget[i]; i++)
        args[n++] = s->budget[i];
    args[n++] = w.trace_dir;
    args[n] = NULL;
    struct run b = harness_cutrace(&w, args);
    ck_assert_msg(b.status == 0, "cutrace budget exited %d:\n%s", b.status, b.err);
    const char *j = b.out;
    assert_text(j, "$.parameters.vllm_path", s->path);
    assert_text(j, "$.parameters.vllm_path_source", s->path_source);
    ck_assert_int_eq(report_json_int(j, "$.jobs[0].ranks_analysed"), nranks);
    for (int rank = 0; rank < nranks; rank++) {
        const char *line = lines[rank];
        ck_assert_ptr_nonnull(line);
        int e = rank_entry(j, pid_of_rank(j, rank));
        char *message = report_json_text(line, "$.message");
        bool early = message && strncmp(message, "Free memory", 11) == 0;
        assert_same(j, e, "pre.free_bytes", line, "s0_free");
        assert_same(j, e, "pre.total_bytes", line, "total");
        assert_same(j, e, "requested_bytes", line, "requested");
        if (!early) {
            assert_same(j, e, "weights_bytes", line, "weights");
            assert_same(j, e, "peak_activation_bytes", line, "peak_activation");
            assert_same(j, e, "non_torch_increase_bytes", line, "non_torch_increase");
            assert_same(j, e, "cuda_graph_measured_bytes", line, "graph_measured");
            assert_same(j, e, "cuda_graph_estimate_bytes", line, "graph_applied");
            assert_same(j, e, "available_kv_bytes", line, "available");
        } else {
            char path[64];
            snprintf(path, sizeof path, "$.jobs[0].ranks[%d].s0_only", e);
            ck_assert(report_json_bool(j, path));
        }
        if (rank == 0) { /* the job's verdict: rank 0's, the ranks agree */
            if (message) {
                assert_text(j, "$.jobs[0].verdict", message);
                ck_assert(!report_json_bool(j, "$.jobs[0].fits"));
            } else {
                ck_assert(report_json_bool(j, "$.jobs[0].fits"));
                ck_assert_int_eq(report_json_int(j, "$.jobs[0].blocks"),
                                 report_json_int(line, "$.blocks"));
                ck_assert_int_eq(report_json_int(j, "$.jobs[0].tokens"),
                                 report_json_int(line, "$.tokens"));
                ck_assert_int_eq(report_json_int(j, "$.jobs[0].max_model_len_needed_bytes"),
                                 report_json_int(line, "$.needed"));
            }
        }
        free(message);
    }
    for (int rank = 0; rank < MAX_RANKS; rank++)
        free(lines[rank]);
    run_free(&b);
    world_free(&w);
}

#define KV_SPEC "--num-layers", NUM_LAYERS, "--block-bytes", BLOCK_BYTES

/* init_device raises from S0 alone: the worker's trace ends there. */
START_TEST(test_early_failure_current)
{
    const struct scenario s = {
        .sim = {"--path", "current", "--gpu-memory-utilization", "0.999", NULL},
        .budget = {"--server-version", "0.20.0", NULL},
        .sim_status = 1,
        .path = "current",
        .path_source = "option"};
    run_scenario(&s);
}
END_TEST

START_TEST(test_early_failure_older)
{
    const struct scenario s = {
        .sim = {"--path", "older", "--gpu-memory-utilization", "0.999", NULL},
        .budget = {NULL},
        .sim_status = 1,
        .path = "older",
        .path_source = "default"};
    run_scenario(&s);
}
END_TEST

/* The profiling run on the older path, two ranks, NCCL memory in the pass. */
START_TEST(test_profile_run_older)
{
    const struct scenario s = {.sim = {"--path", "older", "--tensor-parallel-size", "2",
                                       "--non-torch-size", "300000000", "--max-model-len", "8192",
                                       NULL},
                               .budget = {KV_SPEC, NULL},
                               .path = "older",
                               .path_source = "default"};
    run_scenario(&s);
}
END_TEST

/* The current path: ceil, U 0.92, the graphs' estimate applied. */
START_TEST(test_graph_estimate_applied)
{
    const struct scenario s = {.sim = {"--path", "current", "--non-torch-size", "100000000",
                                       "--block-size", "32", "--max-model-len", "4096", NULL},
                               .env = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1",
                               .budget = {KV_SPEC, NULL},
                               .path = "current",
                               .path_source = "trace"};
    run_scenario(&s);
}
END_TEST

/* ... and measured but not applied when the environment does not say so. */
START_TEST(test_graph_estimate_not_applied)
{
    const struct scenario s = {.sim = {"--path", "current", "--max-model-len", "4096", NULL},
                               .env = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0",
                               .budget = {KV_SPEC, NULL},
                               .path = "current",
                               .path_source = "trace"};
    run_scenario(&s);
}
END_TEST

/* One request of max_model_len needs more than the KV cache gets. */
START_TEST(test_max_model_len_failure)
{
    const struct scenario s = {.sim = {"--path", "current", "--gpu-memory-utilization", "0.2",
                                       "--max-model-len", "100000000", NULL},
                               .budget = {KV_SPEC, NULL},
                               .sim_status = 1,
                               .path = "current",
                               .path_source = "trace"};
    run_scenario(&s);
}
END_TEST

Suite *budget_vllm_suite(void)
{
    npythons = pythons_find(pythons, MAX_PYTHONS, pythons_note, sizeof pythons_note);
    for (const char *p = pythons_note; *p;) {
        size_t n = strcspn(p, "\n");
        fprintf(stderr, "budget_vllm: %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
    Suite *s = suite_create("budget_vllm");
    TCase *tc = tcase_create("budget_vllm");
    tcase_set_timeout(tc, 240);
    if (npythons == 0) {
        fprintf(stderr, "budget_vllm: skipped: no Python interpreter found\n");
    } else {
        tcase_add_test(tc, test_early_failure_current);
        tcase_add_test(tc, test_early_failure_older);
        tcase_add_test(tc, test_profile_run_older);
        tcase_add_test(tc, test_graph_estimate_applied);
        tcase_add_test(tc, test_graph_estimate_not_applied);
        tcase_add_test(tc, test_max_model_len_failure);
    }
    suite_add_tcase(s, tc);
    return s;
}
