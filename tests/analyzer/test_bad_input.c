/*
 * test_bad_input.c - every way a trace directory or file can be unusable:
 * each must end every report that reads traces (`cutrace summary`,
 * `cutrace collectives`) with exit 1, an empty stdout and exactly one
 * stderr line naming the file and the problem; damaged copies of a valid
 * trace must never crash the analyzer.
 */
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include "cutrace/format.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The reports that read traces: each must refuse bad input the same way. */
static const char *const reports[] = {"summary", "collectives"};
#define NREPORTS (sizeof(reports) / sizeof(reports[0]))

static struct proc_result report_of(const char *report, const char *path, bool json)
{
    const char *args[] = {report, path, json ? "--json" : NULL, NULL};
    return run_cutrace(args, NULL);
}

/* Every report, in both output modes, must fail the same way. */
static void expect_error(const char *path, const char *needle, const char *needle2)
{
    for (size_t i = 0; i < NREPORTS; i++)
        for (int json = 0; json <= 1; json++) {
            struct proc_result r = report_of(reports[i], path, json);
            assert_one_line_error(&r, needle, needle2);
            proc_result_free(&r);
        }
}

static char *join(const char *dir, const char *name)
{
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
    return path;
}

START_TEST(test_missing_directory)
{
    char *dir = scratch_dir();
    char *missing = join(dir, "nope");
    expect_error(missing, missing, "no such file or directory");
    free(missing);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_not_a_directory)
{
    expect_error("/dev/null", "/dev/null", "not a directory");
}
END_TEST

START_TEST(test_directory_without_traces)
{
    char *dir = scratch_dir();
    expect_error(dir, dir, "no cutrace traces");
    /* SQLite side files are not traces. */
    char *ring = join(dir, "h-1-2.ring"), *wal = join(dir, "h-1-2.db-wal");
    write_file(wal, "x", 1);
    expect_error(dir, dir, "no cutrace traces");
    /* A crash buffer is folded first: a broken one is bad input (test_recover.c). */
    write_file(ring, "x", 1);
    expect_error(dir, "h-1-2.ring", "truncated ring");
    free(ring);
    free(wal);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_empty_file)
{
    char *dir = scratch_dir();
    char *path = join(dir, "h-1-2.db");
    write_file(path, "", 0);
    expect_error(dir, "h-1-2.db", "empty file");
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_not_sqlite)
{
    char *dir = scratch_dir();
    char *path = join(dir, "h-1-2.db");
    write_file(path, "hello, I am a text file and not a database at all\n", 50);
    expect_error(dir, "h-1-2.db", "not an SQLite database");
    write_file(path, "SQLite", 6); /* shorter than the magic */
    expect_error(dir, "h-1-2.db", "not an SQLite database");
    free(path);
    scratch_remove(dir);
}
END_TEST

static void make_foreign_db(const char *path, const char *sql)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

START_TEST(test_sqlite_but_not_cutrace)
{
    char *dir = scratch_dir();
    char *path = join(dir, "h-1-2.db");
    make_foreign_db(path, "CREATE TABLE songs(title TEXT); INSERT INTO songs VALUES ('x')");
    expect_error(dir, "h-1-2.db", "not a cutrace trace");
    remove(path);
    make_foreign_db(path, "CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
                          "INSERT INTO meta VALUES ('schema', 'otherapp')");
    expect_error(dir, "h-1-2.db", "not a cutrace trace (meta schema is 'otherapp'");
    remove(path);
    make_foreign_db(path, "CREATE TABLE meta(key TEXT PRIMARY KEY, value)");
    expect_error(dir, "h-1-2.db", "not a cutrace trace (meta has no 'schema' entry)");
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_newer_format)
{
    char *dir = scratch_dir();
    char *path = join(dir, "h-1-2.db");
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_meta_int(f, "format_version", CT_FORMAT_VERSION + 1);
    fixture_close(f);
    char expected[128];
    snprintf(expected, sizeof(expected),
             "written by a newer cutrace (format %d, this build reads up to %d)",
             CT_FORMAT_VERSION + 1, CT_FORMAT_VERSION);
    expect_error(dir, "h-1-2.db", expected);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_bad_format_version)
{
    char *dir = scratch_dir();
    char *path = join(dir, "h-1-2.db");
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_meta(f, "format_version", "one");
    fixture_close(f);
    expect_error(dir, "h-1-2.db", "invalid format_version 'one'");
    remove(path);
    /* The digits of a version stored as text are accepted. */
    f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_meta(f, "format_version", "1");
    fixture_close(f);
    const char *args[] = {"summary", path, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "%.1500s", r.err);
    proc_result_free(&r);
    remove(path);
    f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_exec(f, "DELETE FROM meta WHERE key = 'format_version'");
    fixture_close(f);
    expect_error(dir, "h-1-2.db", "no 'format_version' entry");
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_missing_table_view_or_column)
{
    char *dir = scratch_dir();
    char *path = join(dir, "h-1-2.db");
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_exec(f, "DROP VIEW ipc");
    fixture_close(f);
    expect_error(dir, "h-1-2.db", "no table or view 'ipc'");
    remove(path);

    f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_exec(f, "DROP VIEW calls; CREATE VIEW calls AS SELECT e.seq, e.t_ns, e.dur_ns,"
                    " e.tid, a.name AS api, a.layer, e.device, e.ptr, e.size, e.result,"
                    " (e.depth > 0) AS nested, e.parent_seq FROM events e"
                    " JOIN apis a ON a.api_id = e.api_id");
    fixture_close(f);
    expect_error(dir, "h-1-2.db", "'calls' has no column 'wait_ns'");
    remove(path);

    f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_exec(f, "ALTER TABLE devices DROP COLUMN pci_bus_id");
    fixture_close(f);
    expect_error(dir, "h-1-2.db", "'devices' has no column 'pci_bus_id'");
    remove(path);

    /* A view whose table is gone fails when compiled, by name. */
    f = fixture_create(path, FIXTURE_DEFAULT);
    fixture_exec(f, "PRAGMA legacy_alter_table = ON; ALTER TABLE apis RENAME TO apis_old;"
                    " CREATE TABLE apis(api_id INTEGER PRIMARY KEY, name TEXT, layer TEXT,"
                    " role TEXT, space TEXT, kind TEXT); DROP TABLE events;"
                    " CREATE TABLE events(seq INTEGER PRIMARY KEY)");
    fixture_close(f);
    expect_error(dir, "h-1-2.db", "incomplete cutrace trace");
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_bad_file_among_good_ones)
{
    char *dir = scratch_dir();
    char *good = scenario_normal(dir);
    char *bad = join(dir, "zzz-1-1.db");
    write_file(bad, "garbage garbage garbage garbage", 31);
    expect_error(dir, "zzz-1-1.db", "not an SQLite database");
    free(good);
    free(bad);
    scratch_remove(dir);
}
END_TEST

/* A damaged copy of a valid trace, alone in its own directory. */
static char *damaged_copy(const char *dir, const char *good, const char *case_name)
{
    char *sub = join(dir, case_name);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    char *copy = join(sub, "copy.db");
    copy_file(good, copy);
    free(copy);
    return sub;
}

START_TEST(test_corrupt_database)
{
    char *dir = scratch_dir();
    char *good = scenario_normal(dir);
    size_t size = file_size(good);

    /* A valid header, garbage everywhere after it. */
    char *sub = damaged_copy(dir, good, "garbage");
    char *garbage = malloc(size);
    ck_assert_ptr_nonnull(garbage);
    for (size_t i = 0; i < size; i++)
        garbage[i] = (char)(i * 131 + 7);
    memcpy(garbage, "SQLite format 3", 16);
    char *copy = join(sub, "copy.db");
    write_file(copy, garbage, size);
    expect_error(sub, "copy.db", NULL);
    free(copy);
    free(garbage);
    free(sub);

    /* Truncated to its first page, and to half. */
    size_t sizes[] = {4096, size / 2};
    const char *names[] = {"first-page", "half"};
    for (int i = 0; i < 2; i++) {
        sub = damaged_copy(dir, good, names[i]);
        copy = join(sub, "copy.db");
        truncate_file(copy, sizes[i]);
        expect_error(sub, "copy.db", "corrupt or truncated");
        free(copy);
        free(sub);
    }
    free(good);
    scratch_remove(dir);
}
END_TEST

/*
 * Flips bits of a copy of `good` at a deterministic spread of positions,
 * denser in the header and the schema page where damage matters most, and
 * runs every report on it: each must report or refuse, never crash.
 */
static void flip_bits(const char *dir, const char *good, size_t flips)
{
    char *sub = join(dir, "t");
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    size_t size = file_size(good);
    char *copy = join(sub, "flip.db");
    int failures = 0, successes = 0;
    for (size_t i = 0; i < flips; i++) {
        size_t byte = i < 32 ? i * 4 : i < 48 ? 100 + (i - 32) * 240 : (i * 2654435761u) % size;
        copy_file(good, copy);
        flip_bit(copy, byte, (int)(i % 8));
        for (size_t rep = 0; rep < NREPORTS; rep++) {
            bool json = ((i + rep) % 2) == 1;
            struct proc_result r = report_of(reports[rep], sub, json);
            ck_assert_msg(!r.signaled, "%s, byte %zu: killed by signal %d", reports[rep], byte,
                          r.status - 128);
            if (r.status == 0) {
                successes++;
                ck_assert_msg(r.out_len > 0 && r.err_len == 0, "%s, byte %zu: %s", reports[rep],
                              byte, r.err);
                if (json)
                    ck_assert_msg(json_valid(r.out), "%s, byte %zu: invalid JSON", reports[rep],
                                  byte);
            } else {
                failures++;
                assert_one_line_error(&r, "flip.db", NULL);
            }
            proc_result_free(&r);
        }
    }
    ck_assert_int_gt(failures, 0);
    ck_assert_int_gt(successes, 0);
    free(copy);
    free(sub);
}

START_TEST(test_bit_flips_never_crash)
{
    char *dir = scratch_dir();
    char *good = scenario_normal(dir);
    flip_bits(dir, good, 96);
    free(good);
    scratch_remove(dir);
}
END_TEST

/* The same on a trace full of NCCL records (one rank of the NCCL scenario). */
START_TEST(test_bit_flips_nccl_trace)
{
    char *dir = scratch_dir();
    char *ranks = join(dir, "ranks");
    ck_assert_int_eq(mkdir(ranks, 0700), 0);
    scenario_nccl(ranks, NCCL_SCENARIO_DEFAULT);
    char *good = fixture_trace_path(ranks, "node1", NCCL_PID(0), NORMAL_START_WALL);
    flip_bits(dir, good, 64);
    free(good);
    free(ranks);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_single_bad_file_argument)
{
    char *dir = scratch_dir();
    char *path = join(dir, "notes.txt");
    write_file(path, "just notes\n", 11);
    expect_error(path, "notes.txt", "not an SQLite database");
    free(path);
    scratch_remove(dir);
}
END_TEST

/* A copy of the normal scenario in its own directory under dir, damaged
 * by sql; returns the directory. */
static char *damaged_scenario(const char *dir, const char *name, const char *sql)
{
    char *sub = join(dir, name);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    char *path = scenario_normal(sub);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    sqlite3_close(db);
    free(path);
    return sub;
}

/* `cutrace diff` refuses a trace the way `cutrace summary` does, with the
 * same line: here the view the NCCL views are built on is gone. */
START_TEST(test_diff_refuses_what_summary_refuses)
{
    char *dir = scratch_dir();
    char *good = join(dir, "good");
    ck_assert_int_eq(mkdir(good, 0700), 0);
    free(scenario_normal(good));
    char *bad = damaged_scenario(dir, "bad", "DROP VIEW nccl_events");
    const char *needle = "'communicators' is unusable";
    struct proc_result r = report_of("summary", bad, false);
    assert_one_line_error(&r, "bad/node1-4242-", needle);
    proc_result_free(&r);
    for (int json = 0; json <= 1; json++)
        for (int side = 0; side < 2; side++) {
            const char *args[] = {"diff", side ? bad : good, side ? good : bad,
                                  json ? "--json" : NULL, NULL};
            r = run_cutrace(args, NULL);
            assert_one_line_error(&r, "bad/node1-4242-", needle);
            proc_result_free(&r);
        }
    free(good);
    free(bad);
    scratch_remove(dir);
}
END_TEST

/*
 * Damaged stack tables: the reports that read stacks (sites, and diff for
 * the allocations' call sites) refuse the trace with one line naming it,
 * leaking nothing on the way (the sanitizer run of these tests checks
 * leaks: stacks_load once left its string table behind here, which is what
 * stopped `make fuzz` within a thousand runs). Before, diff took such a
 * trace for one without stacks, and every allocation of that run differed
 * from the other's by its site.
 */
START_TEST(test_damaged_stack_tables)
{
    static const struct {
        const char *sql, *needle;
    } cases[] = {
        {"DROP TABLE stack_frames", "without its stack tables (no table or view 'stack_frames')"},
        {"DROP VIEW stacks", "without its stack tables (no table or view 'stacks')"},
        {"DROP TABLE py_code", "without its stack tables (no table or view 'py_code')"},
        {"DROP TABLE loaded_modules", "no table or view 'loaded_modules'"},
        {"DROP TABLE symbols", "no table or view 'symbols'"},
        {"DROP VIEW stacks; CREATE VIEW stacks AS SELECT 1 AS x", "no such column"},
    };
    char *dir = scratch_dir();
    char *good = join(dir, "good");
    ck_assert_int_eq(mkdir(good, 0700), 0);
    free(scenario_normal(good));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char name[16];
        snprintf(name, sizeof(name), "case%zu", i);
        char *bad = damaged_scenario(dir, name, cases[i].sql);
        const char *modes[] = {NULL, "--json", "--folded"};
        for (size_t m = 0; m < 3; m++) {
            const char *args[] = {"sites", bad, modes[m], NULL};
            struct proc_result r = run_cutrace(args, NULL);
            assert_one_line_error(&r, name, cases[i].needle);
            proc_result_free(&r);
        }
        const char *args[] = {"diff", good, bad, NULL};
        struct proc_result r = run_cutrace(args, NULL);
        assert_one_line_error(&r, name, cases[i].needle);
        proc_result_free(&r);
        free(bad);
    }
    free(good);
    scratch_remove(dir);
}
END_TEST

/* `sites --at seq:N` names a call: one the trace does not have is a usage
 * error naming the trace and its calls, never the last call's moment. */
START_TEST(test_sites_at_a_call_the_trace_lacks)
{
    char *dir = scratch_dir();
    char *path = scenario_normal(dir);
    char range[64];
    snprintf(range, sizeof(range), "its calls are seq 1 to %d", NORMAL_CALLS);
    static const char *const beyond[] = {"seq:99999", "seq:14", "seq:4242:14"};
    for (size_t i = 0; i < sizeof(beyond) / sizeof(beyond[0]); i++)
        for (int json = 0; json <= 1; json++) {
            const char *args[] = {"sites", "--at", beyond[i], dir, json ? "--json" : NULL, NULL};
            struct proc_result r = run_cutrace(args, NULL);
            ck_assert_msg(r.status == 2, "%s: exit %d", beyond[i], r.status);
            ck_assert_uint_eq(r.out_len, 0);
            ck_assert_uint_eq(count_lines(r.err), 1);
            assert_contains(r.err, beyond[i]);
            assert_contains(r.err, strrchr(path, '/') + 1);
            assert_contains(r.err, range);
            proc_result_free(&r);
        }
    const char *other_pid[] = {"sites", "--at", "seq:77:3", dir, NULL};
    struct proc_result r = run_cutrace(other_pid, NULL);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "no process 77");
    proc_result_free(&r);
    /* the last call itself is a moment */
    char last[32];
    snprintf(last, sizeof(last), "seq:%d", NORMAL_CALLS);
    const char *ok[] = {"sites", "--at", last, dir, NULL};
    r = run_cutrace(ok, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* One process (pid 90) that made one cudaMalloc of 1 MiB from load_weights
 * (model.py:10), or, without stacks, with stacks off. */
static void write_stacked_run(const char *dir, bool stacks)
{
    char *path = fixture_trace_path(dir, "node1", 90, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 90, .host = "node1", .start_wall_ns = NORMAL_START_WALL};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_meta(f, "stacks",
                 stacks ? "native=libunwind python=on depth=32 on=memory"
                        : "native=off python=off");
    int64_t seq = fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * MiB, 0);
    if (stacks) {
        struct fixture_frame frame = {
            .python = 1, .symbol = "load_weights", .file = "model.py", .line = 10, .entry = 1};
        fixture_stack(f, 1, &frame, 1);
        fixture_call_stack(f, seq, 1);
    }
    fixture_close(f);
    free(path);
}

/* A run whose traces have no call stacks (stacks off, or format 3) against
 * one whose traces have them: the allocations are the same, so the runs
 * match; call sites are left out of the comparison, with a note, instead
 * of every allocation differing by a site one side cannot have. */
START_TEST(test_diff_with_and_without_stacks)
{
    char *dir = scratch_dir();
    char *with = join(dir, "with"), *without = join(dir, "without");
    ck_assert_int_eq(mkdir(with, 0700), 0);
    ck_assert_int_eq(mkdir(without, 0700), 0);
    write_stacked_run(with, true);
    write_stacked_run(without, false);
    const char *args[] = {"diff", with, without, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    assert_contains(r.out, "the runs match");
    assert_contains(r.out, "call sites are not compared: B: pid 90 has no call stacks (stacks "
                           "were off)");
    proc_result_free(&r);
    /* the same in JSON: nothing differs */
    const char *json[] = {"diff", "--json", with, without, NULL};
    r = run_cutrace(json, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "\"differences\": []");
    proc_result_free(&r);
    free(with);
    free(without);
    scratch_remove(dir);
}
END_TEST

Suite *bad_input_suite(void)
{
    Suite *s = suite_create("bad_input");
    TCase *tc = tcase_create("bad_input");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_missing_directory);
    tcase_add_test(tc, test_not_a_directory);
    tcase_add_test(tc, test_directory_without_traces);
    tcase_add_test(tc, test_empty_file);
    tcase_add_test(tc, test_not_sqlite);
    tcase_add_test(tc, test_sqlite_but_not_cutrace);
    tcase_add_test(tc, test_newer_format);
    tcase_add_test(tc, test_bad_format_version);
    tcase_add_test(tc, test_missing_table_view_or_column);
    tcase_add_test(tc, test_bad_file_among_good_ones);
    tcase_add_test(tc, test_corrupt_database);
    tcase_add_test(tc, test_bit_flips_never_crash);
    tcase_add_test(tc, test_bit_flips_nccl_trace);
    tcase_add_test(tc, test_single_bad_file_argument);
    tcase_add_test(tc, test_diff_refuses_what_summary_refuses);
    tcase_add_test(tc, test_damaged_stack_tables);
    tcase_add_test(tc, test_sites_at_a_call_the_trace_lacks);
    tcase_add_test(tc, test_diff_with_and_without_stacks);
    suite_add_tcase(s, tc);
    return s;
}
