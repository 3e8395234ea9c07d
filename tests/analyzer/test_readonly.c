/*
 * test_readonly.c - reports only read: every command that reads traces
 * leaves a trace directory exactly as it found it (no -wal or -shm files
 * made by the read, nothing removed that a live writer uses), apart from
 * what crash recovery does on purpose (fold a dead process's ring into its
 * trace, delete the ring); and no file a trace names is opened unless it is
 * a regular file (a module path naming a FIFO or a device is not touched).
 */
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include "cutrace/ring.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every report that reads one trace directory, text and JSON. The budget
 * may find nothing to analyse here (exit 1): what it leaves is the point. */
static const char *const reports[][6] = {
    {"summary", NULL},
    {"summary", "--json", NULL},
    {"collectives", NULL},
    {"timeline", NULL},
    {"timeline", "--json", NULL},
    {"budget", "--framework", "vllm", NULL},
    {"budget", "--framework", "sglang", "--mem-fraction-static", "0.8", NULL},
    {"sites", NULL},
    {"sites", "--json", NULL},
    {"sites", "--folded", NULL},
};
#define NREPORTS (sizeof(reports) / sizeof(reports[0]))

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "name size mtime" per entry, sorted, one a line (with_times: the
 * modification time too, for files no one may write). Malloc'd. */
static char *listing(const char *dir, bool with_times)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    char **lines = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *path = NULL, *line = NULL;
        ck_assert_int_ge(asprintf(&path, "%s/%s", dir, e->d_name), 0);
        struct stat st;
        ck_assert_int_eq(lstat(path, &st), 0);
        if (with_times)
            ck_assert_int_ge(asprintf(&line, "%s %jd %jd.%09ld", e->d_name, (intmax_t)st.st_size,
                                      (intmax_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec),
                             0);
        else
            ck_assert_int_ge(asprintf(&line, "%s", e->d_name), 0);
        lines = realloc(lines, (n + 1) * sizeof(*lines));
        ck_assert_ptr_nonnull(lines);
        lines[n++] = line;
        free(path);
    }
    closedir(d);
    qsort(lines, n, sizeof(*lines), compare_strings);
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(lines[i]) + 1;
    char *out = calloc(1, len);
    ck_assert_ptr_nonnull(out);
    for (size_t i = 0; i < n; i++) {
        strcat(out, lines[i]);
        strcat(out, "\n");
        free(lines[i]);
    }
    free(lines);
    return out;
}

/* Runs report i on dir; the report's answer is not the point here, only
 * that it ran (no crash). */
static void run_report(size_t i, const char *dir)
{
    const char *args[8];
    size_t n = 0;
    for (; reports[i][n]; n++)
        args[n] = reports[i][n];
    args[n++] = dir;
    args[n] = NULL;
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(!r.signaled && r.status <= 2, "%s: exit %d: %s", reports[i][0], r.status, r.err);
    proc_result_free(&r);
}

/* Every report, and diff against other, leaves dir as `before`. */
static void expect_untouched(const char *dir, const char *other, bool with_times)
{
    char *before = listing(dir, with_times);
    for (size_t i = 0; i < NREPORTS; i++) {
        run_report(i, dir);
        char *after = listing(dir, with_times);
        ck_assert_msg(strcmp(before, after) == 0, "`cutrace %s %s` changed %s:\n%s\nnow:\n%s",
                      reports[i][0], reports[i][1] ? reports[i][1] : "", dir, before, after);
        free(after);
    }
    for (int json = 0; json <= 1; json++) {
        const char *args[] = {"diff", other, dir, json ? "--json" : NULL, NULL};
        struct proc_result r = run_cutrace(args, NULL);
        ck_assert_msg(r.status == 0, "diff: exit %d: %s", r.status, r.err);
        proc_result_free(&r);
        char *after = listing(dir, with_times);
        ck_assert_msg(strcmp(before, after) == 0, "`cutrace diff` changed %s:\n%s\nnow:\n%s", dir,
                      before, after);
        free(after);
    }
    free(before);
}

static char *subdir(const char *root, const char *name)
{
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/%s", root, name), 0);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    return path;
}

/* Two kinds of trace a report meets, in one directory each:
 *   - a finished one (WAL mode, checkpointed, closed): one file before and
 *     after every report, no -wal, no -shm;
 *   - one whose writer is alive (its data still in the -wal file): the
 *     reports read that data, and its -wal and -shm stay where the writer
 *     has them. */
START_TEST(test_reports_leave_the_directory_as_found)
{
    char *root = scratch_dir();
    char *dir = subdir(root, "run"), *other = subdir(root, "other");
    free(scenario_normal(dir));
    free(scenario_normal(other));
    expect_untouched(dir, other, true);
    char *names = listing(dir, false);
    ck_assert_int_eq(count_lines(names), 1);
    free(names);

    char *live = subdir(root, "live");
    char *db = fixture_trace_path(live, "node1", 77, NORMAL_START_WALL);
    struct fixture *f = fixture_create(db, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 77, .host = "node1", .start_wall_ns = NORMAL_START_WALL};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * MiB, 0);
    fixture_flush(f);
    names = listing(live, false);
    assert_contains(names, ".db-wal\n");
    assert_contains(names, ".db-shm\n");
    free(names);
    expect_untouched(live, other, false);
    struct proc_result r = run_cutrace((const char *const[]){"summary", live, NULL}, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "1.00 MiB"); /* the data still in the -wal file */
    proc_result_free(&r);
    fixture_close(f);
    free(db);
    free(live);
    free(dir);
    free(other);
    scratch_remove(root);
}
END_TEST

/* A killed process's trace: the first report folds its ring (the trace
 * changes, the ring goes, and recovery's own -wal and -shm with it); from
 * then on it is a finished trace like any other. */
START_TEST(test_recovered_trace_stays_one_file)
{
    char *root = scratch_dir();
    char *dir = subdir(root, "run"), *other = subdir(root, "other");
    char *db = scenario_normal(dir);
    free(scenario_normal(other));
    char *ring = NULL;
    ck_assert_int_ge(asprintf(&ring, "%.*s.ring", (int)(strlen(db) - 3), db), 0);
    const char *name = strrchr(db, '/') + 1;
    struct ct_ring_owner owner = {NORMAL_PID, NORMAL_START_WALL, NORMAL_START_MONO, name, "boot-1"};
    size_t bytes = ct_ring_bytes(16);
    void *mem = calloc(1, bytes);
    ck_assert_ptr_nonnull(mem);
    ct_ring_format(mem, 16, &owner);
    write_file(ring, mem, bytes);
    free(mem);

    run_report(0, dir);
    char *names = listing(dir, false);
    char *expected = NULL;
    ck_assert_int_ge(asprintf(&expected, "%s\n", name), 0);
    ck_assert_str_eq(names, expected);
    expect_untouched(dir, other, true);
    free(expected);
    free(names);
    free(ring);
    free(db);
    free(dir);
    free(other);
    scratch_remove(root);
}
END_TEST

/* A trace whose stacks name a FIFO as a module: `cutrace sites` says the
 * module is not a regular file, and never opens it (opening is an action
 * on a FIFO or a device node). inotify sees every open of the path. */
START_TEST(test_module_that_is_no_regular_file_is_never_opened)
{
    char *dir = scratch_dir();
    char *fifo = NULL;
    ck_assert_int_ge(asprintf(&fifo, "%s/libplanted.so", dir), 0);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    char *db = fixture_trace_path(dir, "node1", 88, NORMAL_START_WALL);
    struct fixture *f = fixture_create(db, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 88, .host = "node1", .start_wall_ns = NORMAL_START_WALL};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_loaded_module(f, fifo, NULL, 0x400000, 0x500000);
    struct fixture_frame frame = {.ip = 0x401234};
    fixture_stack(f, 1, &frame, 1);
    int64_t seq = fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * MiB, 0);
    fixture_call_stack(f, seq, 1);
    fixture_close(f);

    int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ck_assert_int_ge(watch, 0);
    ck_assert_int_ge(inotify_add_watch(watch, fifo, IN_OPEN), 0);
    struct proc_result r = run_cutrace((const char *const[]){"sites", dir, NULL}, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    assert_contains(r.out, "libplanted.so: not a regular file");
    proc_result_free(&r);
    char events[4096];
    ssize_t got = read(watch, events, sizeof(events));
    ck_assert_msg(got < 0 && errno == EAGAIN, "the FIFO was opened (%zd bytes of events)", got);
    close(watch);
    free(db);
    free(fifo);
    scratch_remove(dir);
}
END_TEST

Suite *readonly_suite(void); /* test_main.c runs it */
Suite *readonly_suite(void)
{
    Suite *s = suite_create("readonly");
    TCase *tc = tcase_create("readonly");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reports_leave_the_directory_as_found);
    tcase_add_test(tc, test_recovered_trace_stays_one_file);
    tcase_add_test(tc, test_module_that_is_no_regular_file_is_never_opened);
    suite_add_tcase(s, tc);
    return s;
}
