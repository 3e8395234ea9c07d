/*
 * test_ls.c - `cutrace ls`: one line per process with its host, pid, rank
 * (NCCL's, else the launcher's RANK), LOCAL_RANK, WORLD_SIZE, GPUs, how it
 * ended, calls, peak GPU memory and command line; the shared filters,
 * --json, --csv and --fail-on-problem (a process killed or still running).
 */
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Suite *ls_suite(void); /* registered in test_main.c */

/* A rank of a launcher: RANK and friends in env, two allocations with a
 * free between (peak 3 GiB), ended as `end_state` says (NULL: no end
 * recorded, a process still running). */
static void rank_trace(const char *dir, int64_t pid, int rank, const char *end_state)
{
    char *path = fixture_trace_path(dir, "node1", pid, NORMAL_START_WALL + pid);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .ppid = 1,
                                .host = "node1",
                                .cmdline =
                                    "python3 -c from multiprocessing.spawn import spawn_main",
                                .start_wall_ns = NORMAL_START_WALL + pid,
                                .start_mono_ns = 1000000000ll + pid,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    char uuid[64];
    snprintf(uuid, sizeof(uuid), "GPU-00000000-0000-0000-0000-00000000000%d", rank);
    fixture_device(f, 0, uuid, "NVIDIA H100 80GB HBM3", 80 * GiB);
    char value[16];
    snprintf(value, sizeof(value), "%d", rank);
    fixture_exec(f, "DELETE FROM env WHERE name IN ('RANK', 'LOCAL_RANK', 'WORLD_SIZE')");
    char sql[256];
    snprintf(sql, sizeof(sql),
             "INSERT INTO env(name, value) VALUES ('RANK', '%d'), ('LOCAL_RANK', '%d'),"
             " ('WORLD_SIZE', '2')",
             rank, rank);
    fixture_exec(f, sql);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 2 * GiB, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f1000000000, 1 * GiB, 0);
    fixture_call(f, CT_API_cudaFree, 0, 0x7f0000000000, 0, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f2000000000, 512 * MiB, 0);
    if (end_state)
        fixture_meta(f, "end_state", end_state);
    else
        fixture_exec(f, "DELETE FROM meta WHERE key = 'end_state'");
    fixture_close(f);
    free(path);
}

static struct proc_result ls(const char *const *args, int status)
{
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == status, "exit %d (want %d); stderr:\n%.1500s", r.status, status,
                  r.err);
    ck_assert_msg(r.err_len == 0 || status != 0, "stderr not empty:\n%.1500s", r.err);
    return r;
}

START_TEST(test_one_line_per_process)
{
    char *dir = scratch_dir();
    rank_trace(dir, 7001, 0, "exit");
    rank_trace(dir, 7002, 1, "killed");
    struct proc_result r = ls((const char *[]){"ls", dir, NULL}, 0);
    assert_contains(r.out, "HOST");
    assert_contains(r.out, "PEAK GPU");
    /* pid, rank from RANK (no communicator), LOCAL_RANK, WORLD_SIZE, GPU 0/1,
     * ended, 4 calls, peak 3 GiB (2 + 1 before the free). RANK is the
     * launcher's (no communicator): in parentheses. */
    char *flat = squeeze(r.out);
    assert_contains(flat, "node1 7001 (0) 0 2 0 exited 4 3.00 GiB python3 -c from");
    assert_contains(flat, "node1 7002 (1) 1 2 1 killed 4 3.00 GiB python3 -c from");
    free(flat);
    assert_width(r.out, 120);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_json_csv_and_filters)
{
    char *dir = scratch_dir();
    rank_trace(dir, 7001, 0, "exit");
    rank_trace(dir, 7002, 1, NULL);
    struct proc_result r = ls((const char *[]){"ls", "--json", "--pid", "7002", dir, NULL}, 0);
    ck_assert(json_valid(r.out));
    char *j = compact(r.out);
    assert_contains(j,
                    "\"pid\":7002,\"rank\":null,\"env_rank\":1,\"local_rank\":1,\"world_size\":2,"
                    "\"gpus\":[1]");
    assert_contains(j, "\"end_state\":null,\"ended_cleanly\":false,\"calls\":4,"
                       "\"peak_gpu_bytes\":3221225472");
    ck_assert_ptr_null(strstr(j, "7001"));
    free(j);
    proc_result_free(&r);

    r = ls((const char *[]){"ls", "--csv", "--pid", "7001", dir, NULL}, 0);
    assert_contains(r.out, "file,host,pid,rank,env_rank,local_rank,world_size,gpus,end_state,"
                           "calls,peak_gpu_bytes,cmdline,exit_status,signal\r\n");
    assert_contains(r.out, ",node1,7001,,0,0,2,0,exit,4,3221225472,python3 -c from");
    ck_assert_ptr_null(strstr(r.out, "7002"));
    proc_result_free(&r);

    /* --rank matches the NCCL rank, as in every report: these have none. */
    r = ls((const char *[]){"ls", "--rank", "1", dir, NULL}, 2);
    assert_contains(r.err, "cutrace ls: --rank 1: no process of these traces matches");
    ck_assert_uint_eq(r.out_len, 0);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_fail_on_problem)
{
    char *dir = scratch_dir();
    rank_trace(dir, 7001, 0, "exit");
    rank_trace(dir, 7002, 1, "killed");
    struct proc_result r = ls((const char *[]){"ls", "--fail-on-problem", dir, NULL}, 3);
    assert_contains(r.out, "killed");
    proc_result_free(&r);
    r = ls((const char *[]){"ls", "--fail-on-problem", "--pid", "7001", dir, NULL}, 0);
    proc_result_free(&r);
    r = ls((const char *[]){"ls", dir, NULL}, 0);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

Suite *ls_suite(void)
{
    Suite *s = suite_create("ls");
    TCase *tc = tcase_create("ls");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_one_line_per_process);
    tcase_add_test(tc, test_json_csv_and_filters);
    tcase_add_test(tc, test_fail_on_problem);
    suite_add_tcase(s, tc);
    return s;
}
