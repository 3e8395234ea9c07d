/*
 * test_pack.c - `cutrace pack` and packed runs read by the reports
 * (analyzer/cmd/pack.c, model/packed.h), several paths taken as one run
 * (model/traceset.h), and the warning for a trace copied without its -wal
 * or .ring (model/sidefiles.h).
 */
#include "model/trace.h"
#include "model/traceset.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* text with every occurrence of `from` replaced by `to` (malloc'd). */
static char *replace_all(const char *text, const char *from, const char *to)
{
    size_t n = strlen(from), cap = strlen(text) + 1, len = 0;
    char *out = malloc(cap);
    for (const char *p = text; *p;) {
        const char *piece = n && strncmp(p, from, n) == 0 ? to : NULL;
        size_t add = piece ? strlen(to) : 1;
        if (len + add + 1 > cap) {
            cap = 2 * (len + add + 1);
            out = realloc(out, cap);
        }
        memcpy(out + len, piece ? to : p, add);
        len += add;
        p += piece ? n : 1;
    }
    out[len] = '\0';
    return out;
}

/* A report's stdout for `path`, with the path's own spelling taken out so
 * that a directory's report and its pack's can be compared. */
static char *report(const char *command, const char *path, const char *prefix)
{
    const char *args[] = {command, "--json", path, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "%s %s: %d\n%s", command, path, r.status, r.err);
    char *plain = replace_all(r.out, prefix, "RUN/");
    char *out = replace_all(plain, path, "RUN");
    free(plain);
    proc_result_free(&r);
    return out;
}

static int pack(const char *from, const char *out)
{
    const char *args[] = {"pack", from, "-o", out, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0 || r.status == 2, "pack: %d\n%s", r.status, r.err);
    int status = r.status;
    proc_result_free(&r);
    return status;
}

static int64_t scalar(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_step(stmt), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return v;
}

/* Files in dir whose name starts with '.' (a pack's temporary file). */
static int hidden_files(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* The NCCL scenario in a fresh directory, packed into another: *out is
 * <other>/run.cutrace. */
static void packed_scenario(char **dir, char **other, char **out)
{
    *dir = scratch_dir();
    *other = scratch_dir();
    scenario_nccl(*dir, NCCL_SCENARIO_DEFAULT);
    ck_assert_int_ge(asprintf(out, "%s/run.cutrace", *other), 0);
    ck_assert_int_eq(pack(*dir, *out), 0);
}

START_TEST(test_pack_reads_as_its_directory)
{
    char *dir, *other, *out, *dir_prefix = NULL, *pack_prefix = NULL;
    packed_scenario(&dir, &other, &out);
    ck_assert_int_ge(asprintf(&dir_prefix, "%s/", dir), 0);
    ck_assert_int_ge(asprintf(&pack_prefix, "%s:", out), 0);
    ck_assert_int_eq(hidden_files(other), 0);
    const char *reports[] = {"summary", "collectives", "timeline", "ls"};
    for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++) {
        char *a = report(reports[i], dir, dir_prefix);
        char *b = report(reports[i], out, pack_prefix);
        ck_assert_msg(strcmp(a, b) == 0, "%s differs:\n%.2000s\n---\n%.2000s", reports[i], a, b);
        free(a);
        free(b);
    }
    free(out);
    free(dir_prefix);
    free(pack_prefix);
    scratch_remove(dir);
    scratch_remove(other);
}
END_TEST

START_TEST(test_pack_queries_every_process_with_an_index)
{
    char *dir, *other, *out;
    packed_scenario(&dir, &other, &out);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(scalar(db, "SELECT count(*) FROM pack_traces"), 4);
    ck_assert_int_eq(scalar(db, "SELECT count(DISTINCT process) FROM calls"), 4);
    ck_assert_int_eq(scalar(db, "SELECT count(DISTINCT process) FROM communicators"), 4);
    /* Each process's rows of a view are that trace's rows: the views join
     * and partition within a process. */
    struct trace_set set;
    ck_assert_int_eq(trace_set_open(&set, dir), 0);
    for (size_t i = 0; i < set.count; i++) {
        char sql[256];
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) * 1000003 + coalesce(sum(bytes), 0) FROM collectives c"
                 " JOIN pack_traces t ON t.process = c.process WHERE t.file = '%s'",
                 set.traces[i].file);
        int64_t packed = scalar(db, sql);
        int64_t own =
            scalar(set.traces[i].db,
                   "SELECT count(*) * 1000003 + coalesce(sum(bytes), 0) FROM collectives");
        ck_assert_int_eq(packed, own);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM communicators c JOIN pack_traces t ON t.process ="
                 " c.process WHERE t.file = '%s'",
                 set.traces[i].file);
        ck_assert_int_eq(scalar(db, sql),
                         scalar(set.traces[i].db, "SELECT count(*) FROM communicators"));
    }
    trace_set_close(&set);
    sqlite3_close(db);

    /* A process read alone looks its events up by the (process, seq) key. */
    struct trace t;
    ck_assert_int_eq(trace_open_packed(&t, out, 2, "node1-1001-1.db"), 0);
    sqlite3_stmt *plan = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(t.db,
                                        "EXPLAIN QUERY PLAN SELECT * FROM events WHERE seq = 3", -1,
                                        &plan, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(plan), SQLITE_ROW);
    const char *detail = (const char *)sqlite3_column_text(plan, 3);
    ck_assert_msg(strstr(detail, "SEARCH") && strstr(detail, "PRIMARY KEY"), "plan: %s", detail);
    sqlite3_finalize(plan);
    ck_assert_int_gt(scalar(t.db, "SELECT count(*) FROM calls"), 0);
    ck_assert_int_eq(scalar(t.db, "SELECT count(*) FROM process"), 1);
    trace_close(&t);
    free(out);
    scratch_remove(dir);
    scratch_remove(other);
}
END_TEST

START_TEST(test_pack_refuses_to_overwrite_without_force)
{
    char *dir = scratch_dir(), *other = scratch_dir();
    scenario_nccl(dir, NCCL_SCENARIO_DEFAULT);
    char *out = NULL;
    ck_assert_int_ge(asprintf(&out, "%s/run.cutrace", other), 0);
    write_file(out, "keep", 4);
    const char *args[] = {"pack", dir, "-o", out, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "--force");
    ck_assert_uint_eq(file_size(out), 4);
    proc_result_free(&r);
    const char *forced[] = {"pack", "--force", dir, "-o", out, NULL};
    r = run_cutrace(forced, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_uint_gt(file_size(out), 4);
    ck_assert_int_eq(hidden_files(other), 0);
    proc_result_free(&r);
    /* Without -o there is nothing to write to. */
    const char *no_out[] = {"pack", dir, NULL};
    r = run_cutrace(no_out, NULL);
    ck_assert_int_eq(r.status, 2);
    proc_result_free(&r);
    free(out);
    scratch_remove(dir);
    scratch_remove(other);
}
END_TEST

START_TEST(test_pack_keeps_the_manifest_and_what_traces_redact)
{
    char *dir = scratch_dir(), *other = scratch_dir();
    char *path = fixture_trace_path(dir, "node1", 7, 7);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_env(f, "HF_TOKEN", "<redacted>");
    fixture_call(f, CT_API_cudaMalloc, 0, 0x1000, 4096, 0);
    fixture_close(f);
    /* A manifest as cutrace run writes it (model/manifest.h): the pack
     * checks it by parsing, then keeps its text byte for byte. */
    static const char manifest[] =
        "{\"format\": 1, \"cutrace_version\": \"0.1.0\", \"argv\": [\"python\", \"-m\", \"x\"],"
        " \"env\": {}, \"host\": \"node1\", \"pid\": 7, \"start_wall_ns\": 1000}\n";
    char *mpath = NULL, *out = NULL;
    ck_assert_int_ge(asprintf(&mpath, "%s/manifest.json", dir), 0);
    write_file(mpath, manifest, strlen(manifest));
    ck_assert_int_ge(asprintf(&out, "%s/run.cutrace", other), 0);
    ck_assert_int_eq(pack(dir, out), 0);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *stmt = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT json FROM manifest", -1, &stmt, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(stmt), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(stmt, 0), manifest);
    sqlite3_finalize(stmt);
    ck_assert_int_eq(
        scalar(db, "SELECT count(*) FROM env WHERE name = 'HF_TOKEN' AND value = '<redacted>'"), 1);
    sqlite3_close(db);
    free(mpath);
    free(out);
    free(path);
    scratch_remove(dir);
    scratch_remove(other);
}
END_TEST

START_TEST(test_damaged_pack_is_one_line)
{
    char *dir, *other, *out, *copy = NULL;
    packed_scenario(&dir, &other, &out);
    ck_assert_int_ge(asprintf(&copy, "%s/copy.cutrace", other), 0);
    const char *args[] = {"summary", copy, NULL};

    copy_file(out, copy);
    truncate_file(copy, file_size(copy) / 2);
    struct proc_result r = run_cutrace(args, NULL);
    assert_one_line_error(&r, copy, "corrupt");
    proc_result_free(&r);

    /* A newer pack, and views that are more than views. */
    static const struct {
        const char *sql, *needle;
    } damage[] = {
        {"UPDATE pack_info SET value = 99 WHERE key = 'pack_version'", "newer cutrace"},
        {"UPDATE pack_objects SET sql = 'CREATE VIEW calls AS SELECT 1; DROP TABLE events'"
         " WHERE name = 'calls' AND process = 1",
         "more than a view"},
        {"UPDATE pack_objects SET sql = 'DROP TABLE events' WHERE name = 'calls'", "no definition"},
        {"DELETE FROM pack_columns WHERE object = 'events' AND process = 2", "no columns"},
        {"DELETE FROM pack_traces", "without processes"},
    };
    for (size_t i = 0; i < sizeof(damage) / sizeof(damage[0]); i++) {
        copy_file(out, copy);
        sqlite3 *db = NULL;
        ck_assert_int_eq(sqlite3_open(copy, &db), SQLITE_OK);
        ck_assert_int_eq(sqlite3_exec(db, damage[i].sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        r = run_cutrace(args, NULL);
        assert_one_line_error(&r, copy, damage[i].needle);
        proc_result_free(&r);
    }
    /* The pack itself is left as it was: still the events it held. */
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open_v2(copy, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_gt(scalar(db, "SELECT count(*) FROM events"), 0);
    sqlite3_close(db);
    free(out);
    free(copy);
    scratch_remove(dir);
    scratch_remove(other);
}
END_TEST

START_TEST(test_several_paths_are_one_run)
{
    char *dir = scratch_dir(), *a = scratch_dir(), *b = scratch_dir();
    scenario_nccl(dir, NCCL_SCENARIO_DEFAULT);
    /* The first two traces (ranks 0 and 1) in a, the others in b: one run again. */
    struct trace_set set;
    ck_assert_int_eq(trace_set_open(&set, dir), 0);
    ck_assert_uint_eq(set.count, 4);
    char *files[4];
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_ge(asprintf(&files[i], "%s/%s", i < 2 ? a : b, set.traces[i].file), 0);
        copy_file(set.traces[i].path, files[i]);
    }
    trace_set_close(&set);
    const char *both[] = {"collectives", "--json", a, b, NULL};
    const char *whole[] = {"collectives", "--json", dir, NULL};
    struct proc_result r = run_cutrace(both, NULL), w = run_cutrace(whole, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(w.status, 0);
    char *joined = NULL;
    ck_assert_int_ge(asprintf(&joined, "%s %s", a, b), 0);
    char *x = replace_all(r.out, joined, "RUN"), *y = replace_all(w.out, dir, "RUN");
    /* Then the traces' own paths. */
    char *x1 = replace_all(x, a, "RUN"), *x2 = replace_all(x1, b, "RUN");
    ck_assert_str_eq(x2, y);
    free(x);
    free(x1);
    free(x2);
    free(y);
    proc_result_free(&r);
    proc_result_free(&w);

    /* Files and directories mix; a trace given twice is refused by name. */
    const char *mixed[] = {"ls", a, files[2], files[3], NULL};
    r = run_cutrace(mixed, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_uint_eq(count_lines(r.out), 5);
    proc_result_free(&r);
    const char *twice[] = {"summary", a, files[0], NULL};
    r = run_cutrace(twice, NULL);
    assert_one_line_error(&r, files[0], "given twice");
    proc_result_free(&r);
    for (size_t i = 0; i < 4; i++)
        free(files[i]);
    free(joined);
    scratch_remove(dir);
    scratch_remove(a);
    scratch_remove(b);
}
END_TEST

/* A trace in mid-run: end_state 'running', its first call checkpointed
 * into the .db and its last 50 committed into the -wal only, its process
 * on another host (so no report takes it for dead here). */
static char *running_trace(const char *dir, struct fixture **writer)
{
    char *path = fixture_trace_path(dir, "elsewhere", 77, 7);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_process(f,
                    &(struct fixture_process){
                        .pid = 77, .host = "elsewhere", .start_wall_ns = 7, .cmdline = "server"});
    fixture_meta(f, "end_state", "running");
    fixture_meta(f, "crash_buffer", "elsewhere-77-7.ring"); /* as the tracer writes it */
    fixture_call(f, CT_API_cudaMalloc, 0, 0x1000, 4096, 0);
    fixture_exec(f, "COMMIT");
    ck_assert_int_eq(
        sqlite3_wal_checkpoint_v2(fixture_db(f), NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL),
        SQLITE_OK);
    fixture_exec(f, "BEGIN");
    for (int i = 0; i < 50; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x100000 + 0x1000 * i, 4096, 0);
    fixture_flush(f);
    *writer = f;
    return path;
}

START_TEST(test_copy_without_wal_and_ring_warns)
{
    char *dir = scratch_dir(), *copy_dir = scratch_dir();
    struct fixture *writer = NULL;
    char *path = running_trace(dir, &writer);
    char *wal = NULL;
    ck_assert_int_ge(asprintf(&wal, "%s-wal", path), 0);
    ck_assert_int_eq(access(wal, F_OK), 0);
    char *copy = fixture_trace_path(copy_dir, "elsewhere", 77, 7);
    copy_file(path, copy);

    const char *args[] = {"summary", copy_dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    /* One line about the lost -wal and .ring, none about the running process. */
    ck_assert_uint_eq(count_lines(r.err), 1);
    assert_contains(r.err, "cutrace: ");
    assert_contains(r.err, copy);
    assert_contains(r.err, "-wal and .ring files are missing");
    proc_result_free(&r);

    /* The same trace with its -wal but no ring: the ring is what is lost. */
    char *copy_wal = NULL;
    ck_assert_int_ge(asprintf(&copy_wal, "%s-wal", copy), 0);
    copy_file(wal, copy_wal);
    r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_uint_eq(count_lines(r.err), 1);
    assert_contains(r.err, "its .ring file is missing");
    proc_result_free(&r);

    /* The copy holds the checkpointed call only, and says so above. */
    const char *json[] = {"summary", "--json", copy_dir, NULL};
    r = run_cutrace(json, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.err, "warning: ");
    proc_result_free(&r);
    fixture_close(writer);
    free(copy_wal);
    free(wal);
    free(copy);
    free(path);
    scratch_remove(dir);
    scratch_remove(copy_dir);
}
END_TEST

START_TEST(test_finished_traces_do_not_warn)
{
    char *dir = scratch_dir();
    scenario_nccl(dir, NCCL_SCENARIO_DEFAULT);
    const char *args[] = {"summary", dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(r.err_len, 0);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

Suite *pack_suite(void)
{
    Suite *s = suite_create("pack");
    TCase *tc = tcase_create("pack");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pack_reads_as_its_directory);
    tcase_add_test(tc, test_pack_queries_every_process_with_an_index);
    tcase_add_test(tc, test_pack_refuses_to_overwrite_without_force);
    tcase_add_test(tc, test_pack_keeps_the_manifest_and_what_traces_redact);
    tcase_add_test(tc, test_damaged_pack_is_one_line);
    tcase_add_test(tc, test_several_paths_are_one_run);
    tcase_add_test(tc, test_copy_without_wal_and_ring_warns);
    tcase_add_test(tc, test_finished_traces_do_not_warn);
    suite_add_tcase(s, tc);
    return s;
}
