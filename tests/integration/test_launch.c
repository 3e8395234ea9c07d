/*
 * test_launch.c - the `launch` suite: runs shaped like real servers under a
 * bare LD_PRELOAD + CUTRACE_DIR, where the flags are on a launcher that never
 * touches CUDA. tests/python/spawn_server.py starts one worker per rank with
 * multiprocessing's spawn, forkserver or fork method; each worker's trace
 * must hold the launcher's (redacted) command line among its ancestors, with
 * the forkserver between them for that method, so that `cutrace budget
 * --framework sglang` finds --mem-fraction-static on the launcher and says
 * so, and `cutrace diff` names the --enable-custom-all-reduce only the
 * launcher of run B had. Every method on one interpreter, spawn on every
 * CPython pythons.sh finds (an absent one is said "skipped"). Then the walk's
 * end: a chain of three shells whose top one lacks CUTRACE_DIR.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pythons.h"
#include "suites.h"

#define MAX_PYTHONS 8
#define TP          2
#define SECRET      "sk-launch-secret-0042"

static struct python pythons[MAX_PYTHONS];
static size_t npythons;
static char pythons_note[4096];

/* The interpreter every start method runs on: 3.12 when there, else the newest. */
static const struct python *main_python(void)
{
    for (size_t i = 0; i < npythons; i++)
        if (strcmp(pythons[i].version, "3.12") == 0)
            return &pythons[i];
    return npythons ? &pythons[npythons - 1] : NULL;
}

static void launch_world(struct world *w)
{
    world_init(w);
    w->extra_env[0] = "CUTRACE_FAKE_NCCL_TIMEOUT=30"; /* a rank that died fails the others soon */
}

/* Runs the launcher traced; fails the test unless it and every worker succeeded. */
static void run_server(struct world *w, const struct python *py, const char *method,
                       bool custom_all_reduce)
{
    const char *argv[] = {py->path,
                          source_path("tests/python/spawn_server.py"),
                          "--method",
                          method,
                          "--tp",
                          "2",
                          "--mem-fraction-static",
                          "0.7",
                          "--api-key",
                          SECRET,
                          custom_all_reduce ? "--enable-custom-all-reduce" : NULL,
                          NULL};
    struct run r = run_prog(w, true, argv, 120);
    ck_assert_msg(r.status == 0, "CPython %s, %s: launcher exited %d: %s", py->version, method,
                  r.status, r.err);
    ck_assert_uint_eq(count_lines(r.out), TP);
    run_free(&r);
}

/* What one worker's trace says about where it came from. */
struct lineage {
    char own[4096];
    int64_t ppid;
    int64_t depth_of_launcher; /* 0: no ancestor is the launcher */
    int64_t launcher_pid;
    int64_t ancestors;
    char first[4096], launcher[4096];
};

static struct lineage read_lineage(const char *trace, const char *method)
{
    struct lineage l = {0};
    sqlite3 *db = tsql_open(trace, SQLITE_OPEN_READONLY);
    snprintf(l.own, sizeof l.own, "%s", tsql_text(db, "SELECT cmdline FROM process"));
    l.ppid = tsql_int(db, "SELECT ppid FROM process");
    l.ancestors = tsql_int(db, "SELECT count(*) FROM ancestors");
    snprintf(l.first, sizeof l.first, "%s",
             tsql_text(db, "SELECT cmdline FROM ancestors WHERE depth = 1"));
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT depth FROM ancestors WHERE cmdline LIKE '%%spawn_server.py --method %s %%'"
             " ORDER BY depth LIMIT 1",
             method);
    l.depth_of_launcher = tsql_int(db, sql);
    if (l.depth_of_launcher == INT64_MIN)
        l.depth_of_launcher = 0;
    snprintf(sql, sizeof sql, "SELECT pid FROM ancestors WHERE depth = %lld",
             (long long)l.depth_of_launcher);
    l.launcher_pid = tsql_int(db, sql);
    snprintf(sql, sizeof sql, "SELECT cmdline FROM ancestors WHERE depth = %lld",
             (long long)l.depth_of_launcher);
    snprintf(l.launcher, sizeof l.launcher, "%s", tsql_text(db, sql));
    ck_assert_int_eq(tsql_int(db, "SELECT pid FROM ancestors WHERE depth = 1"), l.ppid);
    sqlite3_close(db);
    return l;
}

/*
 * The launcher left no trace, and each worker's names it: its own line as
 * the start method makes it, the launcher's redacted line at the depth the
 * method puts it (the forkserver between them), nothing above the launcher
 * (the test program that started it lacks CUTRACE_DIR). Returns the
 * launcher's pid and whether a worker's own line holds the flags (fork).
 */
static int64_t check_lineage(struct world *w, const struct python *py, const char *method)
{
    char **files;
    size_t n = list_traces(w, &files);
    ck_assert_msg(n == TP, "CPython %s, %s: %zu traces, expected one per worker", py->version,
                  method, n);
    int64_t depth = strcmp(method, "forkserver") == 0 ? 2 : 1, launcher = 0;
    for (size_t i = 0; i < n; i++) {
        struct lineage l = read_lineage(files[i], method);
        ck_assert_msg(l.depth_of_launcher == depth,
                      "CPython %s, %s: launcher at depth %lld, expected %lld (own %s; parent %s)",
                      py->version, method, (long long)l.depth_of_launcher, (long long)depth, l.own,
                      l.first);
        ck_assert_msg(l.ancestors == depth || getenv("CUTRACE_DIR"),
                      "%s: %lld ancestors recorded, the launcher is the top", method,
                      (long long)l.ancestors);
        ck_assert_ptr_nonnull(strstr(l.launcher, "--api-key '<redacted>'"));
        ck_assert_ptr_null(strstr(l.launcher, SECRET));
        ck_assert_ptr_nonnull(strstr(l.launcher, "--mem-fraction-static 0.7"));
        if (strcmp(method, "spawn") == 0) {
            ck_assert_ptr_nonnull(strstr(l.own, "from multiprocessing.spawn import spawn_main"));
            ck_assert_ptr_nonnull(strstr(l.own, "--multiprocessing-fork"));
        } else if (strcmp(method, "forkserver") == 0) {
            ck_assert_ptr_nonnull(strstr(l.first, "multiprocessing.forkserver"));
        } else {
            ck_assert_str_eq(l.own, l.launcher); /* a forked launcher */
        }
        ck_assert_ptr_null(strstr(l.own, SECRET));
        ck_assert(launcher == 0 || launcher == l.launcher_pid);
        launcher = l.launcher_pid;
    }
    free_list(files, n);
    return launcher;
}

/* `cutrace budget --framework sglang` with no --mem-fraction-static: the
 * launcher's value, said to be the launcher's (a forked worker's own line
 * is the launcher's and comes first). */
static void check_budget(struct world *w, const char *method, int64_t launcher)
{
    const char *json_args[] = {"budget", "--framework", "sglang", "--json", w->trace_dir, NULL};
    struct run r = harness_cutrace(w, json_args);
    ck_assert_msg(r.status == 0, "%s: budget exited %d: %s", method, r.status, r.err);
    char *source = report_json_text(r.out, "$.parameters.mem_fraction_static_source");
    ck_assert_str_eq(source, "cmdline");
    free(source);
    bool forked = strcmp(method, "fork") == 0;
    char *whose = report_json_text(r.out, "$.parameters.source_process");
    ck_assert_str_eq(whose, forked ? "own" : "launcher");
    free(whose);
    if (!forked)
        ck_assert_int_eq(report_json_int(r.out, "$.parameters.source_pid"), launcher);
    ck_assert_int_eq(report_json_int(r.out, "$.jobs[0].ranks_analysed"), TP);
    run_free(&r);

    const char *text_args[] = {"budget", "--framework", "sglang", w->trace_dir, NULL};
    r = harness_cutrace(w, text_args);
    ck_assert_int_eq(r.status, 0);
    char want[128];
    snprintf(want, sizeof want, "--mem-fraction-static 0.7 (from launcher pid %lld's command line)",
             (long long)launcher);
    ck_assert_msg(forked || strstr(r.out, want), "%s: no \"%s\" in:\n%s", method, want, r.out);
    run_free(&r);
}

static void say_pythons(void)
{
    for (const char *p = pythons_note; *p;) {
        size_t n = strcspn(p, "\n");
        fprintf(stderr, "launch: %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

static const char *const methods[] = {"spawn", "forkserver", "fork"};

/* Every start method on the main interpreter. */
START_TEST(test_start_methods)
{
    const struct python *py = main_python();
    if (!py) {
        fprintf(stderr, "launch: skipped: no CPython 3.10 or later\n");
        return;
    }
    struct world w;
    launch_world(&w);
    run_server(&w, py, methods[_i], false);
    int64_t launcher = check_lineage(&w, py, methods[_i]);
    check_budget(&w, methods[_i], launcher);
    world_free(&w);
}
END_TEST

/* spawn, the method SGLang and vLLM use, on every other interpreter. */
START_TEST(test_spawn_on_every_python)
{
    const struct python *py = &pythons[_i];
    if (py == main_python())
        return; /* test_start_methods ran it */
    struct world w;
    launch_world(&w);
    run_server(&w, py, "spawn", false);
    check_lineage(&w, py, "spawn");
    world_free(&w);
}
END_TEST

/* Run B's launcher adds --enable-custom-all-reduce; the workers' own lines
 * are alike: diff must name the flag. */
START_TEST(test_diff_names_the_launchers_flag)
{
    const struct python *py = main_python();
    if (!py) {
        fprintf(stderr, "launch: skipped: no CPython 3.10 or later\n");
        return;
    }
    struct world a, b;
    launch_world(&a);
    launch_world(&b);
    run_server(&a, py, "spawn", false);
    run_server(&b, py, "spawn", true);
    const char *json_args[] = {"diff", "--json", a.trace_dir, b.trace_dir, NULL};
    struct run r = harness_cutrace(&a, json_args);
    ck_assert_msg(r.status == 0 || r.status == 1, "diff exited %d: %s", r.status, r.err);
    char *added = report_json_text(r.out, "$.config.cmdline.added[0]");
    ck_assert_str_eq(added, "--enable-custom-all-reduce");
    free(added);
    run_free(&r);
    const char *text_args[] = {"diff", a.trace_dir, b.trace_dir, NULL};
    r = harness_cutrace(&a, text_args);
    ck_assert_msg(strstr(r.out, "B adds: --enable-custom-all-reduce"), "diff said:\n%s", r.out);
    ck_assert_ptr_null(strstr(r.out, SECRET));
    run_free(&r);
    world_free(&a);
    world_free(&b);
}
END_TEST

/*
 * The walk's end: T (no CUTRACE_DIR) starts S2 with it, S2 starts S1, S1
 * the worker. The worker's ancestors are S1 then S2, and not T: the process
 * that set CUTRACE_DIR is not part of the run.
 */
START_TEST(test_walk_stops_at_the_shell_that_set_the_run)
{
    struct world w;
    world_init(&w);
    char dir_env[4200], inner[4200];
    snprintf(dir_env, sizeof dir_env, "LAUNCH_TRACE_DIR=%s", w.trace_dir);
    snprintf(inner, sizeof inner, "LAUNCH_INNER=python3 '%s' worker; exit $?",
             source_path("tests/progs/run_workers.py"));
    w.extra_env[0] = dir_env;
    w.extra_env[1] = inner;
    w.extra_env[2] = "LAUNCH_MID=/bin/sh -c \"$LAUNCH_INNER\" s1; exit $?";
    w.extra_env[3] = "CUTRACE_DIR="; /* T starts without it */
    const char *argv[] = {
        "/bin/sh", "-c", "CUTRACE_DIR=\"$LAUNCH_TRACE_DIR\" /bin/sh -c \"$LAUNCH_MID\" s2; exit $?",
        "top-shell", NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_msg(r.status == 0, "chain exited %d: %s", r.status, r.err);
    run_free(&r);
    char **files;
    size_t n = list_traces(&w, &files);
    ck_assert_uint_eq(n, 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM ancestors"), 2);
    ck_assert_int_eq(tsql_int(db, "SELECT pid FROM ancestors WHERE depth = 1"),
                     tsql_int(db, "SELECT ppid FROM process"));
    ck_assert_ptr_nonnull(
        strstr(tsql_text(db, "SELECT cmdline FROM ancestors WHERE depth = 1"), "run_workers.py"));
    ck_assert_ptr_nonnull(
        strstr(tsql_text(db, "SELECT cmdline FROM ancestors WHERE depth = 2"), "LAUNCH_INNER"));
    ck_assert_int_eq(
        tsql_int(db, "SELECT count(*) FROM ancestors WHERE cmdline LIKE '%top-shell%'"), 0);
    ck_assert_int_gt(tsql_int(db, "SELECT start_ticks FROM ancestors WHERE depth = 2"), 0);
    sqlite3_close(db);
    free_list(files, n);
    world_free(&w);
}
END_TEST

Suite *launch_suite(void)
{
    npythons = pythons_find(pythons, MAX_PYTHONS, pythons_note, sizeof pythons_note);
    say_pythons();
    Suite *s = suite_create("launch");
    TCase *tc = tcase_create("launch");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_start_methods, 0, 3);
    tcase_add_loop_test(tc, test_spawn_on_every_python, 0, (int)npythons);
    tcase_add_test(tc, test_diff_names_the_launchers_flag);
    tcase_add_test(tc, test_walk_stops_at_the_shell_that_set_the_run);
    suite_add_tcase(s, tc);
    return s;
}
