/*
 * test_nvtx_phases.c - NVTX records (layer nvtx, docs/nvtx.md) as the
 * model's phases, on synthetic traces laid out as hook_nvtx.c writes
 * them: ranges paired per thread and domain, NCCL's own domain left out,
 * damaged records (a pop with nothing pushed, an end of an unknown range,
 * an empty message, a NUL inside one) that make no milestone or a named
 * one, never a crash; the timeline's names, the budget's pre and post
 * around a range that names the weights, and the public `nvtx` view.
 */
#include "model/milestones.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Suite *nvtx_phases_suite(void); /* registered in test_main.c */

#define GiB  (1ll << 30)
#define UUID "GPU-aaaaaaaa-0000-0000-0000-000000000000"

/* One NVTX record: message in the handle, its length in arg2 (len < 0: strlen). */
static int64_t nvtx(struct fixture *f, enum ct_api api, int64_t tid, int64_t domain, int64_t arg1,
                    const char *message, int len)
{
    struct fixture_event e = {.api = api, .device = 0, .tid = tid};
    e.arg[0] = domain;
    e.arg[1] = arg1;
    if (message) {
        e.handle = message;
        e.handle_len = len < 0 ? strlen(message) : (size_t)len;
        e.arg[2] = (int64_t)e.handle_len;
    }
    return fixture_event(f, &e);
}

/* The trace: a named weight phase of 2 GiB between two measurements, with
 * NCCL's domain, two threads' ranges interleaved and damaged records. */
static char *phase_trace(const char *dir, int64_t *pre, int64_t *post)
{
    char *path = fixture_trace_path(dir, "h", 100, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 100,
                                .ppid = 1,
                                .host = "h",
                                .cmdline = "python3 -m sglang.launch_server",
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = 1000,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_call(f, CT_API_cudaSetDevice, 0, 0, 0, 0);
    nvtx(f, CT_API_nvtxDomainCreate, 1, 1, 0, "NCCL", -1);
    *pre = fixture_meminfo(f, 0, 79 * GiB, 80 * GiB);
    nvtx(f, CT_API_nvtxRangePush, 1, 0, 0, "Load_Weights", -1);
    nvtx(f, CT_API_nvtxRangePush, 2, 0, 0, "other thread", -1);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x10000000, 2 * GiB, 0);
    /* NCCL's own per-call range: no phase. */
    nvtx(f, CT_API_nvtxRangePush, 1, 1, 0, "ncclAllReduce", -1);
    nvtx(f, CT_API_nvtxRangePop, 1, 1, 0, NULL, 0);
    nvtx(f, CT_API_nvtxRangePop, 1, 0, 0, NULL, 0); /* thread 1's: Load_Weights */
    *post = fixture_meminfo(f, 0, 77 * GiB, 80 * GiB);
    nvtx(f, CT_API_nvtxRangePop, 2, 0, 0, NULL, 0);
    nvtx(f, CT_API_nvtxRangePop, 2, 0, 0, NULL, 0);  /* nothing pushed */
    nvtx(f, CT_API_nvtxRangeEnd, 1, 0, 99, NULL, 0); /* no such range */
    nvtx(f, CT_API_nvtxRangeStart, 1, 0, 5, "", 0);
    nvtx(f, CT_API_nvtxRangeEnd, 3, 0, 5, NULL, 0); /* another thread may end it */
    nvtx(f, CT_API_nvtxMark, 1, 0, 0, "cut\0here", 8);
    /* A length past the handle's bytes reads what is there. */
    nvtx(f, CT_API_nvtxMark, 1, 0, 0, "short", 5);
    fixture_exec(f, "UPDATE events SET arg2 = 4000 WHERE seq = (SELECT max(seq) FROM events)");
    fixture_close(f);
    return path;
}

/* "name|name|..." of the timeline's rows on its one GPU. */
static char *timeline_names(const char *dir)
{
    const char *args[] = {"timeline", "--json", dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "timeline: %s", r.err);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT group_concat(json_extract(value, '$.name'), '|')"
                                        " FROM json_each(?1, '$.gpus[0].milestones')",
                                        -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(q, 1, r.out, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    char *names = strdup((const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    sqlite3_close(db);
    proc_result_free(&r);
    return names;
}

START_TEST(test_timeline_phases)
{
    char *dir = scratch_dir();
    int64_t pre, post;
    free(phase_trace(dir, &pre, &post));
    char *names = timeline_names(dir);
    assert_contains(names, "measurement 1|NVTX Load_Weights 1 begins|NVTX other thread 1 begins|"
                           "weight burst begins|weight burst ends|NVTX Load_Weights 1 ends|"
                           "measurement 2|NVTX other thread 1 ends|NVTX (no message) 1 begins|"
                           "NVTX (no message) 1 ends|NVTX mark cut 1|NVTX mark short 1|last event");
    ck_assert_msg(strstr(names, "nccl") == NULL, "%s", names);
    free(names);
    scratch_remove(dir);
}
END_TEST

/* The range that names the weights gives pre and post. */
START_TEST(test_budget_named_phase)
{
    char *dir = scratch_dir();
    int64_t pre, post;
    free(phase_trace(dir, &pre, &post));
    const char *args[] = {"budget", "--framework", "sglang", dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "budget: %s", r.err);
    char expected[200];
    snprintf(expected, sizeof expected, "pre = seq %lld, the last measurement before",
             (long long)pre);
    char *text = squeeze(r.out);
    assert_contains(text, expected);
    snprintf(expected, sizeof expected, "post = seq %lld,", (long long)post);
    assert_contains(text, expected);
    assert_contains(text, "the first after it (the weight burst is the program's NVTX range "
                          "Load_Weights)");
    free(text);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

/* The public view reads the same records. */
START_TEST(test_nvtx_view)
{
    char *dir = scratch_dir();
    int64_t pre, post;
    char *path = phase_trace(dir, &pre, &post);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT count(*), sum(domain = 'NCCL'), sum(kind = 'pop'),"
                                        " sum(kind = 'domain') FROM nvtx",
                                        -1, &q, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int64(q, 0), 13);
    ck_assert_int_eq(sqlite3_column_int64(q, 1), 3); /* its creation, push and pop */
    ck_assert_int_eq(sqlite3_column_int64(q, 2), 4);
    ck_assert_int_eq(sqlite3_column_int64(q, 3), 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* The moments the ranges give, by key. */
START_TEST(test_moment_keys)
{
    struct moment_spec at;
    const char *why;
    ck_assert(moment_parse("nvtx_begin:2", &at, &why));
    ck_assert_int_eq(at.kind, MOMENT_MILESTONE);
    ck_assert_int_eq(at.ms, MS_NVTX_BEGIN);
    ck_assert(moment_parse("nvtx_mark", &at, &why));
    ck_assert_int_eq(at.ms, MS_NVTX_MARK);
    ck_assert(ms_has_sub(MS_NVTX_END) && !ms_has_sub(MS_COMM_INIT));
    char *name = ms_name(MS_NVTX_END, 3, "step");
    ck_assert_str_eq(name, "NVTX step 3 ends");
    free(name);
    name = ms_name(MS_NVTX_MARK, 1, NULL);
    ck_assert_str_eq(name, "NVTX mark 1");
    free(name);
}
END_TEST

Suite *nvtx_phases_suite(void)
{
    Suite *s = suite_create("nvtx_phases");
    TCase *tc = tcase_create("nvtx_phases");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_timeline_phases);
    tcase_add_test(tc, test_budget_named_phase);
    tcase_add_test(tc, test_nvtx_view);
    tcase_add_test(tc, test_moment_keys);
    suite_add_tcase(s, tc);
    return s;
}
