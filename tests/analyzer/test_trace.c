/*
 * test_trace.c - opening and querying traces in-process (analyzer/model/trace.c):
 * metadata, the apis table, bound parameters, the saturating sum, file
 * ordering, and reading a trace whose writer is still running.
 */
#include "scenarios.h"
#include "test_support.h"
#include "model/trace.h"
#include "model/traceset.h"
#include "trace_fixture.h"

#include "cutrace/format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_open_valid_trace)
{
    char *dir = scratch_dir();
    char *path = scenario_normal(dir);
    struct trace t;
    ck_assert_int_eq(trace_open(&t, path), 0);
    ck_assert_str_eq(t.error, "");
    ck_assert_int_eq(t.format_version, CT_FORMAT_VERSION);
    ck_assert_str_eq(t.producer, "libcutrace 0.1.0-test");
    ck_assert_str_eq(t.end_state, "exit");
    ck_assert_uint_eq(t.napis, CT_API_COUNT - 1);
    ck_assert_str_eq(trace_api_name(&t, CT_API_cudaMalloc), "cudaMalloc");
    ck_assert_ptr_null(trace_api_name(&t, 9999));
    const struct trace_api *api = trace_api_by_name(&t, "cudaIpcOpenMemHandle");
    ck_assert_ptr_nonnull(api);
    ck_assert_str_eq(api->role, "alloc");
    ck_assert_str_eq(api->kind, "ipc");
    ck_assert_ptr_null(trace_api_by_name(&t, "cuNothing"));

    sqlite3_stmt *stmt = trace_query(&t, "SELECT count(*) FROM calls WHERE api = ? AND size >= ?",
                                     "ti", "cudaMalloc", (int64_t)(2 * MiB));
    ck_assert_ptr_nonnull(stmt);
    ck_assert_int_eq(trace_step(&t, stmt), 1);
    ck_assert_int_eq(col_int(stmt, 0, -1), 3); /* B, C and the failed 100 GiB */
    ck_assert_int_eq(trace_step(&t, stmt), 0);
    sqlite3_finalize(stmt);
    trace_close(&t);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_bound_parameters_are_data)
{
    char *dir = scratch_dir();
    char *path = scenario_normal(dir);
    struct trace t;
    ck_assert_int_eq(trace_open(&t, path), 0);
    const char *hostile = "x'; DROP TABLE meta; --";
    sqlite3_stmt *stmt = trace_query(&t, "SELECT ?, ?, ?", "tnt", hostile, NULL);
    ck_assert_ptr_nonnull(stmt);
    ck_assert_int_eq(trace_step(&t, stmt), 1);
    char *echoed = col_text(stmt, 0);
    ck_assert_str_eq(echoed, hostile);
    free(echoed);
    ck_assert(col_is_null(stmt, 1));
    ck_assert(col_is_null(stmt, 2));
    ck_assert_int_eq(col_int(stmt, 1, -7), -7);
    sqlite3_finalize(stmt);

    /* A syntax error is reported, not crashed on. */
    ck_assert_ptr_null(trace_query(&t, "SELEC nonsense", ""));
    ck_assert_ptr_nonnull(strstr(t.error, "sqlite"));
    trace_close(&t);
    free(path);
    scratch_remove(dir);
}
END_TEST

static int64_t scalar(struct trace *t, const char *sql)
{
    sqlite3_stmt *stmt = trace_query(t, sql, "");
    ck_assert_msg(stmt != NULL, "%s", t->error);
    ck_assert_int_eq(trace_step(t, stmt), 1);
    int64_t v = col_int(stmt, 0, -1);
    sqlite3_finalize(stmt);
    return v;
}

START_TEST(test_saturating_sum)
{
    char *dir = scratch_dir();
    char *path = scenario_normal(dir);
    struct trace t;
    ck_assert_int_eq(trace_open(&t, path), 0);
    ck_assert_int_eq(scalar(&t, "SELECT ct_sum(v) FROM (SELECT 1 AS v UNION ALL SELECT 2)"), 3);
    ck_assert_int_eq(scalar(&t, "SELECT ct_sum(v) FROM (SELECT 9223372036854775807 AS v"
                                " UNION ALL SELECT 5 UNION ALL SELECT -3 UNION ALL SELECT NULL)"),
                     INT64_MAX);
    ck_assert_int_eq(scalar(&t, "SELECT ct_sum(v) FROM (SELECT -5 AS v UNION ALL SELECT 'x'"
                                " UNION ALL SELECT 2.5 UNION ALL SELECT 4)"),
                     4);
    ck_assert_int_eq(scalar(&t, "SELECT ct_sum(seq) FROM calls WHERE 0"), 0);
    trace_close(&t);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_set_orders_files_by_name)
{
    char *dir = scratch_dir();
    char *first = fixture_trace_path(dir, "b-host", 2, 1);
    char *second = fixture_trace_path(dir, "a-host", 1, 2);
    fixture_close(fixture_create(first, FIXTURE_DEFAULT));
    fixture_close(fixture_create(second, FIXTURE_DEFAULT));
    /* Files the analyzer must not take for traces (rings: test_recover.c). */
    char *ring = NULL;
    ck_assert_int_ge(asprintf(&ring, "%s/a-host-1-2.db.bak", dir), 0);
    write_file(ring, "ring", 4);
    struct trace_set set;
    ck_assert_int_eq(trace_set_open(&set, dir), 0);
    ck_assert_uint_eq(set.count, 2);
    ck_assert_str_eq(set.traces[0].file, "a-host-1-2.db");
    ck_assert_str_eq(set.traces[1].file, "b-host-2-1.db");
    trace_set_close(&set);

    /* One file may be named instead of a directory. */
    ck_assert_int_eq(trace_set_open(&set, first), 0);
    ck_assert_uint_eq(set.count, 1);
    ck_assert_str_eq(set.traces[0].path, first);
    trace_set_close(&set);
    free(ring);
    free(first);
    free(second);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_reads_trace_of_running_writer)
{
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "node1", 9, 9);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_meta(f, "end_state", "running");
    fixture_call(f, CT_API_cudaMalloc, 0, 0x1000, 4096, 0);
    fixture_flush(f); /* committed to the -wal file, never checkpointed */

    struct trace t;
    ck_assert_int_eq(trace_open(&t, path), 0);
    ck_assert_str_eq(t.end_state, "running");
    ck_assert_int_eq(scalar(&t, "SELECT count(*) FROM allocations"), 1);

    /* Later writes stay invisible: one snapshot per report. */
    fixture_call(f, CT_API_cudaMalloc, 0, 0x2000, 4096, 0);
    fixture_flush(f);
    ck_assert_int_eq(scalar(&t, "SELECT count(*) FROM allocations"), 1);
    trace_close(&t);
    fixture_close(f);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_open_failure_sets_error_only)
{
    char *dir = scratch_dir();
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/x.db", dir), 0);
    write_file(path, "not sqlite at all, just text\n", 29);
    struct trace t;
    ck_assert_int_eq(trace_open(&t, path), -1);
    ck_assert_ptr_nonnull(strstr(t.error, "not an SQLite database"));
    ck_assert_ptr_null(strchr(t.error, '\n'));
    trace_close(&t);
    free(path);
    scratch_remove(dir);
}
END_TEST

Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_test(tc, test_open_valid_trace);
    tcase_add_test(tc, test_bound_parameters_are_data);
    tcase_add_test(tc, test_saturating_sum);
    tcase_add_test(tc, test_set_orders_files_by_name);
    tcase_add_test(tc, test_reads_trace_of_running_writer);
    tcase_add_test(tc, test_open_failure_sets_error_only);
    suite_add_tcase(s, tc);
    return s;
}
