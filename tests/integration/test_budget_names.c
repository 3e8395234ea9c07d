/*
 * test_budget_names.c - `cutrace budget` takes the measurements the
 * servers' own Python functions made, in the order current servers make
 * them: Python programs that start like SGLang about 0.5.16 with a draft
 * worker (tests/progs/stk_sglang_current.py) and vLLM V1 about 0.25-0.30
 * (stk_vllm_current.py) run traced on the fake GPU stack, and the report
 * must name the measurements the servers use, found here from the trace by
 * the order of the programs' calls (docs/budget.md, "How the measurements
 * are found").
 *
 * Each program runs twice: as the servers reach CUDA, through ctypes.CDLL,
 * which releases the GIL around each call (the tracer must read the Python
 * frames without it), and with --gil-held, through ctypes.PyDLL, which keeps
 * it.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

struct names_case {
    const char *script, *framework;
    const char *fraction;         /* --mem-fraction-static (SGLang), NULL none */
    size_t measurements;          /* the program's cudaMemGetInfo calls */
    size_t pre_index, post_index; /* which of them the server uses, 0-based */
    const char *pre_fn, *post_fn; /* the functions the report names */
};

/* SGLang: init_torch_distributed 3 (pre is the 2nd), load_model 3, the
 * draft's 3 + 3, _profile_available_bytes (post, the 13th), configure's. */
static const struct names_case sglang_case = {.script = "stk_sglang_current.py",
                                              .framework = "sglang",
                                              .fraction = "0.5",
                                              .measurements = 14,
                                              .pre_index = 1,
                                              .post_index = 12,
                                              .pre_fn = "init_torch_distributed",
                                              .post_fn = "_profile_available_bytes"};

/* vLLM: init_device (S0), memory_profiling's before and after profile_run
 * (S1, the 3rd), profile_cudagraph_memory's two. */
static const struct names_case vllm_case = {.script = "stk_vllm_current.py",
                                            .framework = "vllm",
                                            .measurements = 5,
                                            .pre_index = 0,
                                            .post_index = 2,
                                            .pre_fn = "init_device",
                                            .post_fn = "determine_available_memory"};

/* The seq of the program's index-th measurement. */
static int64_t measurement_seq(sqlite3 *db, size_t index)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT seq FROM meminfo ORDER BY seq LIMIT 1 OFFSET %zu", index);
    return tsql_int(db, sql);
}

static void check_names(const struct names_case *c, bool gil_held)
{
    struct world w;
    world_init(&w);
    char script[64];
    snprintf(script, sizeof script, "tests/progs/%s", c->script);
    const char *argv[] = {"/usr/bin/env", "python3", source_path(script),
                          gil_held ? "--gil-held" : NULL, NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_msg(r.status == 0, "%s exited %d:\n%s", c->script, r.status, r.err);
    ck_assert_str_eq(r.out, "ok\n");
    run_free(&r);

    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    free_list(files, 1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM meminfo"), (int64_t)c->measurements);
    int64_t pre = measurement_seq(db, c->pre_index), post = measurement_seq(db, c->post_index);
    int64_t python_frames = tsql_int(db, "SELECT count(*) FROM stacks WHERE kind = 'python'");
    sqlite3_close(db);

    const char *args[] = {"budget",    "--framework", c->framework,
                          "--json",    w.trace_dir,   c->fraction ? "--mem-fraction-static" : NULL,
                          c->fraction, NULL};
    r = harness_cutrace(&w, args);
    ck_assert_msg(r.status == 0, "cutrace budget exited %d:\n%s", r.status, r.err);
    char *choice = report_json_text(r.out, "$.jobs[0].ranks[0].choice");
    ck_assert_ptr_nonnull(choice);
    /* Without Python frames the weight burst chooses: say that first, it is
     * the tracer's problem, not the rules'. */
    ck_assert_msg(python_frames > 0,
                  "%s%s: the trace has no Python frames (calls made with the GIL %s); the "
                  "budget chose: %s",
                  c->script, gil_held ? " --gil-held" : "", gil_held ? "held" : "released", choice);
    ck_assert_msg(strstr(choice, ": chosen by the Python stacks (") != NULL, "choice: %s", choice);
    char made_in[128];
    snprintf(made_in, sizeof made_in, ", made in %s (", c->pre_fn);
    ck_assert_msg(strstr(choice, made_in) != NULL, "no \"%s\" in: %s", made_in, choice);
    snprintf(made_in, sizeof made_in, ", made in %s (", c->post_fn);
    ck_assert_msg(strstr(choice, made_in) != NULL, "no \"%s\" in: %s", made_in, choice);
    ck_assert_int_eq(report_json_int(r.out, "$.jobs[0].ranks[0].pre.seq"), pre);
    ck_assert_int_eq(report_json_int(r.out, "$.jobs[0].ranks[0].post.seq"), post);
    free(choice);
    run_free(&r);
    world_free(&w);
}

START_TEST(test_sglang_names_gil_held)
{
    check_names(&sglang_case, true);
}
END_TEST

START_TEST(test_sglang_names_gil_released)
{
    check_names(&sglang_case, false);
}
END_TEST

START_TEST(test_vllm_names_gil_held)
{
    check_names(&vllm_case, true);
}
END_TEST

START_TEST(test_vllm_names_gil_released)
{
    check_names(&vllm_case, false);
}
END_TEST

Suite *budget_names_suite(void)
{
    Suite *s = suite_create("budget_names");
    TCase *tc = tcase_create("budget_names");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sglang_names_gil_held);
    tcase_add_test(tc, test_sglang_names_gil_released);
    tcase_add_test(tc, test_vllm_names_gil_held);
    tcase_add_test(tc, test_vllm_names_gil_released);
    suite_add_tcase(s, tc);
    return s;
}
