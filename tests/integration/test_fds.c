/*
 * test_fds.c - the program's descriptor table is its own: a program that
 * closes what it inherited and opens its own files, one that does so while
 * stacks are being captured, and one under a tiny RLIMIT_NOFILE behave,
 * write and number their files exactly as untraced, with call stacks on
 * (the default). The unwinder's pipe is the tracer's, high, and checked
 * before use (preload/core/unwpipe.h).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "suites.h"

#define ROUNDS 40 /* fds_own.c's */

static char *read_file(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s is missing", path);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t n; (n = fread(buf + len, 1, cap - len - 1, f)) > 0;)
        len += n;
    buf[len] = '\0';
    fclose(f);
    return buf;
}

/* What fds_own writes into `name`: one line per round, nothing else. */
static void assert_log_intact(const char *dir, const char *name)
{
    char expected[ROUNDS * 64] = "";
    size_t used = 0;
    for (int round = 0; round < ROUNDS; round++)
        used += (size_t)snprintf(expected + used, sizeof expected - used,
                                 "%s round %d: the program's own data\n", name, round);
    char *got = read_file(dir, name);
    ck_assert_str_eq(got, expected);
    free(got);
}

static char *make_dir(struct world *w, const char *name)
{
    char *dir;
    ck_assert_int_ge(asprintf(&dir, "%s/%s", w->root, name), 0);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    return dir;
}

static sqlite3 *only_trace(struct world *w)
{
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    free_list(files, 1);
    return db;
}

/*
 * fds_own MODE untraced and traced, each writing into a directory of its
 * own, with a shell's RLIMIT_NOFILE and only 0, 1 and 2 open at the start:
 * both succeed, print `expected`, and leave their files whole. A traced run
 * that is `quiet` writes nothing on stderr either.
 */
static void assert_files_as_untraced(struct world *w, const char *mode, const char *expected,
                                     bool quiet)
{
    w->extra_env[0] = "CUTRACE_STACKS="; /* the default: native and Python */
    w->nofile_limit = 1024;
    char *dirs[2] = {make_dir(w, "plain"), make_dir(w, "traced")};
    for (int traced = 0; traced < 2; traced++) {
        const char *argv[] = {build_path("progs/fds_own"), mode, dirs[traced], NULL};
        struct run r = run_prog(w, traced, argv, 60);
        ck_assert_msg(r.status == 0, "%s run: %s", traced ? "traced" : "untraced", r.out);
        ck_assert_str_eq(r.out, expected);
        if (traced && quiet)
            ck_assert_msg(r.err_len == 0, "%s", r.err);
        assert_log_intact(dirs[traced], "a.log");
        assert_log_intact(dirs[traced], "b.log");
        run_free(&r);
        free(dirs[traced]);
    }
}

/* A daemon's start: every inherited descriptor closed, then its own files. */
START_TEST(test_closed_inherited_descriptors_stay_the_programs)
{
    struct world w;
    world_init(&w);
    assert_files_as_untraced(&w, "daemon", "a.log on 3, b.log on 4\n0 failures\n", true);

    /* ... and the stacks were captured, by libunwind. */
    sqlite3 *db = only_trace(&w);
    ck_assert_ptr_nonnull(
        strstr(tsql_text(db, "SELECT value FROM meta WHERE key = 'stacks'"), "native=libunwind"));
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested AND stack_id = 0"
                                  " AND api IN ('cudaMalloc', 'cudaFree', 'cudaMemGetInfo')"),
                     0);
    ck_assert_int_ge(tsql_int(db, "SELECT count(DISTINCT stack_id) FROM calls WHERE NOT nested"),
                     4);
    sqlite3_close(db);
    world_free(&w);
}
END_TEST

/*
 * Every descriptor closed while the tracer is capturing stacks (its pipe
 * included), then the program's files opened on those numbers: the
 * unwinder must not read, close or write them. (The tracer's trace files go
 * too, and its writer may then stop with a warning, the trace ending there:
 * what it holds must still be whole.)
 */
START_TEST(test_descriptors_closed_while_capturing_stay_the_programs)
{
    struct world w;
    world_init(&w);
    assert_files_as_untraced(&w, "late", "0 failures\n", false);

    /* Whatever the trace kept, its calls have stacks, each stored whole. */
    const char *args[] = {"recover", w.trace_dir, NULL};
    struct run r = harness_cutrace(&w, args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    sqlite3 *db = only_trace(&w);
    ck_assert_int_ge(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested"), 6);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested AND stack_id = 0"),
                     0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls c WHERE c.stack_id != 0 AND NOT"
                                  " EXISTS (SELECT 1 FROM stacks s WHERE s.stack_id = c.stack_id)"),
                     0);
    sqlite3_close(db);
    world_free(&w);
}
END_TEST

/*
 * RLIMIT_NOFILE 5: the program has descriptors 3 and 4 and nothing else;
 * the fake runtime needs one to dlopen libcuda. The tracer must leave both.
 */
START_TEST(test_tiny_descriptor_limit_leaves_the_program_its_descriptors)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_STACKS=";
    w.nofile_limit = 5;
    const char *argv[] = {build_path("progs/fds_own"), "limit", NULL};
    struct run plain = run_prog(&w, false, argv, 60);
    struct run traced = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_str_eq(plain.out, "first open: 3\ncudaGetDeviceCount: 0\ncudaMalloc: 0\n"
                                "cudaFree: 0\ncudaMemGetInfo: 0\nopen after the calls: 3\n");
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

Suite *fds_suite(void)
{
    Suite *s = suite_create("fds");
    TCase *tc = tcase_create("fds");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_closed_inherited_descriptors_stay_the_programs);
    tcase_add_test(tc, test_descriptors_closed_while_capturing_stay_the_programs);
    tcase_add_test(tc, test_tiny_descriptor_limit_leaves_the_program_its_descriptors);
    suite_add_tcase(s, tc);
    return s;
}
