/*
 * test_ancestors.c - the launcher's command lines in the model: the loader
 * fills gm_process.ancestors from a trace's ancestors table (format 7),
 * parent first, and a trace of format 6 (no table) has none;
 * gm_launch_line walks own, ancestors, then the run's command; `cutrace
 * budget` finds --mem-fraction-static on a spawned worker's launcher and
 * says whose line it was.
 */
#include "model/gpumodel.h"
#include "model/traceset.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Suite *ancestors_suite(void); /* registered in test_main.c */

#define SPAWNED                                                                                    \
    "python3 -c 'from multiprocessing.spawn import spawn_main; spawn_main()' "                     \
    "--multiprocessing-fork"
#define LAUNCHER "python3 -m sglang.launch_server --tp 1 --mem-fraction-static 0.75"

/* A worker whose flags are on its launcher (pid 4000) only, with a weight
 * burst between two measurements so that budget has a rank. */
static char *worker_trace(const char *dir, int format)
{
    char *path = fixture_trace_path(dir, "node1", 4001, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 4001,
                                .ppid = 4000,
                                .host = "node1",
                                .cmdline = SPAWNED,
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = 1000000000ll,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, "GPU-00000000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3",
                   80 * GiB);
    fixture_exec(f, "INSERT INTO ancestors VALUES (1, 4000, 777, '" LAUNCHER "'),"
                    " (2, 3999, 700, 'bash run.sh')");
    fixture_meminfo(f, 0, 79 * GiB, 80 * GiB);
    for (int i = 0; i < 8; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000 + i * 0x10000000ll, 256 * MiB, 0);
    fixture_meminfo(f, 0, 77 * GiB, 80 * GiB);
    fixture_close(f);
    if (format < CT_FORMAT_VERSION)
        fixture_downgrade(path, format);
    return path;
}

START_TEST(test_loader_fills_ancestors_parent_first)
{
    char *dir = scratch_dir();
    free(worker_trace(dir, CT_FORMAT_VERSION));
    struct trace_set set;
    struct gm_model m;
    ck_assert_int_eq(gm_open_run(&m, &set, (const char *const[]){dir}, 1, 0), 0);
    ck_assert_uint_eq(m.nprocs, 1);
    const struct gm_process *p = &m.procs[0];
    ck_assert_uint_eq(p->nancestors, 2);
    ck_assert_int_eq(p->ancestors[0].pid, 4000);
    ck_assert_str_eq(p->ancestors[0].cmdline, LAUNCHER);
    ck_assert_int_eq(p->ancestors[1].pid, 3999);
    ck_assert_str_eq(gm_launch_line(&m, p, 0), SPAWNED);
    ck_assert_str_eq(gm_launch_line(&m, p, 1), LAUNCHER);
    ck_assert_str_eq(gm_launch_line(&m, p, 2), "bash run.sh");
    ck_assert_ptr_null(gm_launch_line(&m, p, 3));
    gm_free(&m);
    trace_set_close(&set);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_format_6_has_no_ancestors)
{
    char *dir = scratch_dir();
    free(worker_trace(dir, 6));
    struct trace_set set;
    struct gm_model m;
    ck_assert_int_eq(gm_open_run(&m, &set, (const char *const[]){dir}, 1, 0), 0);
    ck_assert_uint_eq(m.procs[0].nancestors, 0);
    ck_assert_str_eq(gm_launch_line(&m, &m.procs[0], 0), SPAWNED);
    ck_assert_ptr_null(gm_launch_line(&m, &m.procs[0], 1));
    gm_free(&m);
    trace_set_close(&set);
    /* ... so budget finds no F on a line: it replays SGLang's own choice of
     * F (issue 18; it used to ask for the option). */
    const char *args[] = {"budget", "--framework", "sglang", "--json", dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_ptr_nonnull(strstr(r.out, "\"mem_fraction_static_source\": \"derived\""));
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_budget_takes_the_launchers_flag)
{
    char *dir = scratch_dir();
    free(worker_trace(dir, CT_FORMAT_VERSION));
    const char *args[] = {"budget", "--framework", "sglang", dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(
        strstr(r.out, "--mem-fraction-static 0.75 (from launcher pid 4000's command line)"), "%s",
        r.out);
    proc_result_free(&r);
    const char *json[] = {"budget", "--framework", "sglang", "--json", dir, NULL};
    r = run_cutrace(json, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\"mem_fraction_static_source\": \"cmdline\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"source_pid\": 4000,"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"source_process\": \"launcher\""));
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

Suite *ancestors_suite(void)
{
    Suite *s = suite_create("ancestors");
    TCase *tc = tcase_create("ancestors");
    tcase_add_test(tc, test_loader_fills_ancestors_parent_first);
    tcase_add_test(tc, test_format_6_has_no_ancestors);
    tcase_add_test(tc, test_budget_takes_the_launchers_flag);
    suite_add_tcase(s, tc);
    return s;
}
