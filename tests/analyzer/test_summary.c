/*
 * test_summary.c - `cutrace summary` end to end: the built binary runs on
 * canned traces (scenarios.h) and its text and JSON must carry the known
 * answers; plus the CLI's option and help conventions, and summary's share
 * of the reports' conventions: its CSV tables, its filters (what is listed,
 * never what is computed), --fail-on-problem, narrow terminals.
 */
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct proc_result summary(const char *path, bool json)
{
    const char *args[] = {"summary", path, json ? "--json" : NULL, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "exit %d; stderr:\n%.1500s", r.status, r.err);
    ck_assert_msg(r.err_len == 0, "stderr not empty:\n%.1500s", r.err);
    if (json)
        ck_assert_msg(json_valid(r.out), "invalid JSON:\n%.1500s", r.out);
    return r;
}

START_TEST(test_normal_text)
{
    char *dir = scratch_dir();
    char *path = scenario_normal(dir);
    struct proc_result r = summary(dir, false);
    assert_width(r.out, 120);
    char *out = squeeze(r.out);
    assert_contains(out, ": 1 process\n");
    assert_contains(out, "\nProcess 4242 (parent 1) on node1\n");
    assert_contains(out, " command python3 -m sglang.launch_server --model-path llama\n");
    assert_contains(out,
                    " started 2025-01-05T10:11:12.345Z; calls span 12.1 us (first at +1.00 us)\n");
    assert_contains(out, " ended exited normally (exit)\n");
    assert_contains(out, " cuda runtime 12.8, driver 12.9\n");
    assert_contains(out, " calls 13 (2 failed, 1 nested)\n");
    assert_contains(out, " waited 5.00 us in 1 calls waiting for the tracer's buffer\n");
    assert_contains(out, " env CUDA_VISIBLE_DEVICES=0\n");
    assert_contains(out, " 0 " NORMAL_UUID " NVIDIA H100 80GB HBM3 80.00 GiB 0000:18:00.0\n");
    assert_contains(out, "\n Calls with no current device\n");
    assert_contains(out, " cudaSetDevice runtime 1 0 100 ns\n");
    assert_contains(out, "\n Device 0 (NVIDIA H100 80GB HBM3, " NORMAL_UUID ")\n");
    /* top-level calls, failed, bytes of successful calls, host time */
    assert_contains(out, " cudaMalloc runtime 4 1 7.00 MiB 400 ns\n");
    assert_contains(out, " cudaFree runtime 3 1 300 ns\n");
    assert_contains(out, " cudaIpcOpenMemHandle runtime 1 0 16.00 MiB 100 ns\n");
    /* The nested cudaMalloc apart, with the call it was made in. */
    assert_contains(out, "\n nested call layer inside calls failed bytes host time\n"
                         " cudaMalloc runtime cudaMallocManaged 1 0 1.00 MiB 50 ns\n");
    /* allocs, allocated, frees, freed, live at end, peak, when */
    assert_contains(out, " device 3 7.00 MiB 2 5.00 MiB 2.00 MiB 6.00 MiB seq 7 (+7.00 us)\n");
    assert_contains(out, " managed 1 1.00 MiB 0 0 B 1.00 MiB 1.00 MiB seq 12 (+12.0 us)\n");
    assert_contains(out,
                    " = GPU memory 4 8.00 MiB 2 5.00 MiB 3.00 MiB 6.00 MiB seq 7 (+7.00 us)\n");
    assert_contains(out, " host (pinned) 1 8.00 MiB 0 0 B 8.00 MiB 8.00 MiB seq 8 (+8.00 us)\n");
    assert_contains(out, " ipc (peer's) 1 16.00 MiB 0 0 B 16.00 MiB 16.00 MiB seq 11 (+11.0 us)\n");
    assert_contains(out, " last cudaMemGetInfo: seq 6 at +6.00 us: free 70.00 GiB of 80.00 GiB, "
                         "used 10.00 GiB\n");
    assert_contains(out,
                    " traced live device+managed+vmm then: 2.00 MiB; unexplained: 10.00 GiB\n");
    /* No caller in a recorded module: no module table, no lookups line. */
    ck_assert_ptr_null(strstr(out, "issued by"));
    ck_assert_ptr_null(strstr(out, "lookups"));
    assert_contains(out, " failed calls: 2\n");
    assert_contains(out, " 4 +4.00 us cudaMalloc 2 cudaErrorMemoryAllocation 100.00 GiB\n");
    assert_contains(out, " 10 +10.0 us cudaFree 1 cudaErrorInvalidValue 0 B\n");
    assert_contains(out, "\nAll traces: 1 process, 1 GPU by uuid, 13 calls, 2 failed\n");
    assert_contains(out,
                    " " NORMAL_UUID " NVIDIA H100 80GB HBM3 4242 10.00 GiB 2.00 MiB 10.00 GiB\n");
    ck_assert_ptr_null(strstr(out, "without a recorded uuid"));
    free(out);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_normal_json)
{
    char *dir = scratch_dir();
    char *path = scenario_normal(dir);
    struct proc_result r = summary(dir, true);
    char *j = compact(r.out);
    assert_contains(j, "{\"cutrace_version\":\"" CUTRACE_VERSION "\",\"report\":\"summary\"");
    assert_contains(j, "\"pid\":4242,\"ppid\":1,\"host\":\"node1\"");
    assert_contains(j, "\"cuda_runtime_version\":12080,\"cuda_driver_version\":12090");
    assert_contains(j, "\"start_wall_ns\":1736071872345000000,"
                       "\"start_time\":\"2025-01-05T10:11:12.345000000Z\"");
    assert_contains(j, "\"calls\":13,\"failed_calls\":2,\"nested_calls\":1,\"wait_ns\":5000,"
                       "\"waited_calls\":1");
    assert_contains(j, "\"env\":{\"CUDA_VISIBLE_DEVICES\":\"0\"}");
    assert_contains(j, "{\"api\":\"cudaMalloc\",\"layer\":\"runtime\",\"role\":\"alloc\","
                       "\"calls\":5,\"failed\":1,\"nested\":1,\"bytes\":8388608,\"dur_ns\":450}");
    assert_contains(j, "{\"api\":\"cudaFree\",\"layer\":\"runtime\",\"role\":\"free\","
                       "\"calls\":3,\"failed\":1,\"nested\":0,\"bytes\":null,\"dur_ns\":300}");
    assert_contains(j, "\"device\":{\"allocs\":3,\"allocated_bytes\":7340032,\"frees\":2,"
                       "\"freed_bytes\":5242880,\"live_allocs\":1,\"live_bytes\":2097152,"
                       "\"peak_bytes\":6291456,\"peak_seq\":7,\"peak_at_ns\":7000}");
    assert_contains(j, "\"managed\":{\"allocs\":1,\"allocated_bytes\":1048576,\"frees\":0,"
                       "\"freed_bytes\":0,\"live_allocs\":1,\"live_bytes\":1048576");
    assert_contains(j, "\"host\":{\"allocs\":1,\"allocated_bytes\":8388608,\"frees\":0,"
                       "\"freed_bytes\":0,\"live_allocs\":1,\"live_bytes\":8388608");
    assert_contains(j, "\"ipc\":{\"allocs\":1,\"allocated_bytes\":16777216,\"frees\":0,"
                       "\"freed_bytes\":0,\"live_allocs\":1,\"live_bytes\":16777216");
    assert_contains(j, "\"meminfo\":{\"seq\":6,\"at_ns\":6000,\"free_bytes\":75161927680,"
                       "\"total_bytes\":85899345920,\"used_bytes\":10737418240,"
                       "\"traced_live_bytes\":2097152,\"unexplained_bytes\":10735321088,"
                       "\"traced_live_by_kind\":{\"device\":2097152,\"managed\":0,\"vmm\":0}}");
    assert_contains(j, "{\"seq\":4,\"at_ns\":4000,\"api\":\"cudaMalloc\",\"layer\":\"runtime\","
                       "\"result\":2,\"result_name\":\"cudaErrorMemoryAllocation\","
                       "\"size\":107374182400,\"ptr\":\"0x0\",\"device\":0}");
    assert_contains(j, "{\"seq\":10,\"at_ns\":10000,\"api\":\"cudaFree\",\"layer\":\"runtime\","
                       "\"result\":1,\"result_name\":\"cudaErrorInvalidValue\",\"size\":0,"
                       "\"ptr\":\"0xdead\",\"device\":0}");
    assert_contains(j, "{\"device\":-1,\"uuid\":null");
    assert_contains(j, "\"gpus\":[{\"uuid\":\"" NORMAL_UUID "\",\"name\":\"NVIDIA H100 80GB HBM3\","
                       "\"pids\":[4242],\"meminfo\":{\"pid\":4242");
    assert_contains(j, "\"totals\":{\"processes\":1,\"gpus\":1,\"devices_without_uuid\":0,"
                       "\"calls\":13,\"failed_calls\":2}");
    free(j);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_output_is_deterministic)
{
    char *dir = scratch_dir();
    char *a = scenario_shared_gpu_first(dir, 0);
    char *b = scenario_shared_gpu_second(dir);
    for (int json = 0; json <= 1; json++) {
        struct proc_result r1 = summary(dir, json), r2 = summary(dir, json);
        ck_assert_uint_eq(r1.out_len, r2.out_len);
        ck_assert_mem_eq(r1.out, r2.out, r1.out_len);
        proc_result_free(&r1);
        proc_result_free(&r2);
    }
    free(a);
    free(b);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_pointer_reuse)
{
    char *dir = scratch_dir();
    char *path = scenario_pointer_reuse(dir);
    struct proc_result r = summary(path, true);
    char *j = compact(r.out);
    /* The second cudaMalloc at the same address ends the first: the peak is
     * 2 MiB, not 3 MiB, and nothing is left live. */
    assert_contains(j, "\"device\":{\"allocs\":2,\"allocated_bytes\":3145728,\"frees\":2,"
                       "\"freed_bytes\":3145728,\"live_allocs\":0,\"live_bytes\":0,"
                       "\"peak_bytes\":2097152,\"peak_seq\":2,");
    /* cudaFree of that address does not end the host allocation. */
    assert_contains(j, "\"host\":{\"allocs\":1,\"allocated_bytes\":4194304,\"frees\":0,"
                       "\"freed_bytes\":0,\"live_allocs\":1,\"live_bytes\":4194304");
    free(j);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* The start of device 0's `device` memory in the compact JSON summary. */
static char *device_stats(int64_t allocs, int64_t allocated, int64_t frees, int64_t freed,
                          int64_t live_allocs, int64_t live, int64_t peak, int64_t peak_seq)
{
    char *text = NULL;
    ck_assert_int_ge(asprintf(&text,
                              "\"device\":{\"allocs\":%lld,\"allocated_bytes\":%lld,\"frees\":%lld,"
                              "\"freed_bytes\":%lld,\"live_allocs\":%lld,\"live_bytes\":%lld,"
                              "\"peak_bytes\":%lld,\"peak_seq\":%lld,",
                              (long long)allocs, (long long)allocated, (long long)frees,
                              (long long)freed, (long long)live_allocs, (long long)live,
                              (long long)peak, (long long)peak_seq),
                     0);
    return text;
}

/* Frees that crossed another thread's allocation end what they freed
 * (scenarios.h: scenario_crossing): in the view, in the totals, the peak,
 * what is live at the measurement and at the end. */
START_TEST(test_crossing_frees_pair_in_effect_order)
{
    char *dir = scratch_dir();
    char *path = scenario_crossing(dir);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *stmt;
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT group_concat(pair, ' ') FROM (SELECT seq || ':' ||"
                                        " coalesce(free_seq, '-') || ':' || coalesce(free_api, '-')"
                                        " AS pair FROM allocations ORDER BY seq)",
                                        -1, &stmt, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(stmt), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(stmt, 0),
                     "1:4:cudaFree 2:6:cudaFree 3:-:- 5:7:cudaFree");
    sqlite3_finalize(stmt);
    sqlite3_close(db);

    struct proc_result r = summary(path, true);
    char *j = compact(r.out);
    char *stats = device_stats(4, CROSSING_ALLOCATED, 3, CROSSING_FREED, 1, CROSSING_LIVE,
                               CROSSING_PEAK, CROSSING_PEAK_SEQ);
    assert_contains(j, stats);
    free(stats);
    char expected[512];
    snprintf(expected, sizeof(expected),
             "\"used_bytes\":%lld,\"traced_live_bytes\":%lld,\"unexplained_bytes\":%lld,",
             CROSSING_USED, CROSSING_LIVE, CROSSING_USED - CROSSING_LIVE);
    assert_contains(j, expected);
    free(j);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* A format-5 trace (no ret_seq) is still read, and paired by seq as its
 * own views do: the same calls then leave nothing live. */
START_TEST(test_format5_pairs_by_seq)
{
    char *dir = scratch_dir();
    char *path = scenario_crossing(dir);
    fixture_downgrade(path, 5);
    struct proc_result r = summary(path, true);
    char *j = compact(r.out);
    assert_contains(j, "\"format_version\":5,");
    char *stats = device_stats(4, CROSSING_ALLOCATED, 4, CROSSING_ALLOCATED, 0, 0, CROSSING_PEAK,
                               CROSSING_PEAK_SEQ);
    assert_contains(j, stats);
    free(stats);
    free(j);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

static void check_shared_gpu(int first_exits)
{
    char *dir = scratch_dir();
    char *a = scenario_shared_gpu_first(dir, first_exits);
    char *b = scenario_shared_gpu_second(dir);
    struct proc_result r = summary(dir, true);
    char *j = compact(r.out);
    const char *expected =
        first_exits
            ? "\"used_bytes\":5368709120,\"traced_live_bytes\":2147483648,"
              "\"unexplained_bytes\":3221225472,\"traced_live_by_kind\":{\"device\":2147483648,"
              "\"managed\":0,\"vmm\":0}}"
            : "\"used_bytes\":5368709120,\"traced_live_bytes\":3221225472,"
              "\"unexplained_bytes\":2147483648,\"traced_live_by_kind\":{\"device\":3221225472,"
              "\"managed\":0,\"vmm\":0}}";
    char *gpu = strstr(j, "\"gpus\":[");
    ck_assert_ptr_nonnull(gpu);
    assert_contains(gpu, "{\"uuid\":\"" SHARED_UUID "\",\"name\":\"NVIDIA A100-SXM4-80GB\","
                         "\"pids\":[100,200],\"meminfo\":{\"pid\":200,");
    assert_contains(gpu, expected);
    /* Each process's own view: pid 200 alone explains 2 of its 5 GiB. */
    assert_contains(
        j, "\"used_bytes\":5368709120,\"traced_live_bytes\":2147483648,"
           "\"unexplained_bytes\":3221225472,\"traced_live_by_kind\":{\"device\":2147483648,"
           "\"managed\":0,\"vmm\":0}}");
    /* Processes in start order. */
    ck_assert_ptr_nonnull(strstr(j, "\"pid\":100,"));
    ck_assert(strstr(j, "\"pid\":100,") < strstr(j, "\"pid\":200,"));
    free(j);
    proc_result_free(&r);

    r = summary(dir, false);
    assert_contains(r.out, "All traces: 2 processes, 1 GPU by uuid");
    assert_contains(r.out, "1 other traced process on this GPU");
    assert_contains(r.out, SHARED_UUID);
    assert_contains(r.out, "100,200");
    assert_width(r.out, 120);
    proc_result_free(&r);
    free(a);
    free(b);
    scratch_remove(dir);
}

START_TEST(test_shared_gpu_sums_processes)
{
    check_shared_gpu(0);
}
END_TEST

START_TEST(test_shared_gpu_skips_exited_process)
{
    check_shared_gpu(1);
}
END_TEST

START_TEST(test_many_failed_calls)
{
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "node1", 5, 5);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    for (int i = 0; i < 25; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0, (int64_t)(i + 1) * GiB, 2);
    fixture_close(f);
    struct proc_result r = summary(dir, false);
    assert_contains(r.out, "failed calls: 25");
    assert_contains(r.out, "... and 5 more (all of them with --json)");
    ck_assert_ptr_null(strstr(r.out, "25.00 GiB")); /* the 25th is not listed */
    proc_result_free(&r);
    r = summary(dir, true);
    char *j = compact(r.out);
    assert_contains(j, "\"size\":26843545600"); /* ... but it is in JSON */
    free(j);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_trace_without_process_row_or_events)
{
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "gpu-host-7", 31337, 1700000000000000000ll);
    fixture_close(fixture_create(path, FIXTURE_DEFAULT));
    struct proc_result r = summary(dir, false);
    /* Identity recovered from the file name. */
    assert_contains(r.out, "Process 31337 on gpu-host-7");
    assert_contains(r.out, "2023-11-14T22:13:20.000Z; no calls recorded");
    proc_result_free(&r);
    r = summary(dir, true);
    char *j = compact(r.out);
    assert_contains(j, "\"pid\":31337,\"ppid\":null,\"host\":\"gpu-host-7\",\"cmdline\":null");
    assert_contains(j, "\"span_ns\":null");
    free(j);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_hostile_strings)
{
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "node1", 66, 66);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    char longcmd[600];
    memset(longcmd, 'x', sizeof(longcmd) - 1);
    longcmd[sizeof(longcmd) - 1] = '\0';
    const char *evil = "evil \x1b[2J\x1b]0;title\x07 \xff\xfe \"q\" \\ ";
    memcpy(longcmd, evil, strlen(evil));
    struct fixture_process p = {.pid = 66,
                                .host = "h\x1b[31m",
                                .cmdline = longcmd,
                                .start_wall_ns = 66,
                                .start_mono_ns = 1000};
    fixture_process(f, &p);
    fixture_device(f, 0, "GPU-\n\"weird\"", "name\twith\ttabs", 1024);
    fixture_env(f, "A\x1b", "b\nc");
    fixture_call(f, CT_API_cudaMalloc, 0, 1, 1, 0);
    fixture_close(f);

    struct proc_result r = summary(dir, false);
    ck_assert_ptr_null(memchr(r.out, '\x1b', r.out_len));
    ck_assert_ptr_null(memchr(r.out, '\x07', r.out_len));
    ck_assert_ptr_null(memchr(r.out, '\t', r.out_len));
    assert_contains(r.out, "...");
    assert_width(r.out, 120);
    proc_result_free(&r);
    r = summary(dir, true); /* validity is checked by summary() */
    char *j = compact(r.out);
    assert_contains(j, "\"host\":\"h\\u001b[31m\"");
    assert_contains(j, "\"uuid\":\"GPU-\\u000a\\\"weird\\\"\"");
    free(j);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_nulls_and_negative_values)
{
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "node1", 13, 13);
    struct fixture *f = fixture_create(path, FIXTURE_NULLABLE);
    struct fixture_process p = {.pid = 13, .start_wall_ns = 13, .start_mono_ns = 1000};
    fixture_process(f, &p);
    fixture_device(f, 0, NULL, NULL, -5);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x1000, -4096, 0); /* size >= 2^63 */
    fixture_call(f, CT_API_cudaMalloc, 0, 0x2000, 1 * MiB, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, -1, INT64_MAX, 0);     /* pointer 0xffff... */
    fixture_call(f, CT_API_cudaMalloc, 0, 0x3000, INT64_MAX, 0); /* totals saturate */
    fixture_call(f, CT_API_cudaFree, 0, 0x2000, 0, -7);
    fixture_meminfo(f, 0, -1, INT64_MIN);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x4000, 4096, 2);
    fixture_exec(f, "UPDATE events SET device = NULL, size = NULL, dur_ns = NULL,"
                    " t_ns = NULL, result = NULL, wait_ns = NULL WHERE seq = 2");
    fixture_exec(f, "UPDATE events SET ptr = NULL, tid = NULL, depth = NULL, api_id = NULL"
                    " WHERE seq = 5");
    fixture_exec(f, "UPDATE events SET dur_ns = -100, wait_ns = -5, t_ns = -9223372036854775807"
                    " WHERE seq = 1");
    fixture_exec(f, "UPDATE process SET cmdline = NULL, host = NULL, ppid = NULL,"
                    " cuda_runtime_version = NULL");
    fixture_exec(f, "INSERT INTO env(name, value) VALUES ('EMPTY', NULL)");
    fixture_close(f);

    struct proc_result r = summary(dir, true);
    char *j = compact(r.out);
    /* No negative byte counts leak out of garbage (only "unexplained" may be
     * negative, by definition). */
    char *p2 = j;
    while ((p2 = strstr(p2, "_bytes\":-")) != NULL) {
        ck_assert_msg(p2 - j >= 11 && strncmp(p2 - 11, "unexplained", 11) == 0, "%.1500s", p2);
        p2++;
    }
    assert_contains(j, "\"ptr\":\"0x4000\"");
    free(j);
    proc_result_free(&r);
    r = summary(dir, false);
    assert_contains(r.out, "Process 13");
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_cli_conventions)
{
    const char *version[] = {"--version", NULL};
    struct proc_result r = run_cutrace(version, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "cutrace " CUTRACE_VERSION "\n");
    proc_result_free(&r);

    const char *help[] = {"help", NULL};
    r = run_cutrace(help, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "  summary ");
    assert_contains(r.out, "  run ");
    proc_result_free(&r);

    const char *none[] = {NULL};
    r = run_cutrace(none, NULL);
    ck_assert_int_eq(r.status, 2);
    ck_assert_uint_eq(r.out_len, 0);
    proc_result_free(&r);

    const char *sub_help[] = {"summary", "--help", NULL};
    r = run_cutrace(sub_help, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "usage: cutrace summary");
    char *first = strdup(r.out);
    proc_result_free(&r);
    const char *help_sub[] = {"help", "summary", NULL};
    r = run_cutrace(help_sub, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, first);
    free(first);
    proc_result_free(&r);

    /* Usage errors: exit 2, one line on stderr, nothing on stdout. */
    const char *const *usage_errors[] = {
        (const char *[]){"bogus", NULL},
        (const char *[]){"--bogus", NULL},
        (const char *[]){"help", "bogus", NULL},
        (const char *[]){"summary", NULL},
        /* Several paths are one run (docs/cli.md, Several paths); an option
         * left without its value is still a usage error. */
        (const char *[]){"summary", "a", "b", "--rank", NULL},
        (const char *[]){"summary", "--bogus", "dir", NULL},
        (const char *[]){"summary", "-x", "dir", NULL},
        (const char *[]){"run", NULL},
        (const char *[]){"run", "-o", NULL},
        (const char *[]){"run", "--output", NULL},
    };
    for (size_t i = 0; i < sizeof(usage_errors) / sizeof(usage_errors[0]); i++) {
        r = run_cutrace(usage_errors[i], NULL);
        ck_assert_msg(r.status == 2, "case %zu: exit %d: %.1500s", i, r.status, r.err);
        ck_assert_msg(r.out_len == 0, "case %zu: stdout: %.1500s", i, r.out);
        ck_assert_msg(count_lines(r.err) == 1, "case %zu: stderr: %.1500s", i, r.err);
        proc_result_free(&r);
    }
    const char *unknown_long[] = {"summary", "--jsn", "dir", NULL};
    r = run_cutrace(unknown_long, NULL);
    assert_contains(r.err, "unknown option '--jsn'");
    proc_result_free(&r);

    /* Options may follow the directory. */
    char *dir = scratch_dir();
    char *path = scenario_pointer_reuse(dir);
    const char *late_option[] = {"summary", dir, "--json", NULL};
    r = run_cutrace(late_option, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert(json_valid(r.out));
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* ---- the shared conventions: --csv, filters, --fail-on-problem ---- */

static struct proc_result summary_args(const char *const *args, int status)
{
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == status, "exit %d, not %d; stderr:\n%.1500s", r.status, status, r.err);
    return r;
}

/* CRLF records of CSV text (none of these fields holds a newline). */
static size_t csv_rows(const char *text)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, "\r\n")); p += 2)
        n++;
    return n;
}

static size_t occurrences(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

START_TEST(test_csv_tables)
{
    char *dir = scratch_dir();
    char *path = scenario_normal(dir);
    /* processes: one row, raw numbers (13 calls, 2 failed, 2 MiB of device memory live). */
    struct proc_result r = summary_args((const char *[]){"summary", "--csv", dir, NULL}, 0);
    ck_assert_uint_eq(csv_rows(r.out), 2);
    ck_assert_uint_eq(csv_rows(r.out), count_lines(r.out));
    assert_contains(r.out, ",4242,");
    assert_contains(r.out, ",13,2,");
    /* GPU memory allocated, freed, live (device, managed, vmm); unknown and double frees. */
    assert_contains(r.out, ",8388608,5242880,3145728,0,0\r\n");
    ck_assert_ptr_null(strstr(r.out, "MiB"));
    proc_result_free(&r);
    /* gpus: the measurement in bytes (used 10 GiB, unexplained 10 GiB - 2 MiB). */
    r = summary_args((const char *[]){"summary", "--csv=gpus", dir, NULL}, 0);
    ck_assert_uint_eq(csv_rows(r.out), 2);
    assert_contains(r.out, "\r\n" NORMAL_UUID ",NVIDIA H100 80GB HBM3,1,4242,");
    assert_contains(r.out, ",10737418240,2097152,10735321088\r\n");
    proc_result_free(&r);
    /* apis: a row per API per device, as many as JSON's "apis" entries. */
    r = summary_args((const char *[]){"summary", "--csv=apis", dir, NULL}, 0);
    struct proc_result j = summary(dir, true);
    char *compact_json = compact(j.out);
    ck_assert_uint_eq(csv_rows(r.out) - 1, occurrences(compact_json, "\"nested\":"));
    ck_assert_uint_ge(csv_rows(r.out), 3);
    assert_contains(r.out, ",0,cudaMalloc,runtime,alloc,");
    free(compact_json);
    proc_result_free(&j);
    proc_result_free(&r);
    /* memory: the device kind of device 0, its peak at seq 7. */
    r = summary_args((const char *[]){"summary", "--csv=memory", dir, NULL}, 0);
    assert_contains(r.out, ",4242,0,device,");
    assert_contains(r.out, ",2097152,6291456,7,");
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_filters)
{
    char *dir = scratch_dir();
    scenario_nccl(dir, NCCL_SCENARIO_DEFAULT); /* ranks 0-3, pids 1000-1003, node1: 0-1 */
    struct proc_result r = summary_args((const char *[]){"summary", "--rank", "1", dir, NULL}, 0);
    assert_contains(r.out, ": 4 processes, 1 listed\n");
    assert_contains(r.out, "\nProcess 1001 ");
    ck_assert_ptr_null(strstr(r.out, "\nProcess 1000 "));
    ck_assert_ptr_null(strstr(r.out, "\nProcess 1002 "));
    assert_contains(r.out, "\nAll traces: 4 processes, 4 GPUs by uuid,"); /* totals: all */
    assert_contains(r.out, "GPU-00000001");
    ck_assert_ptr_null(strstr(r.out, "GPU-00000003"));
    proc_result_free(&r);

    r = summary_args((const char *[]){"summary", "--csv", "--host", "node2", dir, NULL}, 0);
    ck_assert_uint_eq(csv_rows(r.out), 3);
    assert_contains(r.out, ",1002,");
    assert_contains(r.out, ",1003,");
    ck_assert_ptr_null(strstr(r.out, ",1000,"));
    proc_result_free(&r);

    r = summary_args((const char *[]){"summary", "--json", "--pid", "1000,1003", dir, NULL}, 0);
    char *j = compact(r.out);
    assert_contains(j, "\"listed\":{\"processes\":2,\"gpus\":2}");
    assert_contains(j, "\"totals\":{\"processes\":4,\"gpus\":4,");
    ck_assert_uint_eq(occurrences(j, "\"format_version\":"), 2); /* one per process */
    free(j);
    proc_result_free(&r);

    /* --gpu: that GPU's process and device, and its row of the GPU table. */
    r = summary_args((const char *[]){"summary", "--csv=apis", "--gpu", "GPU-00000002", dir, NULL},
                     0);
    assert_contains(r.out, ",1002,");
    ck_assert_ptr_null(strstr(r.out, ",1001,"));
    proc_result_free(&r);
    r = summary_args((const char *[]){"summary", "--csv=gpus", "--gpu", "GPU-00000002", dir, NULL},
                     0);
    ck_assert_uint_eq(csv_rows(r.out), 2);
    assert_contains(r.out, "\r\nGPU-00000002-");
    proc_result_free(&r);

    /* Nothing matches, a bad list: usage errors before any output. */
    r = summary_args((const char *[]){"summary", "--rank", "9", dir, NULL}, 2);
    assert_contains(r.err, "cutrace summary: --rank 9: no process of these traces matches");
    ck_assert_uint_eq(r.out_len, 0);
    proc_result_free(&r);
    r = summary_args((const char *[]){"summary", "--pid", "x", dir, NULL}, 2);
    ck_assert_uint_eq(count_lines(r.err), 1);
    proc_result_free(&r);
    scratch_remove(dir);

    /* A GPU's numbers stay those of every process on it. */
    dir = scratch_dir();
    char *a = scenario_shared_gpu_first(dir, 0), *b = scenario_shared_gpu_second(dir);
    r = summary_args((const char *[]){"summary", "--csv=gpus", "--pid", "100", dir, NULL}, 0);
    assert_contains(r.out, "\r\n" SHARED_UUID ",");
    assert_contains(r.out, ",2,100 200,");
    assert_contains(r.out, ",3221225472,2147483648\r\n"); /* traced live 3 GiB, unexplained 2 */
    proc_result_free(&r);
    r = summary_args((const char *[]){"summary", "--csv", "--pid", "100", dir, NULL}, 0);
    ck_assert_uint_eq(csv_rows(r.out), 2);
    assert_contains(r.out, ",100,");
    proc_result_free(&r);
    free(a);
    free(b);
    scratch_remove(dir);
}
END_TEST

/* One process (pid) that allocates 1 MiB and, unless `leak`, frees it;
 * `failed` adds a failed cudaMalloc, `unknown` a successful free of a
 * pointer never allocated; end_state as given. */
static void problem_trace(const char *dir, int64_t pid, bool leak, bool failed, bool unknown,
                          const char *end_state)
{
    char *path = fixture_trace_path(dir, "node1", pid, NORMAL_START_WALL + pid);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid, .host = "node1", .start_wall_ns = NORMAL_START_WALL};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * MiB, 0);
    if (failed)
        fixture_call(f, CT_API_cudaMalloc, 0, 0, 200 * GiB, 2);
    if (unknown)
        fixture_call(f, CT_API_cudaFree, 0, 0x7f0000100000, 0, 0);
    if (!leak)
        fixture_call(f, CT_API_cudaFree, 0, 0x7f0000000000, 0, 0);
    fixture_meta(f, "end_state", end_state);
    fixture_close(f);
    free(path);
}

static int problem_status(bool leak, bool failed, bool unknown, const char *end_state)
{
    char *dir = scratch_dir();
    problem_trace(dir, 77, leak, failed, unknown, end_state);
    const char *args[] = {"summary", "--fail-on-problem", dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.out_len > 0, "no report; stderr:\n%s", r.err);
    int status = r.status;
    proc_result_free(&r);
    /* Without the option, never 3. */
    const char *plain[] = {"summary", "--csv", dir, NULL};
    r = run_cutrace(plain, NULL);
    ck_assert_int_eq(r.status, 0);
    proc_result_free(&r);
    scratch_remove(dir);
    return status;
}

START_TEST(test_fail_on_problem)
{
    ck_assert_int_eq(problem_status(false, false, false, "exit"), 0);
    ck_assert_int_eq(problem_status(false, true, false, "exit"), 3); /* a failed call */
    ck_assert_int_eq(problem_status(true, false, false, "exit"),
                     0); /* live at exit: torch's cache */
    ck_assert_int_eq(problem_status(true, false, false, "running"), 0); /* may still free it */
    ck_assert_int_eq(problem_status(false, false, true, "exit"), 3);    /* unknown free */
    ck_assert_int_eq(problem_status(false, false, true, "running"), 3);

    /* Only what is listed counts. */
    char *dir = scratch_dir();
    problem_trace(dir, 77, false, false, false, "exit");
    problem_trace(dir, 88, false, true, false, "exit");
    struct proc_result r =
        summary_args((const char *[]){"summary", "--fail-on-problem", "--pid", "77", dir, NULL}, 0);
    proc_result_free(&r);
    r = summary_args(
        (const char *[]){"summary", "--json", "--fail-on-problem", "--pid", "88", dir, NULL}, 3);
    ck_assert(json_valid(r.out)); /* the report is printed in full first */
    proc_result_free(&r);
    r = summary_args((const char *[]){"summary", "--fail-on-problem", dir, NULL}, 3);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

/* Text never cuts a number: at 40 columns the long lines wrap. */
START_TEST(test_narrow_never_cuts_numbers)
{
    char *dir = scratch_dir();
    scenario_nccl(dir, NCCL_SCENARIO_DEFAULT);
    const char *args[] = {"summary", "--pid", "1000", dir, NULL};
    struct proc_result wide = run_cutrace(args, NULL);
    struct proc_result narrow = run_cutrace(args, (const char *[]){"COLUMNS=40", NULL});
    ck_assert_int_eq(wide.status, 0);
    ck_assert_int_eq(narrow.status, 0);
    const char *nccl = strstr(wide.out, "\n  nccl       ");
    ck_assert_ptr_nonnull(nccl);
    ck_assert_ptr_null(strstr(narrow.out, nccl)); /* wrapped */
    /* Every word of the wide nccl line is in the narrow report. */
    const char *end = strchr(nccl + 1, '\n');
    char line[512];
    snprintf(line, sizeof(line), "%.*s", (int)(end - nccl - 14), nccl + 14);
    ck_assert_uint_gt(strlen(line), 40);
    for (char *save = NULL, *w = strtok_r(line, " ", &save); w; w = strtok_r(NULL, " ", &save))
        assert_contains(narrow.out, w);
    proc_result_free(&wide);
    proc_result_free(&narrow);
    scratch_remove(dir);
}
END_TEST

Suite *summary_suite(void)
{
    Suite *s = suite_create("summary");
    TCase *tc = tcase_create("summary");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_normal_text);
    tcase_add_test(tc, test_normal_json);
    tcase_add_test(tc, test_output_is_deterministic);
    tcase_add_test(tc, test_pointer_reuse);
    tcase_add_test(tc, test_crossing_frees_pair_in_effect_order);
    tcase_add_test(tc, test_format5_pairs_by_seq);
    tcase_add_test(tc, test_shared_gpu_sums_processes);
    tcase_add_test(tc, test_shared_gpu_skips_exited_process);
    tcase_add_test(tc, test_many_failed_calls);
    tcase_add_test(tc, test_trace_without_process_row_or_events);
    tcase_add_test(tc, test_hostile_strings);
    tcase_add_test(tc, test_nulls_and_negative_values);
    tcase_add_test(tc, test_cli_conventions);
    tcase_add_test(tc, test_csv_tables);
    tcase_add_test(tc, test_filters);
    tcase_add_test(tc, test_fail_on_problem);
    tcase_add_test(tc, test_narrow_never_cuts_numbers);
    suite_add_tcase(s, tc);
    return s;
}
